"""offline_online_correlation on moments written by hand (no logs, no reduce): every cell's r and p against a
closed form, the daily series, the warnings and the order of the rows. Fast (pandas only), so it runs first.

Every daily value v is split over two segments so that only the pooled mean gives it back: segment a holds one
session with sum v + 3, segment b three sessions with sum 3v − 3 (mean of the segment means: v + 1).

Closed forms of the two-tailed Student-t p-value of Pearson's r over n days (t = r √(n − 2) / √(1 − r²)):
n = 3 (one degree of freedom, Cauchy): p = 1 − (2/π) atan|t|; n = 4: p = 1 − |t| / √(2 + t²); n = 5: p = 1 −
(2/π) (t / (√3 (1 + t²/3)) + atan(t / √3)).
"""

import datetime
import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.analyses import offline_online_correlation
from offeval_core.analyses.correlation import _takeaway
from offeval_core.engine import Grid, Moments
from offeval_core.errors import InputError

INF = math.inf
DAY = [datetime.date(2026, 3, d) for d in range(1, 6)]
V1, V2, V3 = ("dcg", "log2", "log2", 1.0), ("dcg", "log2", "log2", INF), ("ndcg", "log2", "log2", INF)
L1, L2, L3 = "DCG (log2, C)", "DCG (log2, Q̂)", "nDCG (log2, Q̂)"
P_08_5 = 1 - 2 / math.pi * (12 / 25 + math.atan(4 / 3))  # r = 0.8 over 5 days: t = 4/√3
P_08_4 = 0.2  # r = 0.8 over 4 days: t = 4√2/3, |t| / √(2 + t²) = 0.4
P_05_3 = 2 / 3  # |r| = 1/2 over 3 days: t = 1/√3, atan = π/6
P_087_3 = 1 / 3  # r = √3/2 over 3 days: t = √3, atan = π/3

_OFF_COLS = ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip", "policy", "metric",
             "n", "sum", "m2", "den_sum", "den_m2", "co_den", "sum_diff", "m2_diff", "co_diff_den"]


def _split(v: float):
    """(segment, n, sum) of the two segments whose pooled mean is v."""
    return (("a", 1, v + 3.0), ("b", 3, 3.0 * v - 3.0))


def _moments(offline: dict, online: dict, *, rewards=("like",), policies=("treatment",)) -> Moments:
    """offline: {(experiment, day number, reward, policy, variant): v} on the control arm (the treatment arm's
    offline rows get v + 100, which no cell may read); online: {(experiment, day number, arm, reward): v, or None
    for a day with no session}."""
    rows = []
    for (exp, d, reward, pol, (metric, disc, expo, clip)), v in offline.items():
        for arm, shift in (("control", 0.0), ("treatment", 100.0)):
            for seg, n, s in _split(v + shift):
                paired = (s / 2, 0.0, 0.0) if pol != "logging" else (math.nan, math.nan, math.nan)
                rows.append((exp, DAY[d - 1], arm, seg, reward, disc, expo, clip, pol, metric, n, s, 0.0, float(n),
                             0.0, 0.0, *paired))
    on = []
    for (exp, d, arm, reward), v in online.items():
        for seg, n, s in _split(0.0 if v is None else v):
            on.append((exp, DAY[d - 1], arm, seg, reward, 0 if v is None else n, 0.0 if v is None else s, 0.0))
    models = tuple(dict.fromkeys(v[1] for (_, _, _, _, v) in offline))
    grid = Grid(rewards=rewards, policies=policies, discounts=models, exposures=models, clips=(1.0, INF))
    return Moments(offline=pd.DataFrame(rows, columns=_OFF_COLS),
                   online=pd.DataFrame(on, columns=["experiment_id", "day", "arm", "segment", "reward", "n", "sum",
                                                    "m2"]), grid=grid)


def _series(exp, reward, pol, variant, values, *, first=1):
    return {(exp, first + i, reward, pol, variant): v for i, v in enumerate(values) if v is not None}


def _online(exp, arm, reward, values, *, first=1):
    return {(exp, first + i, arm, reward): v for i, v in enumerate(values)}


def _world():
    """e1: five days; the treatment arm has no session on day 5, so the Rₜ cells have four days. e2: three days
    (a constant series in one cell). e3 and e4: two days (no r)."""
    off, on = {}, {}
    # e1, R0 against the control arm's (1, 2, 3, 4, 5): r 0.8, 1 (identity), −1
    on |= _online("e1", "control", "like", [1, 2, 3, 4, 5])
    off |= _series("e1", "like", "logging", V1, [2, 1, 4, 3, 5])
    off |= _series("e1", "like", "logging", V2, [1, 2, 3, 4, 5])
    off |= _series("e1", "like", "logging", V3, [0.625, 0.5, 0.375, 0.25, 0.125])
    # e1, Rₜ against the treatment arm's (2, 4, 6, 8, –): r 0.8, 0.8 (a tie for best), 0
    on |= _online("e1", "treatment", "like", [2, 4, 6, 8, None])
    off |= _series("e1", "like", "treatment", V1, [1, 3, 2, 4, 100])
    off |= _series("e1", "like", "treatment", V2, [2, 6, 4, 8, -100])
    off |= _series("e1", "like", "treatment", V3, [0.5, 0.25, 0.25, 0.5, 0.5])
    # e2 (three days): R0 against (1, 2, 3): 0.5, identity, constant; Rₜ against (1, 2, 3): 0.5, −0.5, √3/2
    on |= _online("e2", "control", "like", [1, 2, 3]) | _online("e2", "treatment", "like", [1, 2, 3])
    off |= _series("e2", "like", "logging", V1, [1, 3, 2]) | _series("e2", "like", "logging", V2, [1, 2, 3])
    off |= _series("e2", "like", "logging", V3, [3, 3, 3])
    off |= _series("e2", "like", "treatment", V1, [1, 3, 2]) | _series("e2", "like", "treatment", V2, [2, 3, 1])
    off |= _series("e2", "like", "treatment", V3, [1, 1, 2])
    # e3 and e4 (two days, days 4 and 5)
    for exp in ("e3", "e4"):
        on |= _online(exp, "control", "like", [1, 2], first=4) | _online(exp, "treatment", "like", [2, 1], first=4)
        for pol in ("logging", "treatment"):
            for v in (V1, V2, V3):
                off |= _series(exp, "like", pol, v, [1, 2], first=4)
    return off, on


def _row(exp, pol, label, variant, n_days, r, p, *, identity=False, best=False, alpha=0.05):
    metric, disc, expo, clip = variant
    return {"experiment_id": exp, "reward": "like", "policy": pol, "policy_label": "R₀" if pol == "logging" else "Rₜ",
            "variant": label, "metric": metric, "discount": disc, "exposure": expo, "clip": clip, "n_days": n_days,
            "r": r, "p_value": p, "significant": p < alpha, "identity": identity, "best": best}


def _expected_table(alpha=0.05, order=("logging", "treatment")):
    nan = math.nan
    rows = {"logging": {
        "e1": [_row("e1", "logging", L1, V1, 5, 0.8, P_08_5, best=True, alpha=alpha),
               _row("e1", "logging", L2, V2, 5, 1.0, 0.0, identity=True, alpha=alpha),
               _row("e1", "logging", L3, V3, 5, -1.0, 0.0, alpha=alpha)],
        "e2": [_row("e2", "logging", L1, V1, 3, 0.5, P_05_3, best=True, alpha=alpha),
               _row("e2", "logging", L2, V2, 3, 1.0, 0.0, identity=True, alpha=alpha),
               _row("e2", "logging", L3, V3, 3, nan, nan, alpha=alpha)]},
        "treatment": {
        "e1": [_row("e1", "treatment", L1, V1, 4, 0.8, P_08_4, best=True, alpha=alpha),
               _row("e1", "treatment", L2, V2, 4, 0.8, P_08_4, best=True, alpha=alpha),
               _row("e1", "treatment", L3, V3, 4, 0.0, 1.0, alpha=alpha)],
        "e2": [_row("e2", "treatment", L1, V1, 3, 0.5, P_05_3, alpha=alpha),
               _row("e2", "treatment", L2, V2, 3, -0.5, P_05_3, alpha=alpha),
               _row("e2", "treatment", L3, V3, 3, math.sqrt(3) / 2, P_087_3, best=True, alpha=alpha)]}}
    for exp in ("e3", "e4"):
        for pol in ("logging", "treatment"):
            rows[pol][exp] = [_row(exp, pol, lab, v, 2, nan, nan, identity=(pol == "logging" and v == V2),
                                   alpha=alpha) for lab, v in ((L1, V1), (L2, V2), (L3, V3))]
    out = [r for exp in ("e1", "e2", "e3", "e4") for pol in order for r in rows[pol][exp]]
    return pd.DataFrame(out)


def _check_table(got: pd.DataFrame, want: pd.DataFrame):
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got.drop(columns=["r", "p_value"]), want.drop(columns=["r", "p_value"]),
                                  check_dtype=False)
    np.testing.assert_allclose(got["r"].to_numpy(float), want["r"].to_numpy(float), rtol=1e-12, atol=1e-12)
    # (r = 1 over three days gives p ~ 1e-8 from its last bit)
    np.testing.assert_allclose(got["p_value"].to_numpy(float), want["p_value"].to_numpy(float), rtol=1e-12, atol=1e-7)


def test_every_cell_by_hand():
    off, on = _world()
    res = offline_online_correlation(_moments(off, on), variants=[V1, V2, V3])
    _check_table(res.table, _expected_table())
    assert res.labels == (L1, L2, L3) and res.method == "pearson" and res.alpha == 0.05 and res.target == "treatment"
    assert res.variants == (V1, V2, V3)
    assert res.warnings == (
        "experiments e3, e4 have only 2 day(s); a correlation across fewer than 4 days is not informative",
        "experiment e2 has only 3 day(s); a correlation across fewer than 4 days is not informative",
        "13 cell(s) have no correlation (fewer than 3 days or a constant series)")
    assert res.takeaway == _takeaway(res.table, res.labels, "pearson", res.daily, alpha=0.05)
    # Rₜ medians over e1 and e2: 0.65, 0.15 and (0 + √3/2) / 2; R₀ rows where V1 and V3 both have an r: e1 only
    identities = (" 2 R₀ cell(s) marked ≡ are identities (on the logging policy, DCG with D = D0 at m = ∞ and every "
                  "per-session importance estimator are the control arm's observed reward) and are not ranked.")
    r0 = (" On the R₀ rows (the logging policy, whose offline and online values read the same control sessions) "
          "DCG (log2, C) has the highest median r, 0.80.")
    assert res.takeaway == (
        "No variant tracks the online reward of Rₜ = treatment across days on these logs: the highest median r over "
        "its 2 (experiment, reward) rows where every variant has an r (2 rows without one left out of every median) "
        "is DCG (log2, C)'s 0.65, positive and significant in no row (DCG (log2, C) is positive and significant "
        "(p < 0.05) in 0 of 2 rows); DCG (log2, Q̂) is lowest (median r = 0.15)." + r0 + identities)
    # at α = 0.25 e1's p = 0.2 counts
    res = offline_online_correlation(_moments(off, on), variants=[V1, V2, V3], alpha=0.25)
    assert res.takeaway == (
        "Across the 2 (experiment, reward) rows of Rₜ = treatment where every variant has an r (2 rows without one "
        "left out of every median), DCG (log2, C) tracks its online reward best: median r = 0.65, best in 1 of 2 "
        "rows, positive and significant (p < 0.25) in 1 of 2 rows; DCG (log2, Q̂) is lowest (median r = 0.15)."
        + r0 + identities)


def test_the_daily_series_by_hand():
    """One row per (experiment, day) with both an offline estimate (control logs, pooled over segments) and an
    online mean (pooled over segments) of the policy's arm; a day without online sessions has online NaN."""
    off, on = _world()
    daily = offline_online_correlation(_moments(off, on), variants=[V1, V2, V3]).daily
    assert list(daily.columns) == ["experiment_id", "day", "offline", "online", "reward", "policy", "variant",
                                   "metric", "discount", "exposure", "clip"]
    want = []
    for pol, arm in (("logging", "control"), ("treatment", "treatment")):
        for v, lab in ((V1, L1), (V2, L2), (V3, L3)):
            for (exp, d, _, p, var), value in sorted(off.items(), key=lambda kv: (kv[0][0], kv[0][1])):
                if p == pol and var == v:
                    online = on[(exp, d, arm, "like")]
                    want.append({"experiment_id": exp, "day": DAY[d - 1], "offline": float(value),
                                 "online": math.nan if online is None else float(online), "reward": "like",
                                 "policy": pol, "variant": lab, "metric": v[0], "discount": v[1], "exposure": v[2],
                                 "clip": v[3]})
    pd.testing.assert_frame_equal(daily, pd.DataFrame(want)[daily.columns], check_dtype=False)  # a fresh index


def test_policy_order_aliases_alpha_and_a_named_target():
    off, on = _world()
    m = _moments(off, on)
    # the rows follow the order of the policies asked (R0/Rt aliases), within each experiment and reward
    res = offline_online_correlation(m, variants=[V1, V2, V3], policies=("Rt", "R0"), alpha=0.25)
    _check_table(res.table, _expected_table(alpha=0.25, order=("treatment", "logging")))
    assert res.alpha == 0.25 and res.target == "treatment"
    assert res.takeaway == _takeaway(res.table, res.labels, "pearson", res.daily, alpha=0.25)
    assert "positive and significant (p < 0.25) in 1 of 2 rows" in res.takeaway
    assert offline_online_correlation(m, variants=[V1, V2, V3], policies=("R₀", "Rₜ")).table.equals(
        offline_online_correlation(m, variants=[V1, V2, V3]).table)
    # a target policy named otherwise: its rows read its own offline values against the treatment arm
    renamed = {(e, d, r, "ranker" if p == "treatment" else p, v): x for (e, d, r, p, v), x in off.items()}
    res = offline_online_correlation(_moments(renamed, on, policies=("ranker",)), variants=[V1, V2, V3],
                                     policies=("logging", "ranker"))
    want = _expected_table().replace({"policy": {"treatment": "ranker"}})
    _check_table(res.table, want)
    assert res.target == "ranker" and set(res.daily["policy"]) == {"logging", "ranker"}
    assert "Rₜ = ranker" in res.takeaway
    # Rt names that target too
    res = offline_online_correlation(_moments(renamed, on, policies=("ranker",)), variants=[V1],
                                     policies=("ranker", "Rt", "R0"))
    assert list(dict.fromkeys(res.table["policy"])) == ["ranker", "logging"]
    with pytest.raises(InputError) as exc:
        offline_online_correlation(m, variants=[V1], policies=("logging", "treatment", "other"))
    assert str(exc.value) == ("policies must be 'logging' (R0, control arm) and at most one target policy (Rt, the "
                              "policy that served the treatment arm): only they have an online arm; got 'treatment', "
                              "'other'")


def test_one_policy_only():
    off, on = _world()
    m = _moments(off, on)
    t = offline_online_correlation(m, variants=[V1, V2, V3], policies=("treatment",)).table
    _check_table(t, _expected_table().query("policy == 'treatment'").reset_index(drop=True))
    t = offline_online_correlation(m, variants=[V1, V2, V3], policies=("logging",)).table
    _check_table(t, _expected_table().query("policy == 'logging'").reset_index(drop=True))


def test_rewards_are_sorted_and_read_each_its_own_rows():
    """A second reward, click, whose online series is the like one reversed: its rows come first (sorted), with
    r = −0.8 where like has 0.8; rewards=("like",) leaves them out."""
    off, on = _world()
    off1 = {k: v for k, v in off.items() if k[0] == "e1" and k[3] == "logging" and k[4] == V1}
    on1 = {k: v for k, v in on.items() if k[0] == "e1" and k[2] == "control"}
    off2 = off1 | {(e, d, "click", p, v): x for (e, d, _, p, v), x in off1.items()}
    on2 = on1 | {(e, d, a, "click"): 6 - x for (e, d, a, _), x in on1.items()}
    m = _moments(off2, on2, rewards=("like", "click"))
    t = offline_online_correlation(m, variants=[V1], policies=("logging",)).table
    assert t["reward"].tolist() == ["click", "like"]
    np.testing.assert_allclose(t["r"], [-0.8, 0.8], rtol=1e-12)
    np.testing.assert_allclose(t["p_value"], [P_08_5, P_08_5], rtol=1e-12)
    t = offline_online_correlation(m, variants=[V1], policies=("logging",), rewards=("like",)).table
    assert t["reward"].tolist() == ["like"]
    t = offline_online_correlation(m, variants=[V1], policies=("logging",), rewards="click").table
    assert t["reward"].tolist() == ["click"] and t["r"].iloc[0] == pytest.approx(-0.8, rel=1e-12)


def test_kendall_and_spearman_by_hand():
    """(1, 2, 3, 4, 5) against (2, 1, 4, 3, 5): two discordant pairs of ten, τ = 0.6, exact p = 2 · 14 / 120 (14
    of the 120 orders of five have at most two inversions); ρ = 1 − 6 · 4 / 120 = 0.8, with Pearson's p of 0.8."""
    off, on = _world()
    m = _moments(off, on)
    for method, r, p in (("kendall", 0.6, 7 / 30), ("spearman", 0.8, P_08_5)):
        res = offline_online_correlation(m, variants=[V1], policies=("logging",), method=method)
        cell = res.table.iloc[0]
        assert (cell["experiment_id"], cell["n_days"]) == ("e1", 5)
        assert cell["r"] == pytest.approx(r, rel=1e-12) and cell["p_value"] == pytest.approx(p, rel=1e-12)
        assert res.method == method
        # e2 (three days): (1, 2, 3) against (1, 3, 2)
        e2 = res.table.iloc[1]
        assert e2["experiment_id"] == "e2" and e2["r"] == pytest.approx(1 / 3 if method == "kendall" else 0.5)
        # two days: no coefficient
        assert res.table.iloc[2:]["r"].isna().all()
    with pytest.raises(InputError):
        offline_online_correlation(m, variants=[V1], method="Pearson")


def test_the_online_mean_pools_sessions_not_segments_and_a_day_of_one_session_counts():
    """The online value of a day is Σ sum / Σ n over its segments; a day whose arm had a single session (n = 1)
    is a day like any other."""
    off, on = _world()
    off1 = {k: v for k, v in off.items() if k[0] == "e1" and k[3] == "logging" and k[4] == V1}
    on1 = {k: v for k, v in on.items() if k[0] == "e1" and k[2] == "control"}
    m = _moments(off1, on1)
    one = m.online[~((m.online["day"] == DAY[0]) & (m.online["segment"] == "b"))]  # day 1: segment a only, v + 3 = 4
    res = offline_online_correlation(Moments(m.offline, one.reset_index(drop=True), m.grid), variants=[V1],
                                     policies=("logging",))
    assert res.daily.set_index("day")["online"].tolist() == [4.0, 2.0, 3.0, 4.0, 5.0]
    # (4, 2, 3, 4, 5) against (2, 1, 4, 3, 5): Σ dx dy = 5, Σ dx² = 5.2, Σ dy² = 10
    assert res.table["r"].iloc[0] == pytest.approx(5 / math.sqrt(52), rel=1e-12)
    assert res.table["n_days"].iloc[0] == 5


def test_a_variant_without_rows_on_a_day_leaves_that_day_out():
    off, on = _world()
    off1 = {k: v for k, v in off.items() if k[0] == "e1" and k[3] == "logging" and k[4] in (V1, V3)}
    off1.pop(("e1", 5, "like", "logging", V3))
    on1 = {k: v for k, v in on.items() if k[0] == "e1" and k[2] == "control"}
    res = offline_online_correlation(_moments(off1, on1), variants=[V1, V3], policies=("logging",))
    assert res.table["n_days"].tolist() == [5, 4]
    np.testing.assert_allclose(res.table["r"], [0.8, -1.0], rtol=1e-12)
    assert res.warnings == ()
    # an experiment where a variant has no row at all: its cell counts 0 days and has no r
    off2 = off1 | _series("e9", "like", "logging", V1, [1, 3, 2, 4, 5])
    on2 = on1 | _online("e9", "control", "like", [1, 2, 3, 4, 5])
    res = offline_online_correlation(_moments(off2, on2), variants=[V1, V3], policies=("logging",))
    e9 = res.table[res.table["experiment_id"] == "e9"]
    assert e9["n_days"].tolist() == [5, 0] and math.isnan(e9["r"].iloc[1]) and math.isnan(e9["p_value"].iloc[1])
    assert res.warnings == ("1 cell(s) have no correlation (fewer than 3 days or a constant series)",)


def test_p_equal_to_alpha_is_not_significant():
    off, on = _world()
    m = _moments(off, on)
    p = offline_online_correlation(m, variants=[V1], policies=("logging",)).table["p_value"].iloc[0]
    assert p == pytest.approx(P_08_5, rel=1e-12)
    t = offline_online_correlation(m, variants=[V1], policies=("logging",), alpha=p).table
    assert t["significant"].tolist() == [False, False, False, False]
    t = offline_online_correlation(m, variants=[V1], policies=("logging",), alpha=np.nextafter(p, 1)).table
    assert t["significant"].tolist() == [True, False, False, False]


@pytest.mark.parametrize("eps", [1e-5, 1.25e-7])
def test_best_is_the_highest_r_up_to_1e_9_only(eps):
    """Raising the last offline value of V3 by ε raises its r above V1's 0.8 by ~ (2/10 − 0.8 · 2/10) ε = 0.04 ε
    (4e-7 and 5e-9, both above the 1e-9 tie tolerance, below 1e-5 relative and 1e-8 absolute): V1 is not best."""
    _, on = _world()
    base = [2, 1, 4, 3, 5]
    off1 = _series("e1", "like", "logging", V1, base) | _series("e1", "like", "logging", V3, [*base[:4], 5 + eps])
    on1 = {k: v for k, v in on.items() if k[0] == "e1" and k[2] == "control"}
    t = offline_online_correlation(_moments(off1, on1), variants=[V1, V3], policies=("logging",)).table
    gap = t["r"].iloc[1] - t["r"].iloc[0]
    assert gap == pytest.approx(0.04 * eps, rel=1e-3)
    assert t["best"].tolist() == [False, True]


def test_four_days_are_enough():
    """MIN_DAYS = 4: an experiment with four days gets no warning, one with three does."""
    _, on = _world()
    on1 = {k: v for k, v in on.items() if k[0] == "e1" and k[2] == "control"}
    four = _series("e1", "like", "logging", V1, [2, 1, 4, 3])
    res = offline_online_correlation(_moments(four, on1), variants=[V1], policies=("logging",))
    assert res.warnings == () and res.table["n_days"].tolist() == [4]
    three = _series("e1", "like", "logging", V1, [2, 1, 4])
    res = offline_online_correlation(_moments(three, on1), variants=[V1], policies=("logging",))
    assert res.warnings == ("experiment e1 has only 3 day(s); a correlation across fewer than 4 days is not "
                            "informative",)


def test_the_takeaway_carries_table_2s_pooled_finding():
    """With a learnt-PBM Q̂ variant and a log2 one on the Rₜ rows, the takeaway ends with the pooled finding over
    the daily points (the same sentence _takeaway writes from this result's daily frame)."""
    off, on = _world()
    vp = ("dcg", "pbm", "pbm", INF)
    pbm = {(e, d, r, p, vp): 2 * x for (e, d, r, p, v), x in off.items() if v == V1}
    res = offline_online_correlation(_moments(off | pbm, on), variants=[V1, vp], policies=("treatment",))
    assert res.takeaway == _takeaway(res.table, res.labels, "pearson", res.daily, alpha=0.05)
    assert " KDD'24 Table 2's finding (the learnt-PBM de-biased DCG tracks the online reward better than both " \
           "log2 variants), pooled over the target policy's experiment-days: like, DCG (pbm, Q̂) — vs DCG (log2, C): " \
           "r = " in res.takeaway


def test_a_constant_series_has_no_rank_correlation_and_no_warning():
    """e2's R₀ nDCG series is constant (3, 3, 3): no τ or ρ, and SciPy is not asked (it would warn for ρ)."""
    import warnings

    off, on = _world()
    m = _moments(off, on)
    for method in ("kendall", "spearman"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            t = offline_online_correlation(m, variants=[V1, V3], policies=("logging",), method=method).table
        cell = t[(t["experiment_id"] == "e2") & (t["metric"] == "ndcg")].iloc[0]
        assert cell["n_days"] == 3 and math.isnan(cell["r"]) and math.isnan(cell["p_value"])


def test_series_whose_range_is_one_have_a_rank_correlation():
    """Online (0.5, 1, 1.5) against offline (1, 3, 2): τ = 1/3; online (1, 2, 3) against offline (1, 1, 2), a
    tie: τ-b = 2 / √(3 · 2). Both series of range 1 are as good as any."""
    off = _series("e", "like", "logging", V1, [1, 3, 2]) | _series("e", "like", "logging", V3, [1, 1, 2])
    for online, (r1, r3) in (([0.5, 1, 1.5], (1 / 3, 2 / math.sqrt(6))), ([1, 2, 3], (1 / 3, 2 / math.sqrt(6)))):
        t = offline_online_correlation(_moments(off, _online("e", "control", "like", online)), variants=[V1, V3],
                                       policies=("logging",), method="kendall").table
        np.testing.assert_allclose(t["r"], [r1, r3], rtol=1e-12)


def test_the_headline_ranks_the_variants_in_the_order_asked():
    off, on = _world()
    res = offline_online_correlation(_moments(off, on), variants=[V3, V1])
    assert res.labels == (L3, L1) and list(res.headline_rows().r.columns) == [L3, L1]
