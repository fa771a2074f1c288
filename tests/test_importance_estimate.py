"""importance.estimate by hand: one estimate's values, CIs and diagnostics on a small propensity log, its
options (clip, capping, arm, weights, discounts, strata, level), the result's dict, the PointNCIS pooled-context
count and warning, and the Midzuno-Sen normaliser on scripted draws.

The log ``LOG``: four control sessions of one row each, click 1, 0, 1, 0, logging propensities 0.5, 0.5, 0.25,
0.25 and target propensities 0.9, 0.1, 0.75, 0.5, so w = 1.8, 0.2, 3, 2; two treatment sessions (click 1, w = 1).
"""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from offeval_core import importance as imp
from offeval_core.errors import EstimatorWarning, InputError, SpecError, UnknownName, WrongType
from offeval_core.logs import read_logs

LOG = pd.DataFrame({
    "session_id": [1, 2, 3, 4, 5, 6], "rank": 1, "click": [1, 0, 1, 0, 1, 1],
    "segment": ["a", "a", "b", "b", "a", "b"], "arm": ["control"] * 4 + ["treatment"] * 2,
    "logging_propensity": [0.5, 0.5, 0.25, 0.25, 0.5, 0.5],
    "target_propensity__t": [0.9, 0.1, 0.75, 0.5, 0.5, 0.5],
})
W = np.array([1.8, 0.2, 3.0, 2.0])
R = np.array([1.0, 0.0, 1.0, 0.0])


def logs():
    return read_logs(LOG, name="log.csv")


def ratio_se(y, x):
    """Delta-method standard error of Σy / Σx over n i.i.d. units: sd(y − R x) / (√n · mean x)."""
    ratio = y.sum() / x.sum()
    return float(np.std(y - ratio * x, ddof=1) / (math.sqrt(len(y)) * x.mean()))


def test_ncis_value_ci_effect_and_diagnostics_by_hand():
    r = imp.estimate(logs(), reward="click", policy="t", clip=2.5, level=0.9)
    wbar = np.minimum(W, 2.5)                                      # 1.8, 0.2, 2.5, 2
    assert (r.estimator, r.scale) == ("ncis", "session")
    assert r.target.value == pytest.approx(4.3 / 6.5, rel=1e-12)   # (1.8 + 2.5) / 6.5
    assert r.logging.value == pytest.approx(0.5, rel=1e-12)        # the control sessions' mean click
    assert r.target.n == r.logging.n == 4
    se = ratio_se(wbar * R, wbar)
    z = norm.ppf(0.95)
    assert r.target.stderr == pytest.approx(se, rel=1e-9)
    assert (r.target.ci.low, r.target.ci.high) == pytest.approx((4.3 / 6.5 - z * se, 4.3 / 6.5 + z * se), rel=1e-9)
    assert r.target.ci.level == r.logging.ci.level == r.effect.ci.level == 0.9
    # the paired effect: target − logging per session, its SE from the two ratios' influence values
    infl = (wbar * R - 4.3 / 6.5 * wbar) / wbar.mean() - (R - 0.5)
    se_d = float(np.std(infl, ddof=1) / 2)
    assert r.effect.value == pytest.approx(4.3 / 6.5 - 0.5, rel=1e-12)
    assert r.effect.stderr == pytest.approx(se_d, rel=1e-9)
    assert r.diagnostics == pytest.approx({
        "ess": 6.5 ** 2 / (1.8 ** 2 + 0.2 ** 2 + 2.5 ** 2 + 2 ** 2),
        "ess_uncapped": 7.0 ** 2 / (1.8 ** 2 + 0.2 ** 2 + 3 ** 2 + 2 ** 2),
        "max_weight": 3.0, "capped_share": 1 - 6.5 / 7.0, "mean_weight": 7.0 / 4, "exact_share": 0.0}, rel=1e-12)


def test_default_options_snips_and_the_level():
    r = imp.estimate(logs(), reward="click", policy="t")
    # defaults: ncis, c = ∞ (SNIPS), the control arm, a 99 % interval (offeval_core.defaults.LEVEL)
    assert (r.estimator, r.scale) == ("ncis", "session")
    assert r.target.value == pytest.approx(4.8 / 7.0, rel=1e-12)
    se = ratio_se(W * R, W)
    assert r.target.ci.level == 0.99
    assert (r.target.ci.low, r.target.ci.high) == pytest.approx((4.8 / 7 - norm.ppf(0.995) * se, 4.8 / 7 + norm.ppf(0.995) * se), rel=1e-9)
    assert r.diagnostics["capped_share"] == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("kwargs, value", [
    ({"clip": 2.5, "capping": "zero"}, 1.8 / 4.0),                # w̄ = 1.8, 0.2, 0, 2
    ({"clip": 2.0, "estimator": "ncis-zero"}, 1.8 / 2.0),        # w = 2 is not < 2: dropped too
    ({"estimator": "is", "clip": 2.5}, (1.8 + 3.0) / 4),         # IS ignores the clip: Σ w r / n
    ({"clip": 2.5, "arm": None}, (4.3 + 2) / 8.5),                # every session: the treatment ones have w = 1
])
def test_options_reach_the_estimate(kwargs, value):
    r = imp.estimate(logs(), reward="click", policy="t", **kwargs)
    assert r.target.value == pytest.approx(value, rel=1e-12)


def test_arm_none_counts_every_session_for_the_logging_value_too():
    r = imp.estimate(logs(), reward="click", policy="t", arm=None)
    assert r.logging.value == pytest.approx(4 / 6, rel=1e-12) and r.target.n == 6
    assert r.diagnostics["mean_weight"] == pytest.approx(9.0 / 6, rel=1e-12)


def test_exposure_weights_discounts_and_strata_reach_the_estimate():
    # ranking logs: sessions of lengths 2, 1, 1 (all control); the target puts the logged rank-2 item first
    df = pd.DataFrame({"session_id": [1, 1, 2, 3], "rank": [1, 2, 1, 1], "click": [0, 1, 1, 0],
                       "segment": ["a", "a", "b", "b"], "rank__t": [2, 1, 1, 1]})
    ranking = read_logs(df, name="r.csv")
    # D = D0 = 1/rank, IS: Σ_rows w r / sessions with w = r / R: session 1's click at rank 2 gets 2/1 → (2 + 1) / 3
    r = imp.estimate(ranking, reward="click", policy="t", estimator="is", discount="reciprocal",
                     exposure="reciprocal")
    assert r.target.value == pytest.approx(3 / 3, rel=1e-12)
    # D = 1/R over D0 = log2 discount 1/log2(1 + r): the click at rank 2 gets 1 / (1/log2 3) = log2 3
    r = imp.estimate(ranking, reward="click", policy="t", estimator="is", discount="reciprocal",
                     exposure="log2")
    assert r.target.value == pytest.approx((math.log2(3) + 1) / 3, rel=1e-12)
    # the default pbm learnt from the lengths 2, 1, 1: S = 1, 1/3; D = S(R) / S(r): the rank-2 click gets 3
    r = imp.estimate(ranking, reward="click", policy="t", estimator="is")
    assert r.target.value == pytest.approx((3 + 1) / 3, rel=1e-12)


def test_weights_mode_and_strata_reach_the_estimate():
    both = read_logs(LOG.assign(rank__t=[1, 1, 1, 1, 1, 1]), name="b.csv")
    # exposure weights at rank 1 → rank 1 are 1: the target value is the logging mean (so the paired effect is 0
    # in every session and its standard error undefined)
    with pytest.warns(EstimatorWarning, match="delta-method standard error of a ratio is below the precision"):
        same = imp.estimate(both, reward="click", policy="t", weights="exposure")
    assert same.target.value == pytest.approx(0.5) and same.effect.value == 0
    assert imp.estimate(both, reward="click", policy="t").target.value == pytest.approx(4.8 / 7, rel=1e-12)
    # piece-NCIS normalises per stratum: segment a (w 1.8, 0.2; clicks 1, 0) and b (w 3, 2; clicks 1, 0), each
    # half the sessions: ½ · 1.8/2 + ½ · 3/5; strata=None is one stratum, NCIS: 4.8 / 7
    seg = imp.estimate(logs(), reward="click", policy="t", estimator="piece-ncis")
    assert seg.target.value == pytest.approx(0.5 * 0.9 + 0.5 * 0.6, rel=1e-12)
    one = imp.estimate(logs(), reward="click", policy="t", estimator="piece-ncis", strata=None)
    assert one.target.value == pytest.approx(4.8 / 7, rel=1e-12)


def test_scale_option_names_the_estimator():
    # one row per session: the impression scale gives the same value, under its own key
    r = imp.estimate(logs(), reward="click", policy="t", scale="impression", clip=2.5)
    assert (r.estimator, r.scale) == ("ncis@impression", "impression")
    assert r.target.value == pytest.approx(4.3 / 6.5, rel=1e-12)
    r = imp.estimate(logs(), reward="click", policy="t", scale="session", capping="zero", clip=2.5)
    assert (r.estimator, r.scale) == ("ncis-zero", "session")


def test_unknown_reward_or_policy_is_named_before_anything_is_computed():
    with pytest.raises(UnknownName) as err:
        imp.estimate(logs(), reward="like", policy="t")
    assert str(err.value) == "unknown reward 'like'; the logs log.csv have reward columns: click"
    with pytest.raises(UnknownName) as err:
        imp.estimate(logs(), reward="click", policy="u")
    assert str(err.value) == (
        "policy 'u': the logs log.csv have no column 'target_propensity__u' (target propensities found: t); "
        "importance weights π_t / π_p need the target policy's propensity on every logged row")


def test_result_to_dict():
    r = imp.estimate(logs(), reward="click", policy="t", clip=2.5, estimator="ncis-zero@impression")
    assert (r.estimator, r.scale) == ("ncis-zero@impression", "impression")
    d = r.to_dict()
    assert d == {"estimator": "ncis-zero@impression", "scale": "impression", "logging": r.logging.to_dict(),
                 "target": r.target.to_dict(), "effect": r.effect.to_dict(),
                 "diagnostics": {k: r.diagnostics[k] for k in ("ess", "ess_uncapped", "max_weight", "capped_share",
                                                               "mean_weight", "exact_share")}}
    assert d["target"]["value"] == pytest.approx(1.8 / 4.0, rel=1e-12)
    # a NaN diagnostic is null in the dict (JSON)
    nan = imp.ImportanceResult("is", "session", r.logging, r.target, r.effect, {"ess": math.nan, "max_weight": 2})
    assert nan.to_dict()["diagnostics"] == {"ess": None, "max_weight": 2}


# ----------------------------------------------------------------------------------- PointNCIS contexts


def test_pooled_contexts_by_hand():
    df = pd.DataFrame({"session_id": [1, 1, 2, 3, 4, 5, 5, 6], "rank": [1, 2, 1, 1, 1, 1, 2, 1],
                       "click": 0, "segment": ["a", "a", "a", "b", "c", "a", "a", "c"],
                       "arm": ["control"] * 5 + ["treatment"] * 3})
    logs = read_logs(df.assign(rank__t=df["rank"]), name="c.csv")

    def per(context="session"):
        return imp.session_sums(logs, reward="click", policy="t", context=context)

    # per session: control 1 (2 rows), 2, 3, 4 (1 row each); treatment 5 (2 rows), 6 (1 row)
    assert imp.pooled_contexts(per()) == (3, 4)
    assert imp.pooled_contexts(per(), arm=None) == (4, 6)
    assert imp.pooled_contexts(per(), arm="treatment") == (1, 2)
    # by segment within each arm: control a has 3 rows, b 1, c 1; treatment a 2, c 1
    assert imp.pooled_contexts(per("segment")) == (2, 4)
    assert imp.pooled_contexts(per("segment"), arm=None) == (3, 6)
    assert imp.pooled_contexts(per(None), arm=None) == (0, 6)
    with pytest.raises(InputError) as err:
        per(pd.Series({1: "u"}))
    assert str(err.value) == "context: no value for 5 session(s), e.g. session_id 2, 3, 4, 5, 6"
    with pytest.raises(WrongType) as err:  # the logs themselves are not the sessions' sums
        imp.pooled_contexts(logs)
    assert str(err.value) == ("per must be a per-session table of importance.session_sums (columns m, exact, "
                              "experiment_id, day, arm, context), got Logs")


# Propensity logs by segment (the PointNCIS context), one row per session: "one" and "two" log one action
# with propensity 1 (an exact ν, w = 0.5 and 0.8); in "w" the rank-1 actions b and c have propensities summing
# to 1 (exact), the rank-2 action d of session 4 does not (0.5); "y" logs one action of propensity 0.5.
EXACT = pd.DataFrame({"session_id": [1, 2, 3, 4, 5, 6], "rank": [1, 1, 1, 2, 1, 1], "click": [1, 0, 1, 1, 0, 1],
                      "item_id": ["a", "b", "c", "d", "e", "f"], "segment": ["one", "w", "w", "w", "y", "two"],
                      "logging_propensity": [1.0, 0.5, 0.5, 0.5, 0.5, 1.0],
                      "target_propensity__t": [0.5, 0.5, 0.5, 0.5, 0.5, 0.8]})


def test_pooled_contexts_count_what_the_estimator_pools_not_rows_per_context():
    """A context is pooled by its plug-in (inexact) sessions' rows alone, as the reduce and the bootstrap pool
    it: one-row contexts with an exact ν ("one", "two") are not pooled, and session 4, the only inexact session
    of "w" (3 rows), is. Counting rows per context said 3 of 6 (sessions 1, 5, 6)."""
    logs = read_logs(EXACT, name="p.csv")
    per = imp.session_sums(logs, reward="click", policy="t", context="segment", clip=10)
    assert per["exact"].tolist() == [1, 1, 1, 0, 0, 1]
    assert imp.pooled_sessions(per).tolist() == [False, False, False, True, True, False]
    assert imp.pooled_contexts(per) == (2, 6)
    with pytest.warns(EstimatorWarning, match="^PointNCIS: 2 of 6 sessions are in contexts with a single logged"):
        r = imp.estimate(logs, reward="click", policy="t", estimator="point-ncis", context="segment", clip=10)
    # exact sessions: w̄ r / ν = 0.5 / 0.5, 0, 1 / (0.5 + 0.5), 0.8 / 0.8; sessions 4 and 5 share one plug-in
    # normaliser: U R = 2 · (1 · 1 + 1 · 0) / (1 + 1) = 1; the mean over 6 sessions: 4 / 6
    assert r.target.value == pytest.approx(4 / 6, rel=1e-12)
    with pytest.warns(EstimatorWarning, match="^PointNCIS: 2 of 6 sessions "):
        boot = imp.bootstrap(logs, reward="click", policy="t", estimator="point-ncis", context="segment", clip=10,
                             n_boot=3, rng=0)
    assert boot.target.value == pytest.approx(4 / 6, rel=1e-12)


def test_the_warning_counts_with_the_estimates_own_weights_clip_and_capping():
    """Whether a ν is exact depends on the weights (exposure ratios never have one) and on the capped weights (a
    zero-capped weight of 0 gives ν = 0): the count uses the estimate's own. Zero-capping at c = 1 drops every
    weight 1 (sessions 2-5): "w"'s rank-1 ν is 0, so sessions 2, 3 and 4 share one plug-in group of 3 rows and only
    session 5 is pooled; the value is (1 + 1) / 6 (sessions 1 and 6 exact, every other capped weight 0). With
    exposure weights (rank__t = the logged rank: w = 1) no ν is exact: "one", "y" and "two" are pooled."""
    logs = read_logs(EXACT, name="p.csv")
    with pytest.warns(EstimatorWarning, match="^PointNCIS: 1 of 6 sessions "):
        r = imp.estimate(logs, reward="click", policy="t", estimator="point-ncis", context="segment", clip=1.0,
                         capping="zero")
    assert r.target.value == pytest.approx(2 / 6, rel=1e-12)
    with pytest.warns(EstimatorWarning, match="^PointNCIS: 2 of 6 sessions "):  # max-capping at 1 keeps w ≤ 1
        imp.estimate(logs, reward="click", policy="t", estimator="point-ncis", context="segment", clip=1.0)
    ranked = read_logs(EXACT.assign(rank__t=EXACT["rank"]), name="p2.csv")
    with pytest.warns(EstimatorWarning, match="^PointNCIS: 3 of 6 sessions "):
        r = imp.estimate(ranked, reward="click", policy="t", estimator="point-ncis", context="segment", clip=10,
                         weights="exposure")
    assert r.target.value == pytest.approx(4 / 6, rel=1e-12)  # {1, 5, 6} and {2, 3, 4}: 2 clicks each, w = 1


def test_point_ncis_warns_only_when_a_context_has_one_row():
    with pytest.warns(EstimatorWarning) as record:
        imp.estimate(logs(), reward="click", policy="t", estimator="point-ncis")
    record = [w for w in record if issubclass(w.category, EstimatorWarning)]
    assert len(record) == 1
    assert str(record[0].message) == (
        "PointNCIS: 4 of 4 sessions are in contexts with a single logged row, where the plug-in normaliser would "
        "be the row's own capped weight (the estimate would collapse to the logging value); they share the "
        "normaliser of their (experiment, day, arm) cell instead, i.e. NCIS. Pass a context column that groups "
        "sessions (e.g. context='segment'; on the command line --context segment).")
    # every session (arm=None): 6 of 6; the default context is the session
    with pytest.warns(EstimatorWarning, match="^PointNCIS: 6 of 6 sessions are in contexts with a single logged row"):
        imp.estimate(logs(), reward="click", policy="t", estimator="point-ncis", arm=None)
    per = imp.session_sums(logs(), reward="click", policy="t")
    with pytest.warns(EstimatorWarning, match="^PointNCIS: 4 of 4 sessions "):
        imp.warn_pooled_contexts(per)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EstimatorWarning)
        # segments of two sessions: no single-row context; other estimators never warn
        r = imp.estimate(logs(), reward="click", policy="t", estimator="point-ncis", context="segment", clip=2.5)
        imp.estimate(logs(), reward="click", policy="t", estimator="ncis")
        imp.warn_pooled_contexts(imp.session_sums(logs(), reward="click", policy="t", context="segment"))
    # context = segment: a normaliser per segment, as piece-NCIS over those segments
    assert r.target.value == pytest.approx(0.5 * 1.8 / 2.0 + 0.5 * 2.5 / 4.5, rel=1e-12)


# ------------------------------------------------------------------------------------------ Midzuno-Sen


class Script:
    """A draw function returning scripted weights; it records the sizes asked."""

    def __init__(self, first, rest):
        self.first, self.rest, self.sizes, self.rngs = list(first), list(rest), [], []

    def __call__(self, k, rng):
        self.sizes.append(k)
        self.rngs.append(rng)
        return np.array([self.first.pop(0)]) if k == 1 and self.first else np.array(self.rest[:k])


def test_midzuno_sen_on_scripted_draws():
    seed = 3
    u = np.random.default_rng(seed).uniform(size=3)
    # first draws w = 4, 4, 1 at c = 2: ratios w̄/w = 1/2, 1/2, 1; the first u below its ratio accepts
    accept = next(i for i, (ui, ri) in enumerate(zip(u, (0.5, 0.5, 1.0), strict=True)) if ui < ri)
    r1 = (0.5, 0.5, 1.0)[accept]
    draw, rng = Script([4.0, 4.0, 1.0], [1.0, 3.0, 6.0, 0.0]), np.random.default_rng(seed)
    out = imp.midzuno_sen_inverse(draw, n=5, clip=2.0, rng=rng)
    assert all(g is rng for g in draw.rngs)                        # every draw gets the caller's generator
    # the rest: w = 1, 3, 6, 0 → ratios 1, 2/3, 1/3 and 1 for a weight 0: sum 3
    assert out == pytest.approx(5 / (r1 + 3.0), rel=1e-12)
    assert draw.sizes == [1] * (accept + 1) + [4]
    # integer weights: w = 1 accepted, then 1, 3 (ratios 1, 2/3) at n = 3
    assert imp.midzuno_sen_inverse(Script([1], [1, 3]), n=3, clip=2, rng=0) == pytest.approx(3 / (8 / 3))
    # n = 2: one other draw, w = 4 → ratio 1/2
    draw = Script([1.0], [4.0])
    assert imp.midzuno_sen_inverse(draw, n=2, clip=2.0, rng=0) == pytest.approx(2 / 1.5) and draw.sizes == [1, 1]
    # at c = 1, zero-capping drops w = 1 (ratio 0) and keeps w = 0.5 (ratio 1)
    assert imp.midzuno_sen_inverse(Script([0.5], [1.0, 0.5]), n=3, clip=1.0, capping="zero", rng=0) == 1.5
    # n = 1: no other draw
    draw = Script([1.0], [])
    assert imp.midzuno_sen_inverse(draw, n=1, clip=2.0, rng=0) == 1.0 and draw.sizes == [1]
    # zero-capping drops a weight equal to the cap: w = 2, 3 → ratios 0; w = 1 → 1
    draw = Script([1.0], [2.0, 3.0, 1.0])
    assert imp.midzuno_sen_inverse(draw, n=4, clip=2.0, capping="zero", rng=0) == pytest.approx(4 / 2)


def test_midzuno_sen_checks_its_options():
    draw = Script([1.0], [])
    with pytest.raises(SpecError) as err:
        imp.midzuno_sen_inverse(draw, n=1, clip=2.0, capping="min")
    assert str(err.value) == "capping must be one of 'max', 'zero'; got 'min'"
    with pytest.raises(InputError):
        imp.midzuno_sen_inverse(draw, n=1, clip=0.5)


def test_midzuno_sen_gives_up_after_its_tries(monkeypatch):
    """MIDZUNO_SEN_TRIES first draws are tried, no more: at c = 2, zero-capping gives w = 3 the ratio 0 (never
    accepted) and w = 1 the ratio 1 (always accepted). Five tries here instead of 10⁶."""
    import importlib

    est = importlib.import_module("offeval_core.importance.estimate")   # (the package's `estimate` is the function)
    assert est.MIDZUNO_SEN_TRIES == 10**6
    monkeypatch.setattr(est, "MIDZUNO_SEN_TRIES", 5)
    draw = Script([3.0] * 5, [])
    with pytest.raises(InputError) as err:
        imp.midzuno_sen_inverse(draw, n=2, clip=2.0, capping="zero", rng=0)
    assert str(err.value) == "Midzuno-Sen: no draw accepted in 5 tries; the capped share E[W̄/W | x] is ~0"
    assert draw.sizes == [1] * 5
    # accepted at the last try: ratio 1, then the other draw w = 1 (ratio 1): 2 / (1 + 1)
    draw = Script([3.0] * 4 + [1.0], [1.0])
    assert imp.midzuno_sen_inverse(draw, n=2, clip=2.0, capping="zero", rng=0) == 1.0
    assert draw.sizes == [1] * 5 + [1]


def test_estimator_warnings_point_at_the_callers_line():
    """Each EstimatorWarning is attributed to the line of the caller's code that asked for the estimate, however
    deep in the package it is raised: the PointNCIS warning (estimate → warn_pooled_contexts, or called
    directly) and the delta-method one (estimate → estimate_from_row → ratio_difference → _delta_variance)."""
    def caught(call):
        with pytest.warns(EstimatorWarning) as record:
            call()
        w = [r for r in record if issubclass(r.category, EstimatorWarning)]
        assert len(w) == 1
        return w[0].filename, w[0].lineno

    for call in (lambda: imp.estimate(logs(), reward="click", policy="t", estimator="point-ncis"),
                 lambda: imp.warn_pooled_contexts(imp.session_sums(logs(), reward="click", policy="t")),
                 lambda: imp.estimate(read_logs(LOG.assign(rank__t=[1, 1, 1, 1, 1, 1]), name="b.csv"),
                                      reward="click", policy="t", weights="exposure")):
        # the line in this file where the lambda calls into the package
        assert caught(call) == (__file__, call.__code__.co_firstlineno)
