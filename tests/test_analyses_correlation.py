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


def test_default_variants_by_hand():
    """Table 2's five columns: C is m = 1, Q̂ the clip asked (a float), the learnt PBM's spec as given."""
    from offeval_core.analyses import Variant
    from offeval_core.analyses.correlation import default_variants

    assert default_variants() == DEFAULT_VARIANTS == (
        Variant("dcg", "log2", "log2", 1.0), Variant("dcg", "log2", "log2", math.inf),
        Variant("dcg", "pbm", "pbm", 1.0), Variant("dcg", "pbm", "pbm", math.inf),
        Variant("ndcg", "pbm", "pbm", math.inf))
    got = default_variants(8, pbm="pbm:0.001")
    assert got == (Variant("dcg", "log2", "log2", 1.0), Variant("dcg", "log2", "log2", 8.0),
                   Variant("dcg", "pbm:0.001", "pbm:0.001", 1.0), Variant("dcg", "pbm:0.001", "pbm:0.001", 8.0),
                   Variant("ndcg", "pbm:0.001", "pbm:0.001", 8.0))
    assert all(type(v.clip) is float for v in got)


def _hand_result(**kw):
    """A correlation result written by hand: rows e2 (Rₜ), e1 (R₀, with an identity) and e3 (no r), in that order."""
    from offeval_core.analyses.correlation import CorrelationResult

    t = pd.DataFrame({"experiment_id": ["e2", "e2", "e1", "e1", "e3", "e3"], "reward": ["click"] * 6,
                      "policy": ["treatment", "treatment", "logging", "logging", "treatment", "treatment"],
                      "policy_label": ["Rₜ", "Rₜ", "R₀", "R₀", "Rₜ", "Rₜ"], "variant": ["A", "B"] * 3,
                      "r": [0.9, 0.4, 1.0, 0.25, math.nan, math.nan],
                      "p_value": [0.004, 0.3, 0.0, 0.01, math.nan, math.nan],
                      "significant": [True, False, True, True, False, False],
                      "identity": [False, False, True, False, False, False],
                      "best": [True, False, False, True, False, False]})
    args = dict(table=t, daily=pd.DataFrame(), variants=(), method="kendall", warnings=(), takeaway="", alpha=0.1,
                labels=("A", "B"), target="v<2>")
    return CorrelationResult(**{**args, **kw})


def test_wide_layout_by_hand():
    """One row per (experiment, reward, policy label) of the table, in its order — e3's row without an r kept as
    NaN, and no row for a combination of the levels that has no cell (e2 with R₀, e1 with Rₜ, e3 with R₀: before,
    three all-NaN rows that read as correlations not computed) —, columns (variant, r | p_value) in the labels'
    order."""
    w = _hand_result(labels=("B", "A")).wide()
    nan = math.nan
    index = pd.MultiIndex.from_tuples([("e2", "click", "Rₜ"), ("e1", "click", "R₀"), ("e3", "click", "Rₜ")],
                                      names=["experiment_id", "reward", "policy_label"])
    columns = pd.MultiIndex.from_tuples([("B", "r"), ("B", "p_value"), ("A", "r"), ("A", "p_value")],
                                        names=["variant", "statistic"])
    want = pd.DataFrame([[0.4, 0.3, 0.9, 0.004], [0.25, 0.01, 1.0, 0.0], [nan] * 4], index=index, columns=columns)
    pd.testing.assert_frame_equal(w, want)


def test_styled_html_by_hand():
    """The whole table: Kendall's τ in the heads, † where significant, the best r bold, p below 0.01 as "<0.01"
    (0.01 itself printed), the identity greyed with no p, a row without r as dashes, rows in the table's order,
    names escaped, the caption's α and target."""
    got = _hand_result().styled_html()
    style = ("<style>.t2{border-collapse:collapse;font:13px Helvetica,Arial,sans-serif}"
             ".t2 td,.t2 th{padding:3px 8px;text-align:right;border-bottom:1px solid #ddd}"
             ".t2 thead th{border-bottom:2px solid #333;text-align:center}"
             ".t2 caption{caption-side:bottom;text-align:left;padding-top:6px;color:#444}</style>")
    caption = ("Correlation across days between the online mean reward per session and offline metrics (Kendall τ, "
               "two-tailed p). † p &lt; 0.1; bold: best per row; ≡: identity (DCG of the logging policy with D = D0 "
               "at m = ∞, or an importance estimator of it, is the control arm's observed reward, r = 1 by "
               "construction; not ranked). R₀ = logging policy (control arm), Rₜ = v&lt;2&gt; (treatment arm); "
               "offline values on control logs.")
    head = ('<thead><tr><th rowspan="2">experiment</th><th rowspan="2">reward</th><th rowspan="2">policy</th>'
            '<th colspan="2">A</th><th colspan="2">B</th></tr><tr><th>τ</th><th>p-val</th><th>τ</th><th>p-val</th>'
            "</tr></thead>")
    body = ("<tbody><tr><th>e2</th><th>click</th><th>Rₜ</th><td><b>0.90<sup>†</sup></b></td><td>&lt;0.01</td>"
            "<td>0.40</td><td>0.30</td></tr>"
            '<tr><th>e1</th><th>click</th><th>R₀</th><td style="color:#888" title="identity: offline on the logging '
            'policy equals the online control by construction">≡ 1.00</td><td>–</td><td><b>0.25<sup>†</sup></b></td>'
            "<td>0.01</td></tr>"
            "<tr><th>e3</th><th>click</th><th>Rₜ</th><td>–</td><td>–</td><td>–</td><td>–</td></tr></tbody>")
    assert got == f'{style}<table class="t2"><caption>{caption}</caption>{head}{body}</table>'
    t = _hand_result().table
    pearson = _hand_result(method="pearson", alpha=0.05, labels=("B", "A"), target="treatment",
                           table=t.assign(reward="a&b")).styled_html()
    assert ('<th colspan="2">B</th><th colspan="2">A</th></tr><tr><th>r</th><th>p-val</th><th>r</th><th>p-val</th>'
            in pearson)
    assert "(Pearson r, two-tailed p). † p &lt; 0.05;" in pearson and "Rₜ = treatment (treatment arm)" in pearson
    assert "<tr><th>e2</th><th>a&amp;b</th><th>Rₜ</th><td>0.40</td><td>0.30</td><td><b>0.90<sup>†</sup></b></td>" in pearson


def test_series_and_its_takeaway_by_hand():
    """The drill-down of a result written by hand (target policy ``v2``, variants A, B, C over four days): best and
    worst of three ranked variants, a single ranked variant (no "least"), none ranked, one and two identities."""
    from offeval_core.analyses.correlation import CorrelationResult

    keys = [("click", "v2"), ("click", "logging"), ("like", "logging")]
    r = {("click", "v2"): (0.9, 0.4, -0.2), ("click", "logging"): (1.0, 1.0, math.nan),
         ("like", "logging"): (1.0, 0.5, math.nan)}
    ident = {("click", "v2"): (False, False, False), ("click", "logging"): (True, True, False),
             ("like", "logging"): (True, False, False)}
    t = pd.DataFrame([{"experiment_id": "e", "reward": rw, "policy": pol, "variant": v, "r": r[rw, pol][i],
                       "identity": ident[rw, pol][i]} for rw, pol in keys for i, v in enumerate("ABC")])
    d = pd.DataFrame([{"experiment_id": "e", "reward": rw, "policy": pol, "day": day, "variant": v,
                       "online": float(day), "offline": 10.0 * day + i} for rw, pol in keys
                      for i, v in enumerate("ABC") for day in (4, 1, 3, 2)])
    res = CorrelationResult(table=t, daily=d, variants=(), method="kendall", warnings=(), takeaway="",
                            labels=("C", "A", "B"), target="v2")
    s = res.series("e", "click", "Rt")   # Rt is the result's target, v2
    want = pd.DataFrame({"day": [1, 2, 3, 4], "online": [1.0, 2, 3, 4], "C": [12.0, 22, 32, 42],
                         "A": [10.0, 20, 30, 40], "B": [11.0, 21, 31, 41]})
    pd.testing.assert_frame_equal(s, want)
    assert s.attrs == {"experiment_id": "e", "reward": "click", "policy": "v2", "policy_label": "Rₜ",
                       "method": "kendall", "r": {"A": 0.9, "B": 0.4, "C": -0.2}, "identity": []}
    assert res.series_takeaway("e", "click", "Rt") == (
        "e · click · Rₜ (v2), 4 days: A follows the online reward most closely (Kendall τ = 0.90), C least "
        "(τ = -0.20).")
    assert res.series_takeaway("e", "click", "R0") == (
        "e · click · R₀ (logging), 4 days: no Kendall correlation is computable (fewer than 4 days or a constant "
        "series). A and B equal the online control by construction (≡ identity, τ = 1): not evidence, not ranked.")
    assert res.series_takeaway("e", "like", "logging") == (
        "e · like · R₀ (logging), 4 days: B follows the online reward most closely (Kendall τ = 0.50). A equals the "
        "online control by construction (≡ identity, τ = 1): not evidence, not ranked.")
    with pytest.raises(UnknownName, match=r"^no row for experiment 'e', reward 'click', policy 'treatment'$"):
        res.series("e", "click", "treatment")


def test_pooled_correlation_by_hand():
    """Per (reward, variant) in the order first met: r over the points of the policy with both values (a NaN in
    another column keeps its point); deviations (−1.5, −0.5, 0.5, 1.5) and (−1.5, 0.5, −0.5, 1.5) give r = 4 / 5."""
    from offeval_core.analyses.correlation import pooled_correlation

    nan = math.nan
    daily = pd.DataFrame({
        "reward": ["b"] * 4 + ["a"] * 4 + ["b"] * 2,
        "variant": ["V"] * 10,
        "policy": ["treatment"] * 8 + ["logging"] * 2,
        "online": [1.0, 2, 3, 4, 1, 2, 3, 4, 1, 2],
        "offline": [1.0, 3, 2, 4, 3, 2, 1, nan, 5, 1],
        "note": [nan] * 10})
    got = pooled_correlation(daily)
    want = pd.DataFrame({"reward": ["b", "a"], "variant": ["V", "V"], "n_points": [4, 3], "r": [0.8, -1.0]})
    pd.testing.assert_frame_equal(got, want)
    none = pooled_correlation(daily, policy="v9")
    assert list(none.columns) == ["reward", "variant", "n_points", "r"] and none.empty
    tau = pooled_correlation(daily, policy="logging", method="kendall")   # two points: too few for τ
    assert tau["n_points"].tolist() == [2] and math.isnan(tau["r"].iloc[0])


def _cells(rows):
    """A correlation table from (experiment, policy, variant, r, significant, identity) rows, reward ``click``."""
    return pd.DataFrame([{"experiment_id": e, "reward": "click", "policy": p, "variant": v, "r": r,
                          "significant": s, "identity": i} for e, p, v, r, s, i in rows])


def test_takeaway_by_hand():
    """The headline over the target policy's rows where every variant has an r (e3 lacks B's: left out), the R₀
    rows' own sentence (A is an identity there, never ranked), the identities counted."""
    from offeval_core.analyses.correlation import _takeaway

    nan = math.nan
    t = _cells([("e1", "v2", "A", 0.9, True, False), ("e1", "v2", "B", 0.5, False, False),
                ("e1", "v2", "C", 0.1, False, False), ("e2", "v2", "A", 0.7, False, False),
                ("e2", "v2", "B", 0.8, True, False), ("e2", "v2", "C", 0.2, False, False),
                ("e3", "v2", "A", 0.6, True, False), ("e3", "v2", "B", nan, False, False),
                ("e3", "v2", "C", 0.3, False, False),
                ("e1", "logging", "A", 1.0, True, True), ("e1", "logging", "B", 0.3, False, False),
                ("e1", "logging", "C", 0.6, False, False), ("e2", "logging", "A", 1.0, True, True),
                ("e2", "logging", "B", 0.5, False, False), ("e2", "logging", "C", 0.4, False, False)])
    # medians over e1, e2: A 0.8, B 0.65, C 0.15; the row maxima are A's 0.9 and B's 0.8; A is positive and
    # significant in e1 only. R₀: B (0.3, 0.5) → 0.4, C (0.6, 0.4) → 0.5
    assert _takeaway(t, ("A", "B", "C"), "pearson") == (
        "Across the 2 (experiment, reward) rows of Rₜ = v2 where every variant has an r (1 row without one left out "
        "of every median), A tracks its online reward best: median r = 0.80, best in 1 of 2 rows, positive and "
        "significant (p < 0.05) in 1 of 2 rows; C is lowest (median r = 0.15). On the R₀ rows (the logging policy, "
        "whose offline and online values read the same control sessions) C has the highest median r, 0.50. 2 R₀ "
        "cell(s) marked ≡ are identities (on the logging policy, DCG with D = D0 at m = ∞ and every per-session "
        "importance estimator are the control arm's observed reward) and are not ranked.")


def test_takeaway_when_nothing_tracks_by_hand():
    """Only R₀ rows: a best median below 0.5 (a significant negative r does not count as support); a best median
    above it that is significant in no row; two rows left out; no r at all; no row where every variant has one."""
    from offeval_core.analyses.correlation import _takeaway

    nan = math.nan
    t = _cells([("e1", "logging", "A", 0.4, True, False), ("e1", "logging", "B", 0.0, False, False),
                ("e2", "logging", "A", -0.2, True, False), ("e2", "logging", "B", -0.1, False, False)])
    assert _takeaway(t, ("A", "B"), "spearman", alpha=0.1) == (
        "No variant tracks the online reward of R₀ = the logging policy across days on these logs: the highest "
        "median ρ over its 2 (experiment, reward) rows is A's 0.10, below 0.5 (A is positive and significant "
        "(p < 0.1) in 1 of 2 rows); B is lowest (median ρ = -0.05).")
    t = _cells([("e1", "v2", "A", 0.6, False, False), ("e2", "v2", "A", nan, False, False),
                ("e3", "v2", "A", nan, False, False), ("e1", "logging", "A", nan, False, False)])
    assert _takeaway(t, ("A",), "kendall") == (
        "No variant tracks the online reward of Rₜ = v2 across days on these logs: the highest median τ over its 1 "
        "(experiment, reward) rows where every variant has an τ (2 rows without one left out of every median) is "
        "A's 0.60, positive and significant in no row (A is positive and significant (p < 0.05) in 0 of 1 rows).")
    t = _cells([("e1", "v2", "A", 0.3, True, False), ("e1", "v2", "B", nan, False, False),
                ("e2", "v2", "A", nan, False, False), ("e2", "v2", "B", 0.7, True, False)])
    assert _takeaway(t, ("A", "B"), "pearson") == (
        "No correlation could be computed on the rows of Rₜ = v2 where every variant has one (too few days).")
    t = _cells([("e1", "v2", "A", nan, False, False), ("e1", "logging", "A", 1.0, True, True)])
    assert _takeaway(t, ("A",), "pearson") == "No correlation could be computed (too few days)."


def test_takeaway_at_the_threshold_counts_wins_per_row():
    """A median r of exactly TRACK_R = 0.5 tracks; A is best in the rows where it is that row's maximum (e2, e3),
    though below B's 0.7 of e1; only e1's significant positive r supports it."""
    from offeval_core.analyses.correlation import _takeaway

    t = _cells([("e1", "v2", "A", 0.6, True, False), ("e1", "v2", "B", 0.7, True, False),
                ("e2", "v2", "A", 0.5, False, False), ("e2", "v2", "B", 0.2, False, False),
                ("e3", "v2", "A", 0.4, False, False), ("e3", "v2", "B", 0.3, False, False)])
    assert _takeaway(t, ("A", "B"), "pearson") == (
        "Across the 3 (experiment, reward) rows of Rₜ = v2, A tracks its online reward best: median r = 0.50, best "
        "in 2 of 3 rows, positive and significant (p < 0.05) in 1 of 3 rows; B is lowest (median r = 0.30).")


def test_pooled_text_by_hand():
    """Table 2's finding per reward, over the target policy's 8 experiment-days: the learnt-PBM Q̂ variant P
    against each log2 variant. Exact copies and reversals make every resample's r ±1, so each bootstrap CI is a
    point: +2 (A wins), 0 (a tie) or −2 (B wins) — holds, undecided, does not hold. The PBM C, nDCG and R₀ rows
    take no part."""
    from offeval_core.analyses.correlation import _pooled_text

    kinds = {"P": ("dcg", "pbm", "pbm", math.inf), "L1": ("dcg", "log2", "log2", 1.0),
             "L2": ("dcg", "log2", "log2", math.inf), "PC": ("dcg", "pbm", "pbm", 1.0),
             "N": ("ndcg", "pbm", "pbm", math.inf)}
    sign = {"view": {"P": 1, "L1": -1, "L2": -1}, "click": {"P": 1, "L1": -1, "L2": 1},
            "like": {"P": -1, "L1": 1, "L2": 1}}
    table = pd.DataFrame([{"reward": rw, "policy": pol, "variant": v, "metric": k[0], "discount": k[1],
                           "exposure": k[2], "clip": k[3]} for rw in sign for pol in ("logging", "v2")
                          for v, k in kinds.items()])
    online = np.array([3.0, 1, 4, 1.5, 5, 9, 2, 6])
    daily = pd.DataFrame([{"reward": rw, "policy": pol, "variant": v, "experiment_id": f"e{i // 4}", "day": i % 4,
                           "online": online[i], "offline": sign[rw].get(v, 1) * online[i] * (-1 if pol == "logging"
                                                                                             else 1)}
                          for rw in sign for pol in ("logging", "v2") for v in kinds for i in range(8)])

    def cmp(b, r_b, diff):
        return (f"vs {b}: r = 1.00 vs {r_b}, difference {diff} (99 % bootstrap CI {diff} to {diff}) over 8 "
                "experiment-days")

    got = _pooled_text(table, daily, "pearson")
    assert got == (
        " KDD'24 Table 2's finding (the learnt-PBM de-biased DCG tracks the online reward better than both log2 "
        "variants), pooled over the target policy's experiment-days: "
        f"view, P — {cmp('L1', '-1.00', '+2.00')}; {cmp('L2', '-1.00', '+2.00')} (holds) · "
        f"click, P — {cmp('L1', '-1.00', '+2.00')}; {cmp('L2', '1.00', '+0.00')} (undecided: a difference's "
        "bootstrap CI holds 0) · "
        f"like, P — {cmp('L1', '1.00', '-2.00').replace('r = 1.00 vs', 'r = -1.00 vs')}; "
        f"{cmp('L2', '1.00', '-2.00').replace('r = 1.00 vs', 'r = -1.00 vs')} (does not hold on these logs).")
    # Kendall's τ of copies and reversals is ±1 too: the same finding, told with τ
    assert _pooled_text(table, daily, "kendall") == got.replace("r = ", "τ = ")
    # a PBM Q̂ variant listed first whose every difference is NaN (a constant series) is skipped, not the end
    p8 = pd.DataFrame([{"reward": rw, "policy": pol, "variant": "P8", "metric": "dcg", "discount": "pbm",
                        "exposure": "pbm", "clip": 8.0} for rw in sign for pol in ("logging", "v2")])
    flat = daily[daily["variant"] == "P"].assign(variant="P8", offline=1.0)
    assert _pooled_text(pd.concat([p8, table], ignore_index=True), pd.concat([flat, daily], ignore_index=True),
                        "pearson") == got
    # a PBM Q̂ clipped at m = 2 is still de-biased (m > 1): the same finding
    assert _pooled_text(table.assign(clip=table["clip"].where(table["variant"] != "P", 2.0)), daily, "pearson") == got
    assert _pooled_text(table[table["variant"] != "P"], daily, "pearson") == ""      # no PBM Q̂ variant
    assert _pooled_text(table[~table["variant"].isin(["L1", "L2"])], daily, "pearson") == ""   # no log2 variant
    few = daily[daily["experiment_id"] == "e0"].iloc[:0]
    assert _pooled_text(table, few, "pearson") == ""      # no point: every difference is NaN


def test_is_identity_of_each_kind_of_variant():
    """On R₀: DCG with D = D0 at m = ∞, and every per-session importance estimator at any clip; not nDCG, not
    DCG with another discount or a finite clip, not a per-impression estimator; nothing on a target policy."""
    from offeval_core.analyses import Variant
    from offeval_core.analyses.correlation import is_identity

    inf = math.inf
    cases = {("dcg", "pbm", "pbm", inf): True, ("dcg", "log2", "pbm", inf): False, ("dcg", "pbm", "pbm", 8.0): False,
             ("ndcg", "pbm", "pbm", inf): False, ("cis", "propensity", "propensity", 8.0): True,
             ("snips", "pbm", "pbm", inf): True, ("cis@impression", "propensity", "propensity", 8.0): False,
             ("snips@impression", "pbm", "pbm", inf): False}
    for v, want in cases.items():
        assert is_identity(Variant(*v), "logging") is want, v
        assert is_identity(Variant(*v), "treatment") is False


def test_r_difference_fields_verdict_and_text_by_hand():
    """The verdict needs the CI strictly above (A) or below (B) 0; the text prints the method's symbol and the
    level."""
    from offeval_core.analyses.correlation_diff import RDifference

    d = RDifference("A", "B", 0.81, 0.74, 0.02, 0.12, 140, 0.99)
    assert d.diff == pytest.approx(0.07, abs=1e-15) and d.method == "pearson" and d.verdict == "A"
    assert d.text() == "r = 0.81 vs 0.74, difference +0.07 (99 % bootstrap CI +0.02 to +0.12) over 140 experiment-days"
    tau = RDifference("A", "B", 0.1, 0.4, -0.5, -0.1, 9, 0.95, "kendall")
    assert tau.verdict == "B"
    assert tau.text() == "τ = 0.10 vs 0.40, difference -0.30 (95 % bootstrap CI -0.50 to -0.10) over 9 experiment-days"
    assert RDifference("A", "B", 0.5, 0.4, 0.0, 0.2, 9, 0.99).verdict == "tie"      # low = 0: not above
    assert RDifference("A", "B", 0.4, 0.5, -0.2, 0.0, 9, 0.99).verdict == "tie"     # high = 0: not below
    assert RDifference("A", "B", 0.4, 0.5, math.nan, math.nan, 2, 0.99).verdict == "tie"


def test_row_correlations_by_hand():
    """Pearson per row ((−1, 0, 1)·(−1, 1, 0) / √(2·2) = 0.5; NaN for a constant row on either side; (1, 2, 3)
    against (1, 4, 9): 8 / √(2 · 98/3) = 4√3/7), Spearman as Pearson of the ranks within each row (x² keeps the
    order: 1), Kendall's τ-b."""
    from offeval_core.analyses.correlation_diff import _corr_rows, _pearson_rows

    x = np.array([[1.0, 2, 3], [1, 1, 1], [1, 2, 3], [1, 2, 3]])
    y = np.array([[1.0, 3, 2], [1, 2, 3], [4, 4, 4], [1, 4, 9]])
    np.testing.assert_allclose(_pearson_rows(x, y), [0.5, np.nan, np.nan, 4 * math.sqrt(3) / 7],
                               rtol=1e-12)
    np.testing.assert_allclose(_corr_rows(x, y, "pearson"), _pearson_rows(x, y), rtol=0)
    np.testing.assert_allclose(_corr_rows(x, y, "spearman"), [0.5, np.nan, np.nan, 1.0], rtol=1e-12)
    np.testing.assert_allclose(_corr_rows(x, y, "kendall"), [1 / 3, np.nan, np.nan, 1.0], rtol=1e-12)


def _loop_difference(x, ya, yb, fn, n_boot, level, seed):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    boot = []
    for i in idx:
        if np.ptp(x[i]) and np.ptp(ya[i]) and np.ptp(yb[i]):
            boot.append(fn(x[i], ya[i]).statistic - fn(x[i], yb[i]).statistic)
    tail = (1 - level) / 2
    return tuple(np.quantile(boot, [tail, 1 - tail]))


@pytest.mark.parametrize("method", ["pearson", "kendall", "spearman"])
def test_r_difference_against_a_resample_loop(method):
    """Each method's r of the finite points (a NaN day is dropped from all three series) and its paired bootstrap
    percentile CI equal a loop over the same draws with SciPy; a seed and its Generator give the same draws."""
    from offeval_core.analyses.correlation_diff import r_difference

    g = np.random.default_rng(11)
    x = g.normal(size=12)
    ya, yb = x + g.normal(size=12), x + 2 * g.normal(size=12)
    fn = {"pearson": sps.pearsonr, "kendall": sps.kendalltau, "spearman": sps.spearmanr}[method]
    x_nan, ya_nan = np.append(x, np.nan), np.append(ya, 1.0)
    got = r_difference(x_nan, ya_nan, np.append(yb, 2.0), a="a", b="b", method=method, n_boot=300, level=0.9,
                       rng=7)
    assert (got.a, got.b, got.n_points, got.level, got.method) == ("a", "b", 12, 0.9, method)
    assert got.r_a == pytest.approx(fn(x, ya).statistic, abs=1e-12)
    assert got.r_b == pytest.approx(fn(x, yb).statistic, abs=1e-12)
    assert (got.low, got.high) == pytest.approx(_loop_difference(x, ya, yb, fn, 300, 0.9, 7), abs=1e-12)
    same = r_difference(x, ya, yb, method=method, n_boot=300, level=0.9, rng=np.random.default_rng(7))
    assert (same.low, same.high) == (got.low, got.high)


def test_r_difference_defaults_and_too_few_points():
    """1000 resamples at LEVEL (99 %) with seed 0 by default; three points suffice, two give NaN (no resampling);
    a constant series gives NaN; mismatched shapes are named."""
    from offeval_core.analyses.correlation_diff import r_difference

    g = np.random.default_rng(2)
    x = g.normal(size=10)
    ya, yb = x + g.normal(size=10), x + g.normal(size=10)
    d = r_difference(x, ya, yb)
    assert (d.a, d.b, d.level, d.method, d.n_points) == ("A", "B", 0.99, "pearson", 10)
    assert (d.low, d.high) == pytest.approx(_loop_difference(x, ya, yb, sps.pearsonr, 1000, 0.99, 0), abs=1e-12)
    three = r_difference([1.0, 2, 3], [1.0, 3, 2], [3.0, 2, 1], n_boot=50)
    assert (three.r_a, three.r_b, three.n_points) == (pytest.approx(0.5), pytest.approx(-1.0), 3)
    assert not math.isnan(three.low)
    # one resample, of the third point three times (seed 4): constant, so no finite difference and no interval
    lone = r_difference([1.0, 2, 3], [1.0, 3, 2], [3.0, 2, 1], n_boot=1, rng=4)
    assert (lone.r_a, lone.r_b) == (pytest.approx(0.5), pytest.approx(-1.0))
    assert math.isnan(lone.low) and math.isnan(lone.high) and lone.verdict == "tie"
    two = r_difference([1.0, 2], [1.0, 2], [2.0, 1], a="p", b="q", level=0.9, method="kendall")
    assert two.n_points == 2 and all(math.isnan(v) for v in (two.r_a, two.r_b, two.low, two.high))
    assert (two.a, two.b, two.level, two.method) == ("p", "q", 0.9, "kendall")
    flat = r_difference([1.0, 2, 3, 4], [5.0, 5, 5, 5], [1.0, 2, 4, 3])
    assert math.isnan(flat.r_a) and flat.r_b == pytest.approx(0.8) and math.isnan(flat.low) and flat.n_points == 4
    # numbers given as lists with None or as an object array are read as floats (None is a missing day)
    on, a, b = [1, 2, None, 4, 5], [2, 1, 3, 5, None], np.array([1, 3, 2, 2, 7], dtype=object)
    got = r_difference(on, a, b, n_boot=50)
    assert got == r_difference([1.0, 2, 4], [2.0, 1, 5], [1.0, 3, 2], n_boot=50) and got.n_points == 3
    assert r_difference(b, on, a, n_boot=50) == r_difference([1.0, 3, 2], [1.0, 2, 4], [2.0, 1, 5], n_boot=50)
    with pytest.raises(ValueError) as exc:
        r_difference([1.0, 2, 3], [1.0, 2], [1.0, 2, 3])
    assert str(exc.value) == ("online and both offline series must be 1-d and of one length, got shapes (3,), (2,), "
                              "(3,)")
    with pytest.raises(ValueError, match=r"got shapes \(1, 3\), \(1, 3\), \(1, 3\)$"):
        r_difference([[1.0, 2, 3]], [[1.0, 2, 3]], [[1.0, 2, 3]])


def test_pooled_points_and_differences_by_hand():
    """One row per experiment-day of the policy and reward: each variant's offline value (NaN where it has
    none), the online value; a missing variant gives an empty difference; the options reach r_difference."""
    from offeval_core.analyses.correlation_diff import (
        points_difference,
        pooled_difference,
        pooled_points,
        r_difference,
    )

    rows = []
    keys = [(e, day) for e in ("e1", "e2") for day in (1, 2, 3)]
    online = dict(zip(keys, [1.0, 2, 4, 3, 6, 5], strict=True))
    p_off = dict(zip(keys, [3.0, 1, 4, 1.5, 5, 9], strict=True))
    l_off = dict(zip(keys[:-1], [2.0, 7, 1, 8, 2], strict=True))
    for (e, day), on in online.items():
        rows.append({"experiment_id": e, "day": day, "reward": "like", "policy": "v2", "variant": "P",
                     "online": on, "offline": p_off[e, day]})
        if (e, day) in l_off:
            rows.append({"experiment_id": e, "day": day, "reward": "like", "policy": "v2", "variant": "L",
                         "online": on, "offline": l_off[e, day]})
        rows.append({"experiment_id": e, "day": day, "reward": "click", "policy": "v2", "variant": "P",
                     "online": 0.0, "offline": 0.0})
        rows.append({"experiment_id": e, "day": day, "reward": "like", "policy": "logging", "variant": "P",
                     "online": 0.0, "offline": 0.0})
    daily = pd.DataFrame(rows)
    pts = pooled_points(daily, reward="like", policy="v2")
    index = pd.MultiIndex.from_tuples(list(online), names=["experiment_id", "day"])
    want = pd.DataFrame({"L": [2.0, 7, 1, 8, 2, math.nan], "P": [3.0, 1, 4, 1.5, 5, 9],
                         "online": [1.0, 2, 4, 3, 6, 5]}, index=index)
    pd.testing.assert_frame_equal(pts, want)
    d = pooled_difference(daily, "P", "L", reward="like", policy="v2", method="spearman", n_boot=40, level=0.5,
                          rng=3)
    args = ([1.0, 2, 4, 3, 6], [3.0, 1, 4, 1.5, 5], [2.0, 7, 1, 8, 2])
    ref = r_difference(*args, a="P", b="L", method="spearman", n_boot=40, level=0.5, rng=3)
    assert d == ref and d.n_points == 5
    assert (d.r_a, d.r_b) == (pytest.approx(sps.spearmanr(args[0], args[1]).statistic),
                              pytest.approx(sps.spearmanr(args[0], args[2]).statistic))
    # the resamples and the seed reach the interval (another count or seed moves it)
    for other in ({"n_boot": 1000}, {"rng": 4}):
        moved = r_difference(*args, a="P", b="L", method="spearman", **{"n_boot": 40, "level": 0.5, "rng": 3, **other})
        assert (moved.low, moved.high) != (d.low, d.high)
    # points_difference's own defaults: Pearson, 1000 resamples, LEVEL, seed 0
    direct = points_difference(pts, "P", "L")
    assert direct == r_difference(*args, a="P", b="L") and direct.method == "pearson"
    assert points_difference(pts, "P", "L", method="kendall", n_boot=40, level=0.5, rng=3) == r_difference(
        *args, a="P", b="L", method="kendall", n_boot=40, level=0.5, rng=3)
    g = np.random.default_rng(8)
    many = pd.DataFrame({"online": g.normal(size=30)})
    many["P"], many["L"] = many["online"] + g.normal(size=30), many["online"] + 2 * g.normal(size=30)
    direct = points_difference(many, "P", "L")
    assert direct == r_difference(many["online"], many["P"], many["L"], a="P", b="L", n_boot=1000)
    other = r_difference(many["online"], many["P"], many["L"], a="P", b="L", n_boot=1001)
    assert (direct.low, direct.high) != (other.low, other.high)
    treatment = daily.replace({"policy": {"v2": "treatment"}})
    pd.testing.assert_frame_equal(pooled_points(treatment, reward="like"), pts)     # the default policy
    assert pooled_difference(treatment, "P", "L", reward="like") == pooled_difference(
        daily, "P", "L", reward="like", policy="v2")
    missing = pooled_difference(daily, "P", "X", reward="like", policy="v2", method="kendall", level=0.9)
    assert (missing.a, missing.b, missing.n_points, missing.level, missing.method) == ("P", "X", 0, 0.9, "kendall")
    assert all(math.isnan(v) for v in (missing.r_a, missing.r_b, missing.low, missing.high))
    assert pooled_difference(daily, "X", "P", reward="like", policy="v2").n_points == 0
