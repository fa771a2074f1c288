"""Simulated world, model zoo, App. A reproduction, estimator lab, charts and the ``heldout`` command."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pytest

from offeval_core.commands import heldout as heldout_cmd
from offeval_core.heldout import charts
from offeval_core.heldout.analyses import agreement_over_zoo, estimator_lab, runs_agreement
from offeval_core.heldout.io import qrels_from_frame, run_from_frame
from offeval_core.heldout.metrics import evaluate_run
from offeval_core.heldout.world import Split, simulate_world, split_world
from offeval_core.heldout.zoo import model_grid, train_zoo


@pytest.fixture(scope="module")
def small():
    split = split_world(simulate_world(n_users=150, n_items=80, seed=4), train_frac=0.5, n_mcar=10, seed=1)
    return split, train_zoo(split, grid="small", depth=30)


def test_default_grid_has_192_models_of_six_families():
    specs = model_grid(600, n_users=1000)
    fams = pd.Series([f for f, _ in specs]).value_counts().to_dict()
    assert len(specs) == 192  # as many models as KDD'24 App. A
    assert set(fams) == {"pop", "ease", "itemknn", "userknn", "puresvd", "rp3beta"} and fams["pop"] == 1
    assert len(set(specs)) == len(specs)  # no model twice
    ks = [v for f, v in specs if f == "userknn"]
    assert min(ks) >= 1 and max(ks) == 999  # k bounded by the other users
    assert len(model_grid(80, grid="small", n_users=150)) == 25


def test_world_split_and_propensities():
    w = simulate_world(n_users=300, n_items=60, seed=2)
    s = split_world(w, train_frac=0.3, n_mcar=8, seed=5)
    assert not (s.train & s.test).any() and ((s.train | s.test) == w.observed).all()
    assert not np.take_along_axis(s.train, s.mcar_items, axis=1).any()  # MCAR items are never train items
    p = w.propensity
    np.testing.assert_allclose(s.test_propensity, p * 0.7 / (1 - 0.3 * p))
    # the observation rate of relevant pairs matches the true propensity (simulator ground truth)
    rel = w.relevant
    assert w.observed[rel].mean() == pytest.approx(p[rel].mean(), abs=0.02)


@pytest.fixture(scope="module")
def world():
    return simulate_world(seed=3)


def test_world_activity_is_heavy_tailed_and_calibrated(world):
    rel = world.relevant
    n_obs = world.observed.sum(axis=1)
    expected = (rel * world.propensity).sum(axis=1)  # E[n_u] given the relevance: Σ_i Y_ui P_ui
    # e_u is solved so that E[n_u] = t_u ≥ min_interactions (10) up to users who like fewer items than t_u
    assert np.quantile(expected, 0.01) >= 9.0
    # the realised counts scatter around their expectation like a sum of Bernoullis (Poisson-binomial)
    var = (rel * world.propensity * (1 - world.propensity)).sum(axis=1)
    z = (n_obs - expected) / np.sqrt(np.maximum(var, 1e-9))
    assert abs(z.mean()) < 4 / np.sqrt(z.size) and 0.8 < z.std() < 1.2
    # heavy tail: log-normal activity with σ = 1.2 above a floor of 10 (MovieLens-1M: 20 to > 2000 ratings)
    q10, q50, q90, q99 = np.quantile(n_obs, [0.1, 0.5, 0.9, 0.99])
    assert q50 == pytest.approx(40, rel=0.2)  # median_interactions
    assert q90 / q10 > 6 and q99 / q50 > 6 and n_obs.mean() > 1.3 * q50


def test_world_light_users_are_mainstream(world):
    """Light users like high-exposure items more than heavy users do and, being shown fewer items, observe
    even more popular ones: the user-dependent model quality behind the DCG / nDCG disagreement."""
    n_obs = world.observed.sum(axis=1)
    light, heavy = n_obs <= np.quantile(n_obs, 0.25), n_obs >= np.quantile(n_obs, 0.75)
    log_p = np.log(world.exposure)
    liked = (world.relevant * log_p).sum(axis=1) / world.relevant.sum(axis=1)
    seen = (world.observed * log_p).sum(axis=1) / np.maximum(n_obs, 1)
    assert liked[light].mean() > liked[heavy].mean() + 0.3
    assert seen[light].mean() > liked[light].mean() + 0.3  # MNAR: exposure skews observations to popular items
    assert seen[light].mean() > seen[heavy].mean() + 0.5


def test_zoo_models_are_correct(small):
    split, zoo = small
    x = split.train.astype(float)
    # top lists never contain train items and are distinct per user
    for m in range(zoo.n_models):
        top = zoo.top_items[m].astype(int)
        assert not np.take_along_axis(split.train, top, axis=1).any()
        assert all(len(set(row)) == top.shape[1] for row in top[:20])
    # EASE against the textbook closed form with an explicit inverse
    m = zoo.families.index("ease")
    lam = zoo.params[m]
    p = np.linalg.inv(x.T @ x + lam * np.eye(x.shape[1]))
    b = -p / np.diag(p)[None, :]
    np.fill_diagonal(b, 0.0)
    scores = np.where(split.train, -np.inf, np.round(x @ b, 6))  # the documented rounding before ranking
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :30]
    agree = (expected == zoo.top_items[m]).mean()
    assert agree > 0.99  # float32 scoring may swap near-ties
    # popularity ranks by train counts with ties broken by item index
    counts = x.sum(axis=0)
    u = 0
    cand = [i for i in range(x.shape[1]) if not split.train[u, i]]
    expected_pop = sorted(cand, key=lambda i: (-counts[i], i))[:30]
    assert zoo.top_items[zoo.names.index("pop"), u].tolist() == expected_pop


def test_zoo_neighbourhood_and_walk_models(small):
    split, zoo = small
    x = split.train.astype(float)

    def expected_top(scores):
        s = np.where(split.train, -np.inf, np.round(scores, 6))
        return np.argsort(-s, axis=1, kind="stable")[:, :30]

    # user-kNN: cosine between users, each user keeps its k most similar other users, scores Σ_v s_uv x_v
    m = zoo.families.index("userknn")
    k = int(zoo.params[m])
    nu = np.sqrt(x.sum(axis=1))
    sim = (x @ x.T) / np.outer(nu, nu)
    np.fill_diagonal(sim, 0.0)
    s_k = np.zeros_like(sim)
    for u in range(sim.shape[0]):
        nb = sorted(range(sim.shape[0]), key=lambda v: (-sim[u, v], v))[:k]
        s_k[u, nb] = sim[u, nb]
    assert (expected_top(s_k @ x) == zoo.top_items[m]).mean() > 0.99
    # RP3β: W_ij = Σ_v x_vi x_vj / (|i| |v|) / pop_j^β (zero diagonal), scores X W
    for m in [i for i, f in enumerate(zoo.families) if f == "rp3beta"]:
        beta = zoo.params[m]
        pop, act = x.sum(axis=0), x.sum(axis=1)
        w = np.zeros((x.shape[1], x.shape[1]))
        for v in range(x.shape[0]):
            if act[v]:
                w += np.outer(x[v] / np.maximum(pop, 1), x[v] / act[v])
        w /= np.maximum(pop, 1) ** beta
        np.fill_diagonal(w, 0.0)
        assert (expected_top(x @ w) == zoo.top_items[m]).mean() > 0.99


def test_equal_heldout_counts_make_dcg_and_ndcg_agree(small):
    """KDD'24 App. A: the discrepancy "would not occur if we would sample the exact same number of held-out
    items for every user" — then iDCG is the same constant for every user and nDCG = DCG / iDCG."""
    split, zoo = small
    rng = np.random.default_rng(0)
    test = np.zeros_like(split.test)
    for u in np.flatnonzero(split.test.sum(axis=1) >= 2):
        test[u, rng.choice(np.flatnonzero(split.test[u]), 2, replace=False)] = True
    equal = Split(split.world, split.train, test, split.train_frac, split.mcar_items, split.seed)
    res = agreement_over_zoo(equal, zoo, k=20, n_boot=20)
    np.testing.assert_allclose(res.ndcg, res.dcg / (1 + 1 / np.log2(3)), rtol=1e-12)
    assert res.agreement.n_inverted == 0 and res.agreement.pearson_r == pytest.approx(1.0)
    # with the real, unequal held-out counts nDCG does invert some pairs of the same models
    assert agreement_over_zoo(split, zoo, k=20, n_boot=20).agreement.n_inverted > 0


def test_zoo_agreement_matches_table_path(small):
    split, zoo = small
    res = agreement_over_zoo(split, zoo, k=20, n_boot=50)
    assert res.agreement.n == zoo.n_models and res.inverted_ci.low <= res.inverted_ci.high
    # recompute three models through the qrels/run (pandas) path
    tu, ti = np.nonzero(split.test)
    q = qrels_from_frame(pd.DataFrame({"user": tu.astype(str), "item": ti.astype(str), "relevance": 1.0}))
    for m in (0, 5, zoo.n_models - 1):
        top = zoo.top_items[m].astype(int)
        users = np.repeat(np.arange(top.shape[0]), top.shape[1])
        run = run_from_frame(pd.DataFrame({"user": users.astype(str), "item": top.ravel().astype(str),
                                           "rank": np.tile(np.arange(1, top.shape[1] + 1), top.shape[0])}),
                             name=zoo.names[m])
        ev = evaluate_run(q, run, ["dcg@20", "ndcg@20"], missing_in_qrels="skip")
        assert ev.estimates["dcg@20"].value == pytest.approx(res.dcg[m], rel=1e-12)
        assert ev.estimates["ndcg@20"].value == pytest.approx(res.ndcg[m], rel=1e-12)
        assert ev.estimates["ndcg@20"].n == res.n_users
    assert set(res.comparison()["statistic"]) >= {"Pearson r", "Kendall τ", "share of inverted pairs"}


def test_runs_agreement_on_uploaded_runs():
    q = qrels_from_frame(pd.DataFrame({"user": ["x1", "x1", "x2", "x2"], "item": ["a1", "a2", "a1", "a2"],
                                       "relevance": [1.0, 0.0, 1.0, 2.5]}))
    mk = lambda name, r1, r2: run_from_frame(pd.DataFrame(  # noqa: E731
        {"user": ["x1", "x1", "x2", "x2"], "item": ["a1", "a2", "a1", "a2"], "rank": [r1, r2, r1, r2]}), name=name)
    res = runs_agreement(q, [mk("R", 1, 2), mk("R'", 2, 1)], k=1, n_boot=20)
    assert res.agreement.inverted_pairs == (("R'", "R"),)
    with pytest.raises(ValueError, match=r"^runs_agreement needs at least 2 runs, got 1$"):
        runs_agreement(q, [mk("R", 1, 2)], k=1)


@pytest.fixture(scope="module")
def lab():
    return estimator_lab(seeds=(0, 1), ks=(5, 20), strata_k=20, strata_grid=(1, 3, 80), grid="small",
                         n_users=150, n_items=80, n_mcar=10, propensity="true")


def test_estimator_lab_identities(lab):
    tau = lab.tau.set_index(["seed", "k", "estimator"])["kendall_tau"]
    strata = lab.tau_strata.set_index(["seed", "n_strata"])["kendall_tau"]
    for sd in (0, 1):
        # GS with one stratum (self-normalised) is Naive; with one stratum per item it is SNIPS (Prop. 4.1)
        assert strata[(sd, 1)] == pytest.approx(tau[(sd, 20, "naive")])
        assert strata[(sd, 80)] == pytest.approx(tau[(sd, 20, "snips")])
    assert set(lab.summary["estimator"]) == {"naive", "snips", "gs", "ips"}
    n_models = lab.params["n_models"]
    assert len(lab.estimates) == 2 * 2 * 4 * n_models
    # Recall@K grows with K for every model, for the truth as for every estimate
    e = lab.estimates.pivot_table(index=["seed", "model", "estimator"], columns="k", values=["estimate", "truth_mcar"])
    assert (e[("estimate", 20)] >= e[("estimate", 5)]).all() and (e[("truth_mcar", 20)] >= e[("truth_mcar", 5)]).all()
    b = lab.bounds.groupby("estimator")["bias"].mean()
    assert b["ips"] == pytest.approx(0.0, abs=1e-12)  # true propensities: IPS has no bias term


def test_charts(lab, small):
    split, zoo = small
    res = agreement_over_zoo(split, zoo, k=20, n_boot=20)
    q = qrels_from_frame(pd.DataFrame({"user": ["u"], "item": ["a"], "relevance": [1]}))
    ev = evaluate_run(q, run_from_frame(pd.DataFrame({"user": ["u"], "item": ["a"], "rank": [1]}), name="m"),
                      ["ndcg@5"])
    figs = [charts.agreement_scatter(res), charts.heldout_metrics_chart([ev], "ndcg@5"), charts.lab_tau_chart(lab),
            charts.tau_vs_strata_chart(lab), charts.lab_bias_chart(lab), charts.lab_estimates_chart(lab, k=5)]
    for fig in figs:
        assert fig.layout.title.text and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
    assert sum(len(t.x) for t in figs[0].data if t.mode == "markers") == zoo.n_models
    with pytest.raises(ValueError, match=r"^k must be one of the lab's cut-offs \[5, 20\], got 7$"):
        charts.lab_estimates_chart(lab, k=7)


def test_lab_charts_share_order_and_colours(lab):
    labels = ["Naive", "SNIPS", "GS", "IPS (true P, n_u)"]
    tau, bias, est = charts.lab_tau_chart(lab), charts.lab_bias_chart(lab), charts.lab_estimates_chart(lab, k=20)
    colour = {}
    for fig in (tau, bias, est):
        traces = [t for t in fig.data if t.name != "y = x"]
        # the summary table is sorted alphabetically (gs, ips, naive, snips): the charts must not follow it
        assert [t.name for t in traces] == labels
        for t in traces:
            assert colour.setdefault(t.name, t.marker.color) == t.marker.color  # same colour in every chart
    assert len(set(colour.values())) == 4 and None not in colour.values()
    assert all(t.line.color == colour[t.name] for t in tau.data)  # box outlines too
    # bar heights belong to the estimator they are labelled with: recompute mean bias from the raw estimates
    e = lab.estimates.assign(err=lab.estimates["estimate"] - lab.estimates["truth_mcar"])
    per_model = e.groupby(["estimator", "k", "model"])["err"].mean().groupby(["estimator", "k"]).mean()
    for t, name in zip(bias.data, ["naive", "snips", "gs", "ips"], strict=True):
        assert list(t.x) == ["@5", "@20"]
        np.testing.assert_allclose(t.y, [per_model[(name, 5)], per_model[(name, 20)]], rtol=1e-12)
    # the diagonal: grey, dotted, from the smallest to the largest plotted value
    diag = est.data[-1]
    assert diag.name == "y = x" and diag.line.color == charts.REFERENCE_COLOR and diag.line.dash == "dot"
    assert charts.REFERENCE_COLOR not in colour.values()
    pts = np.concatenate([np.r_[t.x, t.y] for t in est.data[:-1]])
    assert list(diag.x) == list(diag.y) == pytest.approx([pts.min(), pts.max()])

    strata = charts.tau_vs_strata_chart(lab)
    assert strata.layout.xaxis.type == "category"  # 1, 3, 80 strata evenly spaced, not on a linear axis
    assert list(strata.layout.xaxis.categoryarray) == ["1", "3", "80"]
    (box,) = strata.data
    assert box.name == "GS" and box.marker.color == colour["GS"]
    assert sorted(box.x) == sorted(["1", "3", "80"] * 2)  # two seeds


def test_agreement_title_wraps_when_long(small):
    split, zoo = small
    res = agreement_over_zoo(split, zoo, k=20, n_boot=20)
    title = charts.agreement_scatter(res).layout.title.text
    head, tail = title.split("<br>")
    assert head == f"DCG@20 vs nDCG@20 over {zoo.n_models} {res.source}"
    assert tail.startswith(f"Pearson r = {res.agreement.pearson_r:.2f}, Kendall τ = ")
    assert len(head) + len(tail) + 3 > charts.TITLE_WRAP  # it is long, hence the wrap
    assert charts._wrap_title("short", "title") == "short — title"


def _cli(argv):
    parser = argparse.ArgumentParser(prog="offeval")
    sub = parser.add_subparsers(dest="command", required=True)
    heldout_cmd.register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_json(tmp_path, capsys):
    (tmp_path / "q.txt").write_text("u1 0 a 3\nu1 0 b 2\nu2 0 c 1\nu3 0 d 0\n")
    (tmp_path / "r1.txt").write_text("u1 Q0 b 1 2.0 m1\nu1 Q0 a 2 1.0 m1\nu2 Q0 c 1 1.0 m1\n")
    (tmp_path / "r2.txt").write_text("u1 Q0 a 1 2.0 m2\nu2 Q0 x 1 1.0 m2\nu2 Q0 c 2 0.5 m2\n")
    status = _cli(["heldout", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r1.txt"), "--run",
                   str(tmp_path / "r2.txt"), "--metric", "ndcg@2", "--metric", "recall@1", "--json"])
    assert status == 0
    out = json.loads(capsys.readouterr().out)
    m1, m2 = out["runs"]
    # m1: u1 nDCG@2 = (2 + 3/log2 3) / (3 + 2/log2 3), u2 = 1 → mean; m2: u1 = 3 / (3 + 2/log2 3), u2 = 1/log2 3
    l3 = np.log2(3)
    u1 = (2 + 3 / l3) / (3 + 2 / l3)
    assert m1["metrics"]["ndcg@2"]["mean"] == pytest.approx((u1 + 1) / 2)
    assert m1["metrics"]["ndcg@2"]["stderr"] == pytest.approx(abs(1 - u1) / 2)
    assert m2["metrics"]["ndcg@2"]["mean"] == pytest.approx((3 / (3 + 2 / l3) + 1 / l3) / 2)
    assert m2["metrics"]["recall@1"]["mean"] == pytest.approx(0.25)  # u1: 1 of 2, u2: 0 of 1
    assert m1["n_users"] == 2
    assert m1["skipped"] == {"no relevant items in the qrels": {"count": 1, "users": ["u3"]}}


def test_cli_errors(tmp_path):
    (tmp_path / "q.txt").write_text("u1 0 a 1\n")
    (tmp_path / "r.txt").write_text("u1 Q0 a 1 1 m\nu2 Q0 a 1 1 m\n")
    with pytest.raises(ValueError, match=r"^run 'm': 1 user\(s\) are in the run but not in the qrels \('u2'\)"):
        _cli(["heldout", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt")])
    assert _cli(["heldout", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt"),
                 "--missing-in-qrels", "skip"]) == 0
    with pytest.raises(ValueError, match=r"^run names must be unique across --run files; repeated: m$"):
        _cli(["heldout", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt"), "--run",
              str(tmp_path / "r.txt"), "--missing-in-qrels", "skip"])
    with pytest.raises(ValueError, match=r"^metric must be one of"):
        _cli(["heldout", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt"), "--metric", "p@5"])


def test_lab_takeaway_states_tau_bias_and_the_gs_verdict_from_the_summary(lab):
    import dataclasses

    from offeval_core.heldout.analyses import lab_takeaway
    text = lab_takeaway(lab)
    at = lab.summary[lab.summary["k"] == 20].set_index("estimator")
    for e, name in (("naive", "Naive"), ("snips", "SNIPS"), ("gs", "GS"), ("ips", "IPS")):
        assert f"{name} {at.loc[e, 'tau_mean']:.2f}" in text
        assert f"{name} {at.loc[e, 'mean_abs_bias']:.3f}" in text
    holds = at.loc["gs", "tau_mean"] > at.loc["snips", "tau_mean"] and \
        at.loc["gs", "mean_abs_bias"] < at.loc["snips", "mean_abs_bias"]
    assert ("finding holds here" in text) == holds
    # flip the comparison: a summary where SNIPS wins on both counts says plainly that the finding fails
    summ = lab.summary.copy()
    gs, sn = (summ["estimator"] == "gs") & (summ["k"] == 20), (summ["estimator"] == "snips") & (summ["k"] == 20)
    summ.loc[gs, ["tau_mean", "mean_abs_bias"]], summ.loc[sn, ["tau_mean", "mean_abs_bias"]] = (0.1, 0.5), (0.9, 0.01)
    assert "finding does not hold here" in lab_takeaway(dataclasses.replace(lab, summary=summ))


def test_lab_bias_takeaway_names_the_least_biased_estimator_from_the_summary(lab):
    import dataclasses

    from offeval_core.heldout.analyses import lab_bias_takeaway
    at = lab.summary[lab.summary["k"] == 20].sort_values("mean_abs_bias")
    text = lab_bias_takeaway(lab)
    names = {"naive": "Naive", "snips": "SNIPS", "gs": "GS", "ips": "IPS"}
    best = at["estimator"].iloc[0]
    assert text.startswith(f"At K = 20, averaged over {len(lab.params['seeds'])} seeds, {names[best]} is the least biased")
    listed = ", ".join(f"{names[e]} {b:.3f}" for e, b in zip(at["estimator"], at["mean_abs_bias"], strict=True))
    assert listed in text  # every estimator, smallest |bias| first
    if best != "naive":
        ratio = at.set_index("estimator").loc["naive", "mean_abs_bias"] / at["mean_abs_bias"].iloc[0]
        assert f"{ratio:.3g}× less than the naive estimate" in text
    # a summary where the naive estimate is the least biased names it and claims no ratio
    summ = lab.summary.copy()
    summ.loc[(summ["estimator"] == "naive") & (summ["k"] == 20), "mean_abs_bias"] = 0.0
    flipped = lab_bias_takeaway(dataclasses.replace(lab, summary=summ))
    assert "Naive is the least biased: mean |bias| vs the MCAR truth Naive 0.000" in flipped
    assert "less than the naive" not in flipped
