"""KDD'24 App. A as a mechanism: nDCG reorders models that trade users with many relevant items for users with
few (inversions with a CI that excludes 0); a grid of near-identical models is reported as agreeing."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from offeval_core.heldout.io import Qrels, Run
from offeval_core.heldout.mechanism import agreement_mechanism, ideal_dcg_from, toy_zoo

SEEDS = (0, 1, 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_tradeoff_zoo_shows_inversions_with_their_ci_and_the_mechanism(seed):
    d, n, idcg, _ = toy_zoo("tradeoff", rng=seed)
    m = agreement_mechanism(d, n, idcg, n_boot=200, rng=seed)
    assert m.inverted.low > 0.05                      # inversions, and the CI says they are real
    assert m.idcg["cv"] > 0.5                          # heavy and light users: a wide spread of ideal DCG
    assert m.idcg["p90"] > 5 * m.idcg["p10"]
    # inversions sit among the pairs DCG barely separates
    assert m.by_gap["inverted_share"].iloc[0] >= m.by_gap["inverted_share"].iloc[2]
    assert "The metrics disagree" in m.takeaway and f"{m.inverted_share:.1%}".replace("%", " %") in m.takeaway


@pytest.mark.parametrize("seed", SEEDS)
def test_near_identical_grid_is_reported_as_agreeing(seed):
    d, n, idcg, _ = toy_zoo("near-identical", rng=seed)
    m = agreement_mechanism(d, n, idcg, n_boot=200, rng=seed)
    assert m.inverted_share < 0.05 and m.inverted.low == 0
    assert m.kendall_tau > 0.9
    assert "The metrics agree here" in m.takeaway


def test_statistics_match_direct_computation():
    d, n, idcg, _ = toy_zoo("tradeoff", rng=5, n_users=120, n_models=8)
    m = agreement_mechanism(d, n, idcg, n_boot=50, rng=0)
    dm, nm = d.mean(axis=0), n.mean(axis=0)
    assert m.pearson_r == pytest.approx(sps.pearsonr(dm, nm).statistic, rel=1e-12)
    assert m.kendall_tau == pytest.approx(sps.kendalltau(dm, nm).statistic, rel=1e-12)
    i, j = np.triu_indices(8, 1)
    inv = ((dm[i] - dm[j]) * (nm[i] - nm[j]) < 0)
    assert m.inverted_share == pytest.approx(inv.mean())
    assert m.by_gap["n_pairs"].sum() == 28
    assert (m.by_gap["inverted_share"] * m.by_gap["n_pairs"]).sum() == pytest.approx(inv.sum())
    assert m.pearson.low <= m.pearson_r <= m.pearson.high or np.isnan(m.pearson.low)
    # the per-user ideal recovered from DCG / nDCG equals the one given
    np.testing.assert_allclose(ideal_dcg_from(d, n)[d.max(axis=1) > 0], idcg[d.max(axis=1) > 0], rtol=1e-12)


def test_runs_from_files_get_the_same_analysis():
    from offeval_core.heldout.analyses import runs_agreement
    rng = np.random.default_rng(0)
    rows, runs = [], {}
    n_rel = {u: (30 if u < 10 else 1) for u in range(40)}
    for u, nr in n_rel.items():
        for i in range(nr):
            rows.append((f"u{u}", f"i{i}", 1))
    qrels = Qrels(pd.DataFrame(rows, columns=["user", "item", "relevance"]).astype({"relevance": float}))
    for name, (ph, pl) in {"heavy": (0.9, 0.1), "light": (0.2, 0.9), "mid": (0.5, 0.5)}.items():
        rr = []
        for u, nr in n_rel.items():
            items = [f"i{i}" for i in range(nr) if rng.random() < (ph if nr > 1 else pl)] + [f"x{j}" for j in range(5)]
            rr += [(f"u{u}", it, r + 1) for r, it in enumerate(items)]
        frame = pd.DataFrame(rr, columns=["user", "item", "rank"]).assign(score=np.nan)
        runs[name] = Run(name, frame[["user", "item", "score", "rank"]])
    res = runs_agreement(qrels, list(runs.values()), k=10, n_boot=50)
    assert res.mechanism is not None and res.mechanism.n_models == 3
    assert res.mechanism.inverted_share == pytest.approx(res.agreement.inverted_share)
    assert "Per-user ideal DCG spans" in res.mechanism.takeaway


def test_bad_input():
    with pytest.raises(ValueError, match="need at least 3 models and 2 users"):
        agreement_mechanism(np.ones((5, 2)), np.ones((5, 2)))
    with pytest.raises(ValueError, match="kind must be 'tradeoff' or 'near-identical'"):
        toy_zoo("other")


def test_takeaway_wording_follows_the_numbers():
    d, n, idcg, _ = toy_zoo("tradeoff", rng=2)
    m = agreement_mechanism(d, n, idcg, n_boot=100, rng=2)
    shares = m.by_gap["inverted_share"].to_numpy()
    assert ("most often where DCG barely separates" in m.takeaway) == bool(shares[0] > shares[-1])
    assert ("on a small share of pairs" in m.takeaway) == (m.inverted_share < 0.1)


def test_paper_grid_has_the_app_a_notebook_grids():
    from offeval_core.heldout.zoo import model_grid
    g = model_grid(600, grid="paper", n_users=1000)
    assert len(g) == 192
    ease = [v for f, v in g if f == "ease"]
    assert len(ease) == 111 and ease[0] == 500.0 and ease[-1] == 1600.0 and ease[1] == pytest.approx(510.0)
    assert [v for f, v in g if f == "itemknn"] == list(map(float, range(70, 111)))
    assert {f for f, _ in g} == {"ease", "itemknn", "userknn"}


@pytest.mark.slow
def test_near_identical_paper_zoo_reports_a_small_disagreement_among_close_pairs(tmp_path):
    from offeval_core.heldout.analyses import zoo_agreement
    res = zoo_agreement(grid="paper", n_boot=100, cache_dir=tmp_path)
    m = res.mechanism
    assert m.n_models == 192
    assert m.inverted_share < 0.1 and m.kendall_tau > 0.9          # near-identical models: a small disagreement
    shares = m.by_gap["inverted_share"].to_numpy()
    assert shares[0] > 0 and shares[-1] == 0                        # and only among pairs DCG barely separates
    assert "on a small share of pairs" in m.takeaway
