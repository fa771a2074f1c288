import datetime
import math

import numpy as np
import pandas as pd
import pytest
from analyses_world import per_session_totals, small_world
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from offeval_core.analyses import DEFAULT_VARIANTS, offline_online_correlation, variant_label
from offeval_core.errors import EstimatorWarning, UnknownName
from offeval_core.estimators import session_values


@pytest.fixture(scope="module")
def world():
    return small_world()


@pytest.fixture(scope="module")
def result(world):
    return offline_online_correlation(world[2])


def test_default_variants_are_the_papers_five_columns():
    assert [variant_label(v) for v in DEFAULT_VARIANTS] == [
        "DCG (log2, C)", "DCG (log2, Q̂)", "DCG (pbm, C)", "DCG (pbm, Q̂)", "nDCG (pbm, Q̂)"]


@pytest.mark.parametrize("method", ["pearson", "kendall", "spearman"])
def test_cell_matches_scipy_on_independently_computed_series(world, method):
    _, logs, m = world
    res = offline_online_correlation(m, variants=[("dcg", "pbm", "pbm", 64.0), ("ndcg", "pbm", "pbm", 64.0)],
                                     method=method)
    on = per_session_totals(logs, "like")
    sv = session_values(logs, reward="like", policies=["treatment"], clip=64.0)
    sv = sv[sv["arm"].astype(str) == "control"]
    fn = {"pearson": sps.pearsonr, "kendall": sps.kendalltau, "spearman": sps.spearmanr}[method]
    for policy, arm in (("logging", "control"), ("treatment", "treatment")):
        for metric in ("dcg", "ndcg"):
            g = on[(on["experiment_id"] == "exp01") & (on["arm"] == arm)].groupby("day")["total"].mean()
            off = sv[sv["experiment_id"].astype(str) == "exp01"].groupby("day")[f"{metric}__{policy}"].mean()
            expected = fn(g.to_numpy(), off.loc[g.index].to_numpy())
            cell = res.table[(res.table["experiment_id"] == "exp01") & (res.table["reward"] == "like")
                             & (res.table["policy"] == policy) & (res.table["metric"] == metric)].iloc[0]
            assert cell["n_days"] == 3
            assert cell["r"] == pytest.approx(expected.statistic, abs=1e-9)
            assert cell["p_value"] == pytest.approx(expected.pvalue, abs=1e-9)


def test_marks_best_and_significance(result):
    t = result.table
    for _, part in t.groupby(["experiment_id", "reward", "policy"]):
        ranked = part[~part["identity"]]
        assert ranked.loc[ranked["best"], "r"].min() == pytest.approx(ranked["r"].max())
        assert not part.loc[part["identity"], "best"].any()
    assert (t["significant"] == (t["p_value"] < 0.05)).all()
    html = result.styled_html()
    assert html.count("<tr>") == 2 + t.groupby(["experiment_id", "reward", "policy"]).ngroups
    assert html.count("<b>") == int(t["best"].sum())
    shown = t["r"].notna() & ~t["identity"]
    assert html.count("<sup>†</sup>") == int((t["significant"] & shown).sum())
    assert html.count("≡ 1.00") == int((t["identity"] & t["r"].notna()).sum())


def test_identity_cells_of_the_logging_policy_are_marked_not_ranked(result):
    """DCG of R0 with D = D0 at m = ∞ is the control arm's observed reward: r = 1 exactly, marked ≡."""
    t = result.table
    ident = t[t["identity"]]
    assert set(ident["policy"]) == {"logging"}
    assert set(zip(ident["discount"], ident["exposure"], ident["clip"], strict=True)) == {
        ("log2", "log2", math.inf), ("pbm", "pbm", math.inf)}
    np.testing.assert_allclose(ident["r"].dropna(), 1.0, atol=1e-9)
    # the same variants on the target policy are evidence, not identities
    same = t[(t["policy"] == "treatment") & (t["metric"] == "dcg") & (t["discount"] == t["exposure"])
             & (t["clip"] == math.inf)]
    assert len(same) == len(ident) and not same["identity"].any()
    assert "not ranked" in result.takeaway and "≡" in result.takeaway


def test_takeaway_compares_medians_over_the_same_rows(result):
    """Every variant's median is taken over the same rows: the target policy's Rₜ rows where every variant has an
    r (the R₀ rows, which hold DCG (pbm, Q̂)'s identity, get their own sentence), never 12 rows for one variant and
    6 for another."""
    t = result.table
    wide = t.assign(r=t["r"].where(~t["identity"])).pivot_table(
        index=["experiment_id", "reward", "policy"], columns="variant", values="r", aggfunc="first", dropna=False)
    common = wide.dropna()
    assert len(common) == 6 and (common.index.get_level_values("policy") == "treatment").all()
    med = common.median()
    top = med.idxmax()
    assert med[top] >= 0.5  # TRACK_R: the small world's Rₜ rows track their arm
    assert result.takeaway.startswith(f"Across the 6 (experiment, reward) rows of Rₜ = treatment, {top} tracks its "
                                      f"online reward best: median r = {med[top]:.2f}, best in ")
    # the medians over each variant's own rows differ from those over the common rows for some variant
    own = t[~t["identity"]].groupby("variant")["r"].median()
    assert (own.reindex(med.index) - med).abs().max() > 0


def test_the_charts_medians_are_the_headlines_over_the_same_rows(result):
    """The projector-size chart's diamonds and bars are each variant's median and middle half over the rows the
    headline ranks on (6 Rₜ rows here), not over every cell (the R₀ rows would pull DCG's median towards 1): the
    chart and the sentence above it state the same number."""
    from offeval_core.correlation_summary import correlation_summary_figure

    t = result.table
    common = t.assign(r=t["r"].where(~t["identity"])).pivot_table(
        index=["experiment_id", "reward", "policy"], columns="variant", values="r", aggfunc="first",
        dropna=False).dropna()
    fig = correlation_summary_figure(result)
    (diamonds,) = [tr for tr in fig.data if tr.name.startswith("median")]
    assert diamonds.name == "median of the 6 rows of Rₜ = treatment (bar: middle half)"
    labels = [result.labels[int(y)] for y in diamonds.y]
    assert set(labels) == set(common.columns)
    np.testing.assert_allclose(diamonds.x, [common[v].median() for v in labels], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.add(diamonds.x, diamonds.error_x.array),
                               [common[v].quantile(0.75) for v in labels], rtol=0, atol=1e-12)
    top = common.median().idxmax()
    assert f"{top} tracks its online reward best: median r = {common[top].median():.2f}" in result.takeaway
    every_cell = t[~t["identity"]].groupby("variant")["r"].median()
    assert (every_cell.reindex(labels) - np.asarray(diamonds.x)).abs().max() > 0.01   # the old, other rows


def test_pooled_finding_carries_the_bootstrap_uncertainty_of_each_difference(result):
    from offeval_core.analyses.correlation_diff import pooled_difference, r_difference

    d = result.daily[result.daily["policy"] == "treatment"]
    pbm_q, log2_c, log2_q = result.labels[3], result.labels[0], result.labels[1]
    for reward in ("like", "watch_complete"):
        part = d[d["reward"] == reward]
        wide = part.pivot_table(index=["experiment_id", "day"], columns="variant", values="offline")
        online = part.groupby(["experiment_id", "day"])["online"].first()
        diffs = []
        for b in (log2_c, log2_q):
            got = pooled_difference(result.daily, pbm_q, b, reward=reward)
            ra = np.corrcoef(online, wide[pbm_q])[0, 1]
            rb = np.corrcoef(online, wide[b])[0, 1]
            assert (got.r_a, got.r_b, got.n_points) == (pytest.approx(ra), pytest.approx(rb), 9)
            # the same paired bootstrap, computed here with a loop: the same interval
            rng = np.random.default_rng(0)
            idx = rng.integers(0, 9, size=(1000, 9))
            x, ya, yb = online.to_numpy(), wide[pbm_q].to_numpy(), wide[b].to_numpy()
            boot = [np.corrcoef(x[i], ya[i])[0, 1] - np.corrcoef(x[i], yb[i])[0, 1] for i in idx]
            boot = np.array(boot)[np.isfinite(boot)]
            assert (got.low, got.high) == pytest.approx(tuple(np.quantile(boot, [0.005, 0.995])), abs=1e-12)  # 99 %
            assert got.text() in result.takeaway
            diffs.append(got)
        verdicts = [g.verdict for g in diffs]
        want = "holds" if verdicts == ["A", "A"] else ("does not hold on these logs" if "B" in verdicts
                                                       else "undecided: a difference's bootstrap CI holds 0")
        chunk = result.takeaway.split(f"{reward}, {pbm_q} — ")[1]
        assert f"({want})" in chunk.split(" · ")[0]
    # a bootstrap CI that holds 0 is never called a win
    g = np.random.default_rng(3)
    x = g.normal(size=40)
    same = r_difference(x, x + g.normal(size=40), x + g.normal(size=40))   # two equally noisy copies
    assert same.low < 0 < same.high and same.verdict == "tie" and same.diff != 0


def test_wide_and_series_layouts(result):
    w = result.wide()
    assert list(w.columns.get_level_values(0).unique()) == list(result.labels)
    assert len(w) == 3 * 2 * 2  # experiments × rewards × {R0, Rt}
    s = result.series("exp02", "watch_complete", "Rt")
    assert list(s.columns) == ["day", "online", *result.labels]
    assert len(s) == 3
    cell = result.table[(result.table["experiment_id"] == "exp02") & (result.table["reward"] == "watch_complete")
                        & (result.table["policy"] == "treatment")]
    assert s.attrs["r"] == dict(zip(cell["variant"], cell["r"], strict=True))
    assert np.corrcoef(s["online"], s[result.labels[3]])[0, 1] == pytest.approx(s.attrs["r"][result.labels[3]])


def test_warns_with_fewer_than_four_days(result):
    assert any("only 3 day(s)" in w for w in result.warnings)
    # one warning per day count, naming every experiment with it (three boxes pushed the chart below the fold)
    assert [w for w in result.warnings if "day(s)" in w] == [
        f"experiments {', '.join(sorted(map(str, result.table['experiment_id'].unique())))} have only 3 day(s); "
        "a correlation across fewer than 4 days is not informative"]


def test_bad_arguments(world):
    m = world[2]
    with pytest.raises(ValueError, match="policies must be 'logging' .R0, control arm. and at most one target policy"):
        offline_online_correlation(m, policies=("logging", "treatment", "cand_01"))
    with pytest.raises(UnknownName, match="^policy 'cand_01' was not computed; available: treatment$"):
        offline_online_correlation(m, policies=("cand_01",))  # any target name works, but it must be reduced
    with pytest.raises(ValueError, match="method must be one of 'pearson', 'kendall', 'spearman'; got 'tau'"):
        offline_online_correlation(m, method="tau")
    with pytest.raises(UnknownName, match=r"^clip 2 of DCG \(pbm, Q̂ m=2\) was not computed; available: "):
        offline_online_correlation(m, variants=[("dcg", "pbm", "pbm", 2)])
    with pytest.raises(ValueError, match="discount 'reciprocal'"):
        offline_online_correlation(m, variants=[("dcg", "reciprocal", "pbm", math.inf)])
    with pytest.raises(TypeError, match="variants entry must be a"):
        offline_online_correlation(m, variants=["dcg"])


def test_pooled_correlation_over_experiment_days_matches_numpy_and_is_in_the_takeaway(result):
    from offeval_core.analyses.correlation import pooled_correlation
    pooled = pooled_correlation(result.daily)
    d = result.daily[result.daily["policy"] == "treatment"]
    for rec in pooled.itertuples():
        part = d[(d["reward"] == rec.reward) & (d["variant"] == rec.variant)]
        assert rec.n_points == len(part) == 9                       # 3 experiments × 3 days
        assert rec.r == pytest.approx(np.corrcoef(part["online"], part["offline"])[0, 1], abs=1e-12)
    assert "pooled over the target policy's experiment-days" in result.takeaway
    like = pooled[pooled["reward"] == "like"].set_index("variant")["r"]
    assert f"r = {like.loc[result.labels[3]]:.2f} vs {like.loc[result.labels[0]]:.2f}" in result.takeaway


def test_drill_down_takeaway_names_the_closest_variant_and_the_identities(result):
    """The drill-down sentence is computed from the row's cells: best and worst non-identity r, identities
    named (≡) and never ranked."""
    t = result.table
    exp, reward = t["experiment_id"].iloc[0], t["reward"].iloc[0]
    for policy in ("logging", "treatment"):
        row = t[(t["experiment_id"] == exp) & (t["reward"] == reward) & (t["policy"] == policy)]
        ranked = row[~row["identity"]].dropna(subset=["r"]).sort_values("r", ascending=False)
        text = result.series_takeaway(exp, reward, policy)
        n_days = len(result.series(exp, reward, policy))
        assert text.startswith(f"{exp} · {reward} · {'R₀ (logging)' if policy == 'logging' else 'Rₜ (treatment)'}, "
                               f"{n_days} days: ")
        if len(ranked):
            best = ranked.iloc[0]
            assert f"{best['variant']} follows the online reward most closely (Pearson r = {best['r']:.2f})" in text
        identities = row[row["identity"]]["variant"].tolist()
        assert ("≡ identity" in text) == bool(identities) == (policy == "logging")
        if identities:
            assert text.endswith(f"{' and '.join(identities)} {'equals' if len(identities) == 1 else 'equal'} the "
                                 "online control by construction (≡ identity, r = 1): not evidence, not ranked.")


def test_kendall_drill_down_names_its_coefficient_tau_not_r(world):
    res = offline_online_correlation(world[2], method="kendall")
    t = res.table
    exp, reward = t["experiment_id"].iloc[0], t["reward"].iloc[0]
    row = t[(t["experiment_id"] == exp) & (t["reward"] == reward) & (t["policy"] == "logging")]
    best = row[~row["identity"]].dropna(subset=["r"]).sort_values("r", ascending=False).iloc[0]
    text = res.series_takeaway(exp, reward, "logging")
    assert f"{best['variant']} follows the online reward most closely (Kendall τ = {best['r']:.2f})" in text
    assert text.endswith("(≡ identity, τ = 1): not evidence, not ranked.") and " r = " not in text


def test_no_experiment_day_with_both_values_is_a_clear_error(world):
    import dataclasses

    m = world[2]
    no_treatment_arm = dataclasses.replace(m, online=m.online[m.online["arm"] != "treatment"])
    with pytest.raises(ValueError) as exc:
        offline_online_correlation(no_treatment_arm, policies=("treatment",), rewards=("like",))
    assert str(exc.value) == ("no (experiment, day) has both an offline estimate of 'treatment' and an online reward "
                              "of its arm for 'like'")
    # the logging policy's rows (the control arm) are still there
    t = offline_online_correlation(no_treatment_arm, policies=("logging",), rewards=("like",)).table
    assert set(t["policy"]) == {"logging"} and t["experiment_id"].nunique() == 3


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(2, 30), st.integers(0, 2**32 - 1), st.integers(2, 8))
def test_vectorised_kendall_equals_scipy_row_by_row(n_rows, n, seed, levels):
    """The bootstrap's Kendall τ-b of every resample (vectorised) is SciPy's ``kendalltau`` of that resample, ties
    included (values drawn from a few levels), NaN where a row is constant; a row chunk of one cell too."""
    from offeval_core.analyses.correlation_diff import _kendall_rows

    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, size=(n_rows, n)).astype(float)
    y = rng.integers(0, levels, size=(n_rows, n)).astype(float) + 0.5 * x
    want = np.array([sps.kendalltau(a, b).statistic if np.ptp(a) and np.ptp(b) else np.nan for a, b in zip(x, y, strict=True)])
    for cells in (1, 1 << 22):
        got = _kendall_rows(x, y, chunk_cells=cells)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        assert (np.isnan(got) == np.isnan(want)).all()


def test_a_day_without_an_offline_value_is_left_out_of_its_cell():
    """pnDCG = Σ DCG / Σ iDCG is undefined on a day whose control sessions earned nothing (Σ iDCG = 0): that day
    leaves the pnDCG cell (3 days, r over them), while DCG (0 on that day) keeps all 4."""
    from offeval_core.engine import Grid, reduce
    from offeval_core.logs import read_logs

    rows = []
    # per day d = 1..4: control sessions with a like at rank 1 on days 1-3 only (d of them), none on day 4; the
    # treatment arm's online likes rise with d
    for d in range(1, 5):
        for s in range(4):
            for arm, liked in (("control", d < 4 and s < d), ("treatment", s < min(d, 3))):
                sid = d * 100 + s + (50 if arm == "treatment" else 0)
                for rank in (1, 2):
                    rows.append({"session_id": sid, "rank": rank, "like": float(liked and rank == 1),
                                 "rank__treatment": 3 - rank if (s + d) % 2 else rank, "experiment_id": "e",
                                 "day": f"2026-01-0{d}", "arm": arm})
    logs = read_logs(pd.DataFrame(rows))
    m = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("log2",), exposures=("log2",)),
               cache=None)
    with pytest.warns(EstimatorWarning, match="below the precision"):  # day 1: a single rewarded control session
        res = offline_online_correlation(m, variants=[("dcg", "log2", "log2", math.inf),
                                                      ("pndcg", "log2", "log2", math.inf)], policies=("treatment",))
    dcg, pndcg = res.labels
    last = datetime.date(2026, 1, 4)
    daily = res.daily.set_index(["variant", "day"])["offline"]
    assert math.isnan(daily[(pndcg, last)]) and daily[(dcg, last)] == 0
    cells = res.table.set_index("metric")
    assert cells.loc["dcg", "n_days"] == 4 and cells.loc["pndcg", "n_days"] == 3
    online = res.daily[res.daily["variant"] == pndcg].set_index("day")["online"]
    known = daily[pndcg].dropna()
    assert len(known) == 3
    expected = sps.pearsonr(online.loc[known.index].to_numpy(), known.to_numpy())
    assert cells.loc["pndcg", "r"] == pytest.approx(expected.statistic, abs=1e-12)
    assert cells.loc["pndcg", "p_value"] == pytest.approx(expected.pvalue, abs=1e-12)
