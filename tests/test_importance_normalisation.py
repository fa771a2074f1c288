"""The normaliser the normalised importance estimators share (offeval_core/importance/normalisation.py), read by
the Ibis reduce and by the session bootstrap: the group ratio and the pooling rule by hand, groups told apart by
their keys (not by a joined text), and the reduce's linearised value of exposure-weighted NCIS against its
delta-method gradient written out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core import importance as imp
from offeval_core.errors import WrongType
from offeval_core.importance.normalisation import MIN_CONTEXT_ROWS, group_ratio, pooled_context
from offeval_core.logs import read_logs
from tests.test_ncis_session_scale import LOG2, ranking_logs, value


def test_group_ratio_by_hand_and_groups_without_weight():
    a, y, u = np.array([3.0, 1.0]), np.array([4.0, 0.0]), np.array([2.0, 5.0])
    s, w = np.array([1.5, 0.0]), np.array([6.0, 2.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = group_ratio(a, y, u, s, w, exposure_session=False, where=np.where)
        share = group_ratio(a, y, u, s, w, exposure_session=True, where=np.where)
    assert plain.tolist() == [0.75, 0.0]  # A / Y; Y = 0 gives 0
    assert share.tolist() == [(3 / 2) / (1.5 / 6), 0.0]  # (A / U) / (S / W); S = 0 gives 0


def test_pooled_context_at_its_boundary():
    rows = np.array([MIN_CONTEXT_ROWS - 1, MIN_CONTEXT_ROWS, MIN_CONTEXT_ROWS - 1, 0])
    exact = np.array([0, 0, 1, 0])
    assert pooled_context(rows, exact).tolist() == [True, False, False, True]
    assert pooled_context(rows, exact == 1).tolist() == [True, False, False, True]


def _sessions(**labels) -> pd.DataFrame:
    """Two sessions of two rows each, propensity weights, each in its own (experiment, day, arm) cell and context:
    s = Σ w̄ = 1 and 3, a = Σ w̄ r = 1 and 1, so y = s / m = 0.5 and 1.5."""
    base = {"session": [0, 1], "m": [2.0, 2.0], "s": [1.0, 3.0], "a": [1.0, 1.0], "c": [0.0, 1.0],
            "w_sum": [1.0, 3.0], "p": [0.0, 0.0], "exact": [0, 0], "propensity": [True, True],
            "experiment_id": ["x", "x"], "day": ["2024-01-01", "2024-01-01"], "arm": ["a", "a"],
            "stratum": ["s", "s"], "context": ["c", "c"]}
    return pd.DataFrame({**base, **labels})


@pytest.mark.parametrize("base, labels", [
    # joined with "|", ("a", "b|c") and ("a|b", "c") are the same text; they are two cells
    ("point-ncis", dict(arm=["a", "a|b"], context=["b|c", "c"])),
    ("piece-ncis", dict(arm=["a", "a|b"], stratum=["b|c", "c"])),
    ("ncis", dict(arm=["a", "a|b"])),
])
def test_groups_are_told_apart_by_their_keys_not_by_a_joined_text(base, labels):
    """Each session alone in its group: U_g R_g = 1 · a / y = 2 and 2/3, the value (2 + 2/3) / 2 = 4/3 (one shared
    group would give (1 + 1) / (0.5 + 1.5) = 1). NCIS with propensity weights is one global ratio: 1 for both."""
    per = _sessions(**labels)
    target, logging = imp.values_from_sessions(per, base=base, scale="session")
    assert logging == 0.5
    if base == "ncis":
        assert target == pytest.approx(1.0, rel=1e-15)
        per = per.assign(propensity=False)  # exposure weights: NCIS per cell, R = (A / U) / (S / W) = a here
        assert imp.values_from_sessions(per, base=base, scale="session")[0] == pytest.approx(1.0, rel=1e-15)
        per = per.assign(w_sum=[2.0, 3.0])  # R = a · w / s: 2 and 1, value 3 / 2
        assert imp.values_from_sessions(per, base=base, scale="session")[0] == pytest.approx(1.5, rel=1e-15)
    else:
        assert target == pytest.approx(4 / 3, rel=1e-15)
        joined = per.assign(arm="a", context="c", stratum="s")  # one group: 1
        assert imp.values_from_sessions(joined, base=base, scale="session")[0] == pytest.approx(1.0, rel=1e-15)


@pytest.mark.parametrize("seed", [1, 4])
def test_exposure_ncis_standard_error_is_the_delta_method_of_a_w_over_s(seed):
    """Exposure-weighted NCIS in one (experiment, day, arm) cell is V = Ā W̄ / S̄ over the per-session sums
    a = Σ w̄ r, s = Σ w̄, w = Σ w. Its delta-method SE, written out here: ψ_i = g · (a_i, s_i, w_i) with the
    gradient g = (W̄ / S̄, −Ā W̄ / S̄², Ā / S̄), SE = sd(ψ, ddof = 1) / √n. The reduce's linearised values must give
    the same SE (a ψ with the right sum but a wrong split over sessions would not)."""
    df = ranking_logs(seed, n=120).assign(day=1)
    logs = read_logs(df)
    m = imp.reduce_importance(logs, clips=(1.5,), cappings=("max",), scales=("session",), **LOG2)
    per = imp.session_sums(logs, reward="click", policy="t", clip=1.5, **LOG2)
    a, s, w = (per[k].to_numpy() for k in ("a", "s", "w_sum"))
    n = len(per)
    g = np.array([w.mean() / s.mean(), -a.mean() * w.mean() / s.mean() ** 2, a.mean() / s.mean()])
    psi = np.column_stack([a, s, w]) @ g
    est = value(m, "ncis", clip=1.5)
    assert est.value == pytest.approx(a.mean() * w.mean() / s.mean(), rel=1e-12)
    assert est.stderr == pytest.approx(psi.std(ddof=1) / math.sqrt(n), rel=1e-9)


@pytest.mark.parametrize("base", ["is", "cis", "snips", "ncis", "piece-ncis", "point-ncis"])
def test_no_session_or_no_count_has_no_value(base):
    for propensity in (True, False):
        per = _sessions(propensity=[propensity] * 2)
        for scale in ("session", "impression"):
            values = imp.values_from_sessions(per.iloc[:0], base=base, scale=scale)
            assert all(math.isnan(v) for v in values)
            values = imp.values_from_sessions(per, base=base, scale=scale, counts=np.zeros(2, dtype=int))
            assert all(math.isnan(v) for v in values)


@pytest.mark.parametrize("base, expected", [
    # one cell whose day is missing: its sessions share a normaliser, A / Y = 2 / 4 per session counted: 0.5
    ("piece-ncis", 0.5),
    # one-row contexts (m = 1) of that cell pooled into one: the same 0.5 (each alone would give (1 + 1/3) / 2)
    ("point-ncis", 0.5),
])
def test_a_missing_key_label_is_a_group_of_its_own(base, expected):
    per = _sessions(day=[None, None], context=["c1", "c2"], m=[1.0, 1.0])
    assert imp.values_from_sessions(per, base=base, scale="session")[0] == pytest.approx(expected, rel=1e-15)


def test_one_session_with_exposure_weights_is_normalised_by_its_weight_mass():
    """One session, exposure weights: R = (a / 1) / (s / w) = 1 · 4 / 1 = 4 (the propensity rule's a / (s / m)
    would give 2)."""
    per = _sessions(propensity=[False, False], w_sum=[4.0, 3.0]).iloc[:1]
    assert imp.values_from_sessions(per, base="ncis", scale="session")[0] == pytest.approx(4.0, rel=1e-15)


def _per_session(arms, contexts, rows, exact=None) -> pd.DataFrame:
    """A per-session table as ``importance.session_sums`` gives it (the columns the pooling rule reads)."""
    n = len(arms)
    return pd.DataFrame({"experiment_id": "e", "day": 1, "arm": arms, "context": contexts, "m": rows,
                         "exact": exact if exact is not None else [0] * n})


def test_pooled_contexts_read_the_rows_by_their_labels_not_their_positions():
    """Control sessions 'a' (2 rows: kept) and 'b' (1 row: pooled); treatment 'c' (1 row: pooled). Reordered, the
    table's labels no longer match its positions: the control count is still 1 of 2, not the treatment's row."""
    per = _per_session(["control", "control", "treatment"], ["a", "b", "c"], [2, 1, 1])
    assert imp.pooled_sessions(per).tolist() == [False, True, True]
    assert imp.pooled_contexts(per) == (1, 2)
    moved = per.iloc[[2, 0, 1]].set_axis([10, 11, 12])       # treatment first, labels 10-12
    assert imp.pooled_contexts(moved) == (1, 2)
    assert imp.pooled_contexts(moved, arm="treatment") == (1, 1)
    assert imp.pooled_contexts(per.iloc[[1, 2, 0]]) == (1, 2)  # labels 1, 2, 0: position 0 is 'b'


def test_a_table_without_a_column_the_rule_reads_is_refused_by_name():
    per = _per_session(["control"], ["a"], [1]).drop(columns="context")
    with pytest.raises(WrongType, match=r"per must be a per-session table of importance.session_sums \(columns m, "
                                        r"exact, experiment_id, day, arm, context\), got DataFrame"):
        imp.pooled_sessions(per)
