"""PieceNCIS value strata (Gilotte Sec. 5.3, ``importance.strata``) by hand: the random split, the value model
fitted on one side (mean session reward per feature value, the overall mean of that side for a value it never
saw), the strata {V⁻¹([b^k, b^(k+1)))} of the other side with V = 0 on its own, and the logs it returns."""

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.errors import InputError, UnknownName
from offeval_core.importance.strata import subset_sessions, value_strata
from offeval_core.logs import read_logs

# 12 sessions: session_id 100 + s, segment by s, clicks per session chosen so each segment's mean is known;
# segment "d" holds only session 111, so whichever side does not hold it has never seen "d"
SEGMENTS = ["a", "b", "c"] * 3 + ["z", "z", "d"]
CLICKS = [[1, 1, 1, 1], [0], [0, 0], [1, 1, 1, 1], [0], [1, 0], [1, 1, 1, 1], [0, 0], [0, 1], [1], [0], [1, 1]]


def _logs():
    rows = [{"session_id": 100 + s, "rank": r, "click": c, "segment": SEGMENTS[s]}
            for s, clicks in enumerate(CLICKS) for r, c in enumerate(clicks, 1)]
    return read_logs(pd.DataFrame(rows))


def _expected(fit_share: float, seed: int, base: float, features=("segment",)):
    """The split and the labels, computed independently from the documented rule."""
    value = np.array([sum(c) for c in CLICKS], dtype=float)
    seg = np.array(SEGMENTS)
    fit = np.random.default_rng(seed).uniform(size=len(CLICKS)) < fit_share   # sessions in session_id order
    overall = value[fit].mean()
    labels = {}
    for s in np.flatnonzero(~fit):
        same = fit & (seg == seg[s])
        v = (value[same].mean() if same.any() else overall) if features else overall
        labels[100 + s] = "V=0" if v == 0 else f"[{base:g}^{math.floor(math.log(v) / math.log(base))}, " \
                                                f"{base:g}^{math.floor(math.log(v) / math.log(base)) + 1})"
    return fit, labels


@pytest.mark.parametrize("seed", [3, 11])
def test_value_strata_by_hand(seed):
    logs = _logs()
    fit, labels = _expected(0.5, seed, 2.0)
    assert 0 < fit.sum() < len(fit)
    ev, strata = value_strata(logs, reward="click", features=["segment"], fit_share=0.5, base=2.0, rng=seed)
    assert strata.name == "value_stratum"
    assert strata.to_dict() == labels
    assert sorted(ev.sessions["session_id"]) == sorted(labels)


def test_value_strata_labels_below_one_at_zero_and_for_an_unseen_value():
    """Seed 1 fits on sessions 2, 4, 5, 7, 9 (values 0, 0, 1, 0, 1: overall mean 0.4): segments "a" and "d" are
    never seen there, so their sessions get 0.4, in [2^-2, 2^-1); "b" has a fit-side mean of 0, "V=0"; "c" has
    1 / 2, in [2^-1, 2^0); "z" has 1, in [2^0, 2^1)."""
    fit, labels = _expected(0.5, 1, 2.0)
    assert np.flatnonzero(fit).tolist() == [2, 4, 5, 7, 9]
    assert labels == {100: "[2^-2, 2^-1)", 101: "V=0", 103: "[2^-2, 2^-1)", 106: "[2^-2, 2^-1)",
                      108: "[2^-1, 2^0)", 110: "[2^0, 2^1)", 111: "[2^-2, 2^-1)"}
    _, strata = value_strata(_logs(), reward="click", features=["segment"], fit_share=0.5, rng=1)
    assert strata.to_dict() == labels
    values = set(labels.values())
    assert "V=0" in values and any("^-" in v for v in values), values
    # base 3: the same values on a coarser grid (0.4 and 1 / 2 in [3^-1, 3^0))
    _, labels3 = _expected(0.5, 1, 3.0)
    assert labels3[100] == labels3[108] == "[3^-1, 3^0)"
    assert value_strata(_logs(), reward="click", features=["segment"], base=3.0, rng=1)[1].to_dict() == labels3


def test_value_strata_without_features_is_one_value_for_every_session():
    _, labels = _expected(0.5, 3, 2.0, features=())
    _, strata = value_strata(_logs(), reward="click", features=[], rng=3)
    assert strata.to_dict() == labels and len(set(labels.values())) == 1


def test_value_strata_checks_its_options_and_the_split():
    logs = _logs()
    for share in (0, 0.0, 1, 1.0, 1.5, -0.1):
        with pytest.raises(InputError, match=rf"^fit_share must be strictly between 0 and 1, got {share!r}$"):
            value_strata(logs, reward="click", features=["segment"], fit_share=share)
    for base in (1, 1.0, 0.5):
        with pytest.raises(InputError, match=rf"^base must be > 1, got {base!r}$"):
            value_strata(logs, reward="click", features=["segment"], base=base)
    msg = "value_strata: the random split left one side empty; use more sessions"
    with pytest.raises(InputError, match=f"^{msg}$"):    # every uniform draw is below 1 - 1e-12
        value_strata(logs, reward="click", features=["segment"], fit_share=1 - 1e-12, rng=0)
    with pytest.raises(InputError, match=f"^{msg}$"):
        value_strata(logs, reward="click", features=["segment"], fit_share=1e-12, rng=0)
    with pytest.raises(UnknownName, match="^features 'genre' is not a column of the logs"):
        value_strata(logs, reward="click", features=["genre"], rng=0)


def test_subset_sessions_keeps_rows_and_renumbers_codes_densely():
    logs = _logs()
    keep = np.array([1, 4, 11])                        # session codes = position in session_id order
    sub = subset_sessions(logs, keep)
    assert list(sub.frame.columns) == list(logs.frame.columns)
    assert list(sub.sessions.columns) == list(logs.sessions.columns)
    assert sub.sessions["session"].tolist() == [0, 1, 2] and sub.sessions["session"].dtype == np.int64
    assert sub.sessions["session_id"].tolist() == [101, 104, 111]
    assert sub.frame.index.tolist() == list(range(len(sub.frame)))
    assert sub.sessions.index.tolist() == [0, 1, 2]
    # every row keeps its session: the renumbered code points at the same session_id
    ids = dict(zip(sub.sessions["session"], sub.sessions["session_id"], strict=True))
    assert [ids[c] for c in sub.frame["session"]] == sub.frame["session_id"].tolist()
    assert sub.frame["session"].dtype == np.int64
    assert sub.frame["click"].tolist() == [0.0, 0.0, 1.0, 1.0]
