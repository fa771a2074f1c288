"""Slate estimators (IIPS, RIPS, SIPS and self-normalised versions): hand-computed two-slot examples, a
direct per-session reference to 1e-9 (property tests), π = π0, the CLI and the schema's propensity checks."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offeval_core import cli, stats
from offeval_core.errors import InputError, UnknownName
from offeval_core.logs import LogValidationError, read_logs
from offeval_core.slate import estimate, from_arrays, from_logs, slate_weights, slot_discount
from offeval_core.slate.estimators import weights_for

IPS = ("iips", "rips", "sips", "sniips", "snrips", "snsips")

# Two sessions of two slots. Session A: reward at slot 1; session B: reward at slot 2.
HAND = {
    "session": [0, 0, 1, 1], "slot": [1, 2, 1, 2], "reward": [1.0, 0.0, 0.0, 1.0],
    "logging_marginal": [0.5, 0.4, 0.25, 0.5], "target_marginal": [0.6, 0.2, 0.5, 0.5],
    "logging_conditional": [0.5, 0.8, 0.25, 0.5], "target_conditional": [0.6, 0.5, 0.5, 1.0],
}
# IIPS weights A (1.2, 0.5), B (2, 1); RIPS cumulative A (1.2, 0.75), B (2, 4); SIPS A (0.75, 0.75), B (4, 4).
HAND_VALUES = {
    "iips": (1.2 + 1.0) / 2,                       # 1.1
    "rips": (1.2 + 4.0) / 2,                       # 2.6
    "sips": (0.75 + 4.0) / 2,                      # 2.375
    "sniips": 1.2 / 3.2 + 1.0 / 1.5,               # slot 1: 1.2 / (1.2 + 2); slot 2: 1 / (0.5 + 1)
    "snrips": 1.2 / 3.2 + 4.0 / 4.75,
    "snsips": 0.75 / 4.75 + 4.0 / 4.75,            # = 1
}


def hand():
    h = dict(HAND)
    return from_arrays(h.pop("session"), h.pop("slot"), h.pop("reward"), **h)


def test_hand_weights():
    d = hand()
    assert slate_weights(d, "iips").tolist() == pytest.approx([1.2, 0.5, 2.0, 1.0], abs=1e-12)
    assert slate_weights(d, "rips").tolist() == pytest.approx([1.2, 0.75, 2.0, 4.0], abs=1e-12)
    assert slate_weights(d, "sips").tolist() == pytest.approx([0.75, 0.75, 4.0, 4.0], abs=1e-12)


@pytest.mark.parametrize("name", IPS)
def test_hand_values(name):
    res = estimate(hand(), estimator=name, level=0.95)
    assert res.target.value == pytest.approx(HAND_VALUES[name], abs=1e-12)
    assert res.logging.value == pytest.approx(1.0, abs=1e-12)
    assert res.effect.value == pytest.approx(HAND_VALUES[name] - 1.0, abs=1e-12)


def test_hand_plain_standard_errors_match_mean_of_session_values():
    # RIPS session values (1.2, 4), logging (1, 1): paired differences (0.2, 3)
    res = estimate(hand(), estimator="rips", level=0.95)
    ref = stats.mean_estimate(2, 5.2, 2 * 1.4 ** 2, level=0.95)  # Σ(x − 2.6)² = 1.4² + 1.4²
    assert res.target.stderr == pytest.approx(ref.stderr, rel=1e-12)
    eff = stats.paired_effect(2, 3.2, 2 * 1.4 ** 2, level=0.95)  # Σ(d − 1.6)²
    assert res.effect.stderr == pytest.approx(eff.stderr, rel=1e-12)
    assert res.effect.p_value == pytest.approx(eff.p_value, rel=1e-12)


def test_single_slot_self_normalised_matches_ratio_delta_method():
    rng = np.random.default_rng(3)
    n = 50
    w0, w1 = rng.uniform(0.1, 1, n), rng.uniform(0.05, 1, n)
    r = rng.binomial(1, 0.4, n).astype(float)
    d = from_arrays(np.arange(n), np.ones(n), r, logging_marginal=w0, target_marginal=w1)
    w = w1 / w0
    res = estimate(d, estimator="sniips", level=0.9)
    x, y = w * r, w
    ref = stats.ratio_estimate(n, *stats.moments_of(x)[1:], *stats.moments_of(y)[1:],
                               float(((x - x.mean()) * (y - y.mean())).sum()), level=0.9)
    assert res.target.value == pytest.approx(ref.value, rel=1e-12)
    assert res.target.stderr == pytest.approx(ref.stderr, rel=1e-9)


# ------------------------------------------------------------------------------ direct reference (loops)


def reference(rows: pd.DataFrame, name: str, lam: np.ndarray) -> float:
    """The formulas of docs/slate.md, session by session in plain Python."""
    base = name[2:] if name.startswith("sn") else name
    weights = {}
    for s, g in rows.groupby("session", sort=True):
        g = g.sort_values("slot")
        ratios = (g["target_conditional"] / g["logging_conditional"]).tolist()
        for j, (slot, row) in enumerate(zip(g["slot"], g.itertuples(), strict=True)):
            if base == "iips":
                w = row.target_marginal / row.logging_marginal
            elif base == "rips":
                w = math.prod(ratios[: j + 1])
            else:
                w = math.prod(ratios)
            weights[(s, slot)] = (w, row.reward)
    n = rows["session"].nunique()
    total = 0.0
    for k in sorted(rows["slot"].unique()):
        at_k = [(w, r) for (s, slot), (w, r) in weights.items() if slot == k]
        if name.startswith("sn"):
            sw = sum(w for w, _ in at_k)
            total += lam[k - 1] * (len(at_k) / n) * (sum(w * r for w, r in at_k) / sw if sw > 0 else 0.0)
        else:
            total += lam[k - 1] * sum(w * r for w, r in at_k) / n
    return total


@st.composite
def slate_logs(draw):
    n = draw(st.integers(2, 7))
    lengths = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    rows = []
    prob = st.floats(0.05, 1.0, allow_nan=False)
    for s, length in enumerate(lengths):
        for k in range(1, length + 1):
            rows.append({"session": s, "slot": k, "reward": draw(st.sampled_from([0.0, 1.0, 0.5, 3.0])),
                         "logging_marginal": draw(prob), "target_marginal": draw(prob),
                         "logging_conditional": draw(prob), "target_conditional": draw(prob)})
    return pd.DataFrame(rows)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slate_logs(), st.sampled_from(IPS), st.sampled_from([None, "reciprocal", "exponential:0.5"]))
def test_matches_direct_reference(rows, name, spec):
    shuffled = rows.sample(frac=1.0, random_state=0)  # input order must not matter
    d = from_arrays(shuffled["session"], shuffled["slot"], shuffled["reward"],
                    **{c: shuffled[c] for c in ("logging_marginal", "target_marginal", "logging_conditional",
                                                 "target_conditional")})
    lam = slot_discount(spec, 3)
    got = estimate(d, estimator=name, slot_weights=spec).target.value
    assert got == pytest.approx(reference(rows, name, lam), rel=1e-9, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(slate_logs(), st.sampled_from(IPS))
def test_target_equal_to_logging_returns_logging_value(rows, name):
    d = from_arrays(rows["session"], rows["slot"], rows["reward"], logging_marginal=rows["logging_marginal"],
                    target_marginal=rows["logging_marginal"], logging_conditional=rows["logging_conditional"],
                    target_conditional=rows["logging_conditional"])
    res = estimate(d, estimator=name)
    assert res.target.value == pytest.approx(res.logging.value, rel=1e-12, abs=1e-12)
    assert res.effect.value == pytest.approx(0.0, abs=1e-12)


def test_cascade_dr_with_target_equal_to_logging_returns_logging_value():
    rows = pd.DataFrame({"session": np.repeat(np.arange(40), 2), "slot": np.tile([1, 2], 40)})
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 1, len(rows))
    d = from_arrays(rows["session"], rows["slot"], rng.binomial(1, 0.3, len(rows)), logging_conditional=p,
                    target_conditional=p)
    res = estimate(d, estimator="cascade-dr", rng=1)
    assert res.target.value == pytest.approx(res.logging.value, abs=1e-12)


def test_clip_caps_weights():
    # clip 1.5: IIPS weights (1.2, 0.5, 1.5, 1): (1.2 + 1) / 2
    assert estimate(hand(), estimator="iips", clip=1.5).target.value == pytest.approx(1.1, abs=1e-12)
    assert estimate(hand(), estimator="rips", clip=1.5).target.value == pytest.approx((1.2 + 1.5) / 2, abs=1e-12)


def test_missing_columns_and_gaps_are_specific_errors():
    d = from_arrays([0, 0], [1, 2], [1.0, 0.0], logging_marginal=[0.5, 0.5], target_marginal=[0.5, 0.5])
    with pytest.raises(UnknownName, match="estimator rips needs the column"):
        estimate(d, estimator="rips")
    gap = from_arrays([0, 0], [1, 3], [1.0, 0.0], logging_conditional=[0.5, 0.5], target_conditional=[0.5, 0.5])
    with pytest.raises(InputError, match="session #1 lacks slot 2"):
        estimate(gap, estimator="sips")
    with pytest.raises(ValueError, match="unknown slate estimator 'xips'"):
        estimate(d, estimator="xips")


# ------------------------------------------------------------------------------------- schema and CLI


def hand_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "session_id": ["A", "A", "B", "B"], "rank": [1, 2, 1, 2], "item_id": [1, 2, 3, 1], "click": HAND["reward"],
        "logging_propensity": HAND["logging_marginal"], "target_propensity__new": HAND["target_marginal"],
        "logging_conditional_propensity": HAND["logging_conditional"],
        "target_conditional_propensity__new": HAND["target_conditional"],
    })


def test_conditional_propensities_are_schema_columns_not_rewards():
    logs = read_logs(hand_frame())
    assert logs.rewards == ("click",)
    data = from_logs(logs, reward="click", policy="new")
    assert estimate(data, estimator="snrips").target.value == pytest.approx(HAND_VALUES["snrips"], abs=1e-12)
    with pytest.raises(UnknownName, match="unknown policy 'old'"):
        from_logs(logs, reward="click", policy="old")


@pytest.mark.parametrize(("column", "value", "message"), [
    ("logging_conditional_propensity", 0.0, "column 'logging_conditional_propensity' must hold probabilities in (0, 1]"),
    ("logging_conditional_propensity", 1.5, "column 'logging_conditional_propensity' must hold probabilities in (0, 1]"),
    ("target_conditional_propensity__new", float("nan"),
     "column 'target_conditional_propensity__new' must hold probabilities in [0, 1]"),
])
def test_conditional_propensity_validation(column, value, message):
    df = hand_frame()
    df.loc[2, column] = value
    with pytest.raises(LogValidationError) as err:
        read_logs(df, name="slate.csv")
    assert message in str(err.value)
    assert "data row 3" in str(err.value)


@pytest.mark.parametrize(("argument", "value", "message"), [
    ("logging_marginal", 0.0, "<arrays>: column 'logging_marginal' must hold probabilities in (0, 1]; found 0 at data row 3"),
    ("logging_conditional", 1.5,
     "<arrays>: column 'logging_conditional' must hold probabilities in (0, 1]; found 1.5 at data row 3"),
    ("target_marginal", -0.25, "<arrays>: column 'target_marginal' must hold probabilities in [0, 1]; found -0.25 at data row 3"),
    ("target_conditional", float("nan"),
     "<arrays>: column 'target_conditional' must hold probabilities in [0, 1]; found nan at data row 3"),
    ("reward", -1.0, "<arrays>: reward column 'reward' must be non-negative (DCG and nDCG assume gains ≥ 0); found -1 "
                     "at data row 3"),
    ("reward", float("inf"), "<arrays>: reward column 'reward' must hold finite numbers (no NaN, empty or inf); found inf "
                             "at data row 3"),
])
def test_arrays_pass_the_rules_read_logs_checks_their_columns_by(argument, value, message):
    # the entry point for arrays checks what read_logs checks of the same columns: a propensity 0 would give
    # a weight 1/0, one above 1 a weight below the truth, silently
    arrays = {k: np.array(v, dtype=np.float64) for k, v in HAND.items() if k not in ("session", "slot")}
    arrays[argument][2] = value
    with pytest.raises(InputError) as err:
        from_arrays(HAND["session"], HAND["slot"], arrays.pop("reward"), **arrays)
    assert str(err.value) == message
    assert err.value.column == argument


def test_arrays_of_another_length_than_the_sessions_are_refused():
    # a longer reward array was read at the sessions' positions only: a silent subset
    with pytest.raises(InputError) as err:
        from_arrays([0, 0, 1], [1, 2, 1], [1.0, 0.0, 1.0, 1.0])
    assert str(err.value) == "<arrays>: 'reward' must hold one value per row (3 rows, as 'session'), got (4,)"
    with pytest.raises(InputError, match=r"'target_marginal' must hold one value per row \(3 rows, as 'session'\), "
                                         r"got \(2,\)"):
        from_arrays([0, 0, 1], [1, 2, 1], [1.0, 0.0, 1.0], logging_marginal=[0.5, 0.5, 1.0], target_marginal=[0.5, 0.5])


@pytest.mark.parametrize("name", IPS)
def test_cli_estimate_on_slate_logs(tmp_path, capsys, name):
    path = tmp_path / "slate.csv"
    hand_frame().to_csv(path, index=False)
    assert cli.main(["estimate", str(path), "--reward", "click", "--policy", "new", "--estimator", name,
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g = out["groups"][0]
    assert g["target"]["value"] == pytest.approx(HAND_VALUES[name], abs=1e-12)
    assert g["logging"]["value"] == pytest.approx(1.0, abs=1e-12)
    assert g["effect"]["value"] == pytest.approx(HAND_VALUES[name] - 1, abs=1e-12)
    assert out["settings"]["estimator"] == name


def test_cli_slot_weights_and_text(tmp_path, capsys):
    path = tmp_path / "slate.csv"
    hand_frame().to_csv(path, index=False)
    assert cli.main(["estimate", str(path), "--reward", "click", "--policy", "new", "--estimator", "iips",
                     "--slot-weights", "reciprocal", "--json"]) == 0
    # λ = (1, 1/2): (1.2 + 0.5 · 1) / 2
    assert json.loads(capsys.readouterr().out)["groups"][0]["target"]["value"] == pytest.approx(0.85, abs=1e-12)
    assert cli.main(["estimate", str(path), "--reward", "click", "--policy", "new", "--estimator", "sips"]) == 0
    text = capsys.readouterr().out
    assert "SIPS (none on the reward (whole-slate weight))" in text
    assert "2.3750" in text


def test_slot_discount_and_clip_boundaries():
    assert slot_discount(None, 2).tolist() == [1.0, 1.0]
    assert slot_discount(" Sum ", 2).tolist() == [1.0, 1.0] and slot_discount("", 3).tolist() == [1.0] * 3
    assert slot_discount([1.0, 0.5, 0.25], 2).tolist() == [1.0, 0.5]          # longer arrays are cut to K
    assert slot_discount("log2", 3).tolist() == pytest.approx([1.0, 1 / math.log2(3), 0.5], abs=1e-15)
    with pytest.raises(ValueError, match="length ≥ 3"):
        slot_discount([1.0, 0.5], 3)
    with pytest.raises(ValueError, match="finite 1-d array"):
        slot_discount([1.0, math.nan], 2)
    # clip 1 is allowed (every weight capped at 1), below 1 is not
    assert estimate(hand(), estimator="iips", clip=1.0).target.value == pytest.approx((1.0 + 1.0) / 2, abs=1e-12)
    with pytest.raises(ValueError, match="clip must be ≥ 1"):
        estimate(hand(), estimator="iips", clip=0.99)
    with pytest.raises(ValueError, match="has no single weight per row"):
        weights_for(hand(), "cascade-dr")
    with pytest.raises(ValueError, match="unknown slate estimator 'dr'"):
        estimate(hand(), estimator="dr")
    assert weights_for(hand(), "snrips", clip=1.5).tolist() == pytest.approx([1.2, 0.75, 1.5, 1.5], abs=1e-12)


def test_slot_weights_enter_plain_and_normalised_values():
    # λ = (1, 0.5): IIPS (1.2 + 0.5 · 1) / 2 = 0.85; SNIIPS 1.2 / 3.2 + 0.5 · 1 / 1.5 = 0.7083
    assert estimate(hand(), estimator="iips", slot_weights=[1.0, 0.5]).target.value == pytest.approx(0.85, abs=1e-12)
    assert estimate(hand(), estimator="sniips", slot_weights=[1.0, 0.5]).target.value == pytest.approx(
        1.2 / 3.2 + 0.5 / 1.5, abs=1e-12)
    # the logging value weighs the slots the same way: (1 + 0.5) / 2
    assert estimate(hand(), estimator="iips", slot_weights=[1.0, 0.5]).logging.value == pytest.approx(0.75, abs=1e-12)


def test_a_slot_without_weight_adds_nothing_and_keeps_the_se_finite():
    # the target never shows the logged slot-2 items (π = 0): slot 2's summed weight is 0, its ratio counts 0,
    # and SNRIPS is slot 1's alone, 1.2 / 3.2 (A's weight 1.2 with reward 1; B's 2 with reward 0)
    h = dict(HAND)
    h["target_conditional"] = [0.6, 0.0, 0.5, 0.0]
    d = from_arrays(h.pop("session"), h.pop("slot"), h.pop("reward"), **h)
    res = estimate(d, estimator="snrips")
    assert res.target.value == pytest.approx(1.2 / 3.2, abs=1e-12)
    # influence per session: (w r − R w) / b̄ with b̄ = 1.6: A (1.2 − 0.45) / 1.6, B (0 − 0.75) / 1.6
    assert res.target.stderr == pytest.approx(abs(0.75 / 1.6 + 0.75 / 1.6) / 2, abs=1e-12)


def test_slate_estimate_to_dict_and_the_nan_estimate():
    from offeval_core.slate.estimators import nan_estimate

    d = estimate(hand(), estimator="rips").to_dict()
    assert (d["estimator"], d["label"]) == ("rips", "RIPS")
    assert d["target"]["value"] == pytest.approx(2.6) and "note" not in d
    assert d["diagnostics"] == pytest.approx({"ess": 4.75 ** 2 / 16.5625, "ess_share": 4.75 ** 2 / 16.5625 / 2,
                                              "max_weight": 4.0, "max_share": 4 / 4.75, "mean_weight": 1.6})
    dr = estimate(hand(), estimator="cascade-dr", folds=1).to_dict()
    assert dr["label"] == "Cascade-DR" and dr["note"] == "reward model: slot rates, cross-fitted over 1 folds"
    n = nan_estimate(0.9)
    assert math.isnan(n.value) and math.isnan(n.stderr) and n.n == 0
    assert math.isnan(n.ci.low) and math.isnan(n.ci.high) and n.ci.level == 0.9


def test_normalised_kernel_influence_is_the_delta_method_gradient_with_a_short_session():
    """Session 1 has no slot 2, so the share of sessions present at slot 2 is c₂ = 2/3: the value is
    Σ_k λ_k c_k A_k / B_k over the per-slot means A (w·r), B (w), c (present), and each influence value is the
    gradient of that function at the means applied to the session's deviation,
    ψ_i = Σ_k λ_k [c_k/B_k (wr_ik − A_k) − c_k A_k/B_k² (w_ik − B_k) + A_k/B_k (p_ik − c_k)]."""
    from offeval_core.slate.kernels import normalised_kernel, plain_kernel
    from offeval_core.slate.schema import SlateData

    data = SlateData(session=np.array([0, 0, 1, 2, 2]), slot=np.array([1, 2, 1, 1, 2]),
                     reward=np.array([1.0, 0.0, 0.0, 1.0, 1.0]))
    w, lam = np.array([1.2, 0.5, 2.0, 0.8, 1.5]), np.array([1.0, 0.5])
    wr = np.array([[1.2, 0.0], [0.0, 0.0], [0.8, 1.5]])
    ww = np.array([[1.2, 0.5], [2.0, 0.0], [0.8, 1.5]])
    p = np.array([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    a, b, c = wr.mean(0), ww.mean(0), p.mean(0)
    assert c[1] == pytest.approx(2 / 3)
    value, infl = normalised_kernel(data, w, lam)
    assert value == pytest.approx(float(np.sum(lam * c * a / b)), rel=1e-12)
    grad = lam * c / b * (wr - a) - lam * c * a / b ** 2 * (ww - b) + lam * a / b * (p - c)
    np.testing.assert_allclose(infl, grad.sum(axis=1), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(plain_kernel(data, w, lam), [1.2, 0.0, 0.8 + 0.5 * 1.5], rtol=1e-12)


def test_segment_cumprod_leaves_its_input_alone_and_iips_names_its_columns():
    from offeval_core.errors import UnknownName
    from offeval_core.slate.schema import from_arrays
    from offeval_core.slate.weights import segment_cumprod, slate_weights

    x = np.array([2.0, 3.0, 5.0, 7.0])
    assert segment_cumprod(x, np.array([0, 1, 0, 1])).tolist() == [2.0, 6.0, 5.0, 35.0]
    assert x.tolist() == [2.0, 3.0, 5.0, 7.0]                       # a copy: the caller's array is unchanged
    ints = segment_cumprod(np.array([2, 3, 4]), np.array([0, 1, 2]))
    assert ints.dtype == np.float64 and ints.tolist() == [2.0, 6.0, 24.0]
    assert segment_cumprod(np.array([]), np.array([], dtype=int)).tolist() == []   # no row: no position.max()
    d = from_arrays([0, 0], [1, 2], [1.0, 0.0], logging_conditional=[0.5, 1.0], target_conditional=[0.8, 1.0])
    with pytest.raises(UnknownName) as err:
        slate_weights(d, "iips")
    assert str(err.value) == ("<arrays>: estimator iips needs the column(s) logging_propensity, "
                              "target_propensity__<policy>")
