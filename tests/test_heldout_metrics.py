"""DCG / nDCG / Recall / ADG on qrels + runs: worked examples, cross-checks against scikit-learn and ranx,
property tests, and the ADG paper's Theorems 1-2 on simulated missing-data draws."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import dcg_score, ndcg_score

from offeval_core.agreement import agreement
from offeval_core.heldout.io import qrels_from_frame, run_from_frame
from offeval_core.heldout.metrics import (
    dcg_at_k,
    evaluate_run,
    ideal_dcg_at_k,
    ndcg_at_k,
    parse_metric,
    topn_metrics,
)


def _dense_to_tables(rel: np.ndarray, scores: np.ndarray):
    u, i = np.indices(rel.shape)
    q = qrels_from_frame(pd.DataFrame({"user": u.ravel().astype(str), "item": i.ravel().astype(str),
                                       "relevance": rel.ravel()}))
    r = run_from_frame(pd.DataFrame({"user": u.ravel().astype(str), "item": i.ravel().astype(str),
                                     "score": scores.ravel()}), name="m")
    return q, r


def _random_case(seed, n_users=30, n_items=25):
    rng = np.random.default_rng(seed)
    rel = rng.integers(0, 4, size=(n_users, n_items)).astype(float)
    rel[:, 0] = np.maximum(rel[:, 0], 1)  # every user has a relevant item
    scores = rng.random((n_users, n_items))
    return rel, scores


def test_wikipedia_worked_example():
    # dcg_wikipedia.txt "Example": grades 3,2,3,0,1,2 → DCG6 = 6.861; with two more judged docs (3, 2)
    # the ideal order 3,3,3,2,2,2 gives IDCG6 = 8.740 and nDCG6 = 0.785.
    ranked = [3, 2, 3, 0, 1, 2]
    expected_dcg = 3 + 2 / math.log2(3) + 3 / 2 + 0 + 1 / math.log2(6) + 2 / math.log2(7)
    assert dcg_at_k(ranked, k=6) == pytest.approx(expected_dcg)
    assert round(dcg_at_k(ranked, k=6), 3) == 6.861
    assert round(ideal_dcg_at_k([*ranked, 3, 2], k=6), 3) == 8.740
    assert round(ndcg_at_k(ranked, [*ranked, 3, 2], k=6), 3) == 0.785
    # the "Illustrative Example": 3,2,3,0,1 → DCG5 ≈ 6.15, IDCG5 ≈ 6.32, nDCG5 ≈ 0.97
    assert round(dcg_at_k([3, 2, 3, 0, 1], k=5), 2) == 6.15
    assert round(ideal_dcg_at_k([3, 2, 3, 0, 1], k=5), 2) == 6.32


def test_exponential_gain_equals_linear_for_binary_relevance():
    assert dcg_at_k([1, 0, 1], gain_kind="exponential") == dcg_at_k([1, 0, 1], gain_kind="linear")
    assert dcg_at_k([3], gain_kind="exponential") == 7.0


@pytest.mark.parametrize("gain_kind", ["linear", "exponential"])
@pytest.mark.parametrize("k", [1, 5, 10, 25])
def test_against_sklearn(gain_kind, k):
    rel, scores = _random_case(k)
    q, r = _dense_to_tables(rel, scores)
    ev = evaluate_run(q, r, [f"dcg@{k}", f"ndcg@{k}"], gain_kind=gain_kind)
    y_true = rel if gain_kind == "linear" else np.exp2(rel) - 1
    per_user = ev.per_user.loc[[str(u) for u in range(rel.shape[0])]]
    sk_ndcg = [ndcg_score(y_true[u : u + 1], scores[u : u + 1], k=k) for u in range(rel.shape[0])]
    sk_dcg = [dcg_score(y_true[u : u + 1], scores[u : u + 1], k=k) for u in range(rel.shape[0])]
    np.testing.assert_allclose(per_user[f"ndcg@{k}"], sk_ndcg, rtol=1e-12)
    np.testing.assert_allclose(per_user[f"dcg@{k}"], sk_dcg, rtol=1e-12)
    assert ev.estimates[f"ndcg@{k}"].value == pytest.approx(ndcg_score(y_true, scores, k=k))


@pytest.mark.slow
def test_against_ranx():
    from ranx import Qrels, Run, evaluate

    rel, scores = _random_case(7, n_users=20, n_items=15)
    q, r = _dense_to_tables(rel, scores)
    k = 5
    ev_lin = evaluate_run(q, r, [f"dcg@{k}", f"ndcg@{k}", f"recall@{k}"], gain_kind="linear")
    ev_exp = evaluate_run(q, r, [f"dcg@{k}", f"ndcg@{k}"], gain_kind="exponential")
    qd = {str(u): {str(i): int(rel[u, i]) for i in range(rel.shape[1]) if rel[u, i] > 0} for u in range(rel.shape[0])}
    rd = {str(u): {str(i): float(scores[u, i]) for i in range(rel.shape[1])} for u in range(rel.shape[0])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = evaluate(Qrels(qd), Run(rd), [f"dcg@{k}", f"ndcg@{k}", f"recall@{k}", f"dcg_burges@{k}",
                                             f"ndcg_burges@{k}"], return_mean=False)
    order = sorted(qd)  # ranx returns per-query arrays in sorted query-id order
    np.testing.assert_allclose(ev_lin.per_user.loc[order, f"dcg@{k}"], res[f"dcg@{k}"], rtol=1e-9)
    np.testing.assert_allclose(ev_lin.per_user.loc[order, f"ndcg@{k}"], res[f"ndcg@{k}"], rtol=1e-9)
    np.testing.assert_allclose(ev_lin.per_user.loc[order, f"recall@{k}"], res[f"recall@{k}"], rtol=1e-9)
    np.testing.assert_allclose(ev_exp.per_user.loc[order, f"dcg@{k}"], res[f"dcg_burges@{k}"], rtol=1e-9)
    np.testing.assert_allclose(ev_exp.per_user.loc[order, f"ndcg@{k}"], res[f"ndcg_burges@{k}"], rtol=1e-9)


def test_dense_path_matches_table_path():
    rng = np.random.default_rng(3)
    rel = (rng.random((40, 30)) < 0.2).astype(float) * rng.integers(1, 3, size=(40, 30))
    rel[:, 5] = np.maximum(rel[:, 5], 1)
    scores = rng.random((40, 30))
    top = np.argsort(-scores, axis=1)[:, :12]
    dense = topn_metrics(top, rel, k=10, gain_kind="exponential")
    q, r = _dense_to_tables(rel, scores)
    ev = evaluate_run(q, r, ["dcg@10", "ndcg@10", "recall@10", "adg@10"], gain_kind="exponential")
    pu = ev.per_user.loc[[str(u) for u in range(40)]]
    for name in ("dcg", "ndcg", "recall", "adg"):
        np.testing.assert_allclose(pu[f"{name}@10"], dense[name], rtol=1e-12)


def test_recall_and_adg_worked_example():
    # relevant a, c; run order c, b, a: Recall@1 = 1/2; ADG = (1/log2 2 + 1/log2 4) / 2 = (1 + 0.5) / 2
    q = qrels_from_frame(pd.DataFrame({"user": ["u"] * 3, "item": ["a", "b", "c"], "relevance": [1, 0, 2]}))
    r = run_from_frame(pd.DataFrame({"user": ["u"] * 3, "item": ["c", "b", "a"], "rank": [1, 2, 3]}), name="m")
    ev = evaluate_run(q, r, ["recall@1", "adg", "adg@2"])
    assert ev.estimates["recall@1"].value == 0.5
    assert ev.estimates["adg"].value == pytest.approx(0.75)
    assert ev.estimates["adg@2"].value == pytest.approx(0.5)  # a (position 3) is cut


def test_skipped_users_and_policies():
    q = qrels_from_frame(pd.DataFrame({"user": ["u1", "u2", "u3"], "item": ["a", "a", "b"], "relevance": [1, 0, 1]}))
    r = run_from_frame(pd.DataFrame({"user": ["u1", "u4"], "item": ["a", "a"], "score": [1.0, 1.0]}), name="m")
    ev = evaluate_run(q, r, ["ndcg@5"], missing_in_run="zero", missing_in_qrels="skip")
    assert ev.per_user.index.tolist() == ["u1", "u3"]
    assert ev.per_user["ndcg@5"].tolist() == [1.0, 0.0]
    assert ev.zero_filled == ["u3"]
    assert ev.skipped == {"no relevant items in the qrels": ["u2"], "in the run but not in the qrels": ["u4"]}
    ev2 = evaluate_run(q, r, ["ndcg@5"], missing_in_run="skip", missing_in_qrels="skip")
    assert ev2.per_user.index.tolist() == ["u1"]
    assert ev2.skipped["in the qrels but not in the run"] == ["u3"]
    d = ev.to_dict()
    assert d["metrics"]["ndcg@5"]["n_users"] == 2 and d["metrics"]["ndcg@5"]["mean"] == 0.5


def test_lemma_5_2_table_1_with_metric_code():
    # KDD'24 Table 1: labels x1: (a1 = 1, a2 = 0), x2: (a1 = 1, a2 = 2.5); R shows a1 on top, R' shows a2.
    # DCG@1 over X: R = 1.0, R' = 1.25 → R' better; nDCG@1 (iDCG truncated at 1): R = (1 + 0.4)/2 = 0.7,
    # R' = (0 + 1)/2 = 0.5 → R better: the aggregate order is inverted although each sample agrees.
    q = qrels_from_frame(pd.DataFrame({"user": ["x1", "x1", "x2", "x2"], "item": ["a1", "a2", "a1", "a2"],
                                       "relevance": [1.0, 0.0, 1.0, 2.5]}))
    runs = {
        "R": run_from_frame(pd.DataFrame({"user": ["x1", "x1", "x2", "x2"], "item": ["a1", "a2", "a1", "a2"],
                                          "rank": [1, 2, 1, 2]}), name="R"),
        "R'": run_from_frame(pd.DataFrame({"user": ["x1", "x1", "x2", "x2"], "item": ["a1", "a2", "a1", "a2"],
                                           "rank": [2, 1, 2, 1]}), name="R'"),
    }
    evs = {n: evaluate_run(q, r, ["dcg@1", "ndcg@1"]) for n, r in runs.items()}
    dcg = [evs[n].estimates["dcg@1"].value for n in ("R", "R'")]
    ndcg = [evs[n].estimates["ndcg@1"].value for n in ("R", "R'")]
    assert dcg == [1.0, 1.25]
    assert ndcg == pytest.approx([0.7, 0.5])
    a = agreement(dcg, ndcg, names=["R", "R'"])
    assert a.inverted_pairs == (("R'", "R"),) and a.inverted_share == 1.0


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=12), st.integers(1, 15), st.randoms(use_true_random=False))
def test_ndcg_bounds_and_ideal_run(rels, k, rnd):
    rels = [*rels, 1]  # at least one relevant item
    items = [f"i{j:02d}" for j in range(len(rels))]
    q = qrels_from_frame(pd.DataFrame({"user": "u", "item": items, "relevance": rels}))
    perm = list(range(len(rels)))
    rnd.shuffle(perm)
    any_run = run_from_frame(pd.DataFrame({"user": "u", "item": [items[j] for j in perm],
                                           "rank": range(1, len(rels) + 1)}), name="any")
    ideal_order = sorted(range(len(rels)), key=lambda j: -rels[j])
    ideal_run = run_from_frame(pd.DataFrame({"user": "u", "item": [items[j] for j in ideal_order],
                                             "rank": range(1, len(rels) + 1)}), name="ideal")
    for gk in ("linear", "exponential"):
        v = evaluate_run(q, any_run, [f"ndcg@{k}", f"recall@{k}", "adg"], gain_kind=gk).per_user.iloc[0]
        assert 0.0 <= v[f"ndcg@{k}"] <= 1.0 + 1e-12
        assert 0.0 <= v[f"recall@{k}"] <= 1.0 and 0.0 <= v["adg"] <= 1.0
        assert evaluate_run(q, ideal_run, [f"ndcg@{k}"], gain_kind=gk).per_user.iloc[0, 0] == pytest.approx(1.0)


def _missing_data_users(n_items, relevant, m, subsets):
    """One 'user' per observed subset O+ (size m) of the complete relevant set P+, all with the same full
    ranking (item j at position j + 1)."""
    users, items = [], []
    for s, sub in enumerate(subsets):
        users += [f"d{s:05d}"] * m
        items += [f"i{j:03d}" for j in sub]
    q = qrels_from_frame(pd.DataFrame({"user": users, "item": items, "relevance": 1.0}))
    uu = np.repeat([f"d{s:05d}" for s in range(len(subsets))], n_items)
    ii = np.tile([f"i{j:03d}" for j in range(n_items)], len(subsets))
    rr = np.tile(np.arange(1, n_items + 1), len(subsets))
    r = run_from_frame(pd.DataFrame({"user": uu, "item": ii, "rank": rr}), name="full")
    return evaluate_run(q, r, ["adg", "ndcg"])


def test_adg_theorems_exact_enumeration():
    # ADG paper Thm 1: E[ADG_obs] = ADG_comp; Thm 2: E[nDCG_obs] = |O| IDCG(|P|) / (|P| IDCG(|O|)) nDCG_comp,
    # exactly, when O+ is a simple random sample of fixed size from P+ (all 495 subsets of 4 out of 12).
    n_items, m = 30, 4
    relevant = [0, 2, 3, 7, 9, 11, 14, 18, 21, 25, 27, 29]
    ev_comp = _missing_data_users(n_items, relevant, len(relevant), [relevant])
    adg_comp = ev_comp.estimates["adg"].value
    ndcg_comp = ev_comp.estimates["ndcg"].value
    subsets = list(itertools.combinations(relevant, m))
    ev = _missing_data_users(n_items, relevant, m, subsets)
    idcg = lambda n: sum(1 / math.log2(j + 1) for j in range(1, n + 1))  # noqa: E731
    factor = m * idcg(len(relevant)) / (len(relevant) * idcg(m))
    assert ev.estimates["adg"].value == pytest.approx(adg_comp, rel=1e-12)
    assert ev.estimates["ndcg"].value == pytest.approx(factor * ndcg_comp, rel=1e-12)
    assert factor < 0.7  # the bias is large: nDCG_obs understates nDCG_comp by a third


def test_adg_theorems_random_draws():
    rng = np.random.default_rng(11)
    n_items, m = 40, 5
    relevant = sorted(rng.choice(n_items, size=15, replace=False).tolist())
    ev_comp = _missing_data_users(n_items, relevant, len(relevant), [relevant])
    subsets = [sorted(rng.choice(relevant, size=m, replace=False).tolist()) for _ in range(2000)]
    ev = _missing_data_users(n_items, relevant, m, subsets)
    idcg = lambda n: sum(1 / math.log2(j + 1) for j in range(1, n + 1))  # noqa: E731
    factor = m * idcg(len(relevant)) / (len(relevant) * idcg(m))
    adg, ndcg = ev.estimates["adg"], ev.estimates["ndcg"]
    assert abs(adg.value - ev_comp.estimates["adg"].value) < 4 * adg.stderr
    assert abs(ndcg.value - factor * ev_comp.estimates["ndcg"].value) < 4 * ndcg.stderr
    assert abs(ndcg.value - ev_comp.estimates["ndcg"].value) > 20 * ndcg.stderr  # biased for nDCG_comp


def test_parse_metric_errors():
    assert parse_metric("ADG") == parse_metric("adg")
    assert parse_metric("recall@20").label == "recall@20"
    with pytest.raises(ValueError, match=r"^metric must be one of ndcg@K, dcg@K, recall@K, adg or adg@K \(K a "
                                         r"positive integer\); got 'map@10'$"):
        parse_metric("map@10")
    with pytest.raises(ValueError, match=r"^metric cut-off must be ≥ 1, got 'ndcg@0'$"):
        parse_metric("ndcg@0")
    q = qrels_from_frame(pd.DataFrame({"user": ["u"], "item": ["a"], "relevance": [1]}))
    r = run_from_frame(pd.DataFrame({"user": ["u"], "item": ["a"], "score": [1.0]}), name="m")
    with pytest.raises(ValueError, match=r"^gain must be one of 'linear', 'exponential'; got 'log'$"):
        evaluate_run(q, r, ["ndcg@1"], gain_kind="log")
    with pytest.raises(ValueError, match=r"^metrics must name at least one metric"):
        evaluate_run(q, r, [])


def test_missing_users_are_named_in_the_error():
    # seven run-only users: the message counts them and names the first five, then "…"
    q = qrels_from_frame(pd.DataFrame({"user": ["u0"], "item": ["a"], "relevance": [1]}))
    users = ["u0"] + [f"x{i}" for i in range(7)]
    r = run_from_frame(pd.DataFrame({"user": users, "item": "a", "score": 1.0}), name="m")
    with pytest.raises(ValueError, match=r"run 'm': 7 user\(s\) are in the run but not in the qrels "
                                         r"\('x0', 'x1', 'x2', 'x3', 'x4', …\); policy missing_in_qrels='error'"):
        evaluate_run(q, r, ["ndcg@5"])
    # five users exactly: all named, no "…"
    r5 = run_from_frame(pd.DataFrame({"user": users[:6], "item": "a", "score": 1.0}), name="m")
    with pytest.raises(ValueError, match=r"\('x0', 'x1', 'x2', 'x3', 'x4'\); policy"):
        evaluate_run(q, r5, ["ndcg@5"])
    # a judged user the run misses
    q2 = qrels_from_frame(pd.DataFrame({"user": ["u0", "u9"], "item": ["a", "a"], "relevance": [1, 1]}))
    with pytest.raises(ValueError, match=r"1 user\(s\) with relevant items in the qrels are not in the run \('u9'\)"):
        evaluate_run(q2, run_from_frame(pd.DataFrame({"user": ["u0"], "item": "a", "score": 1.0}), name="m"),
                     ["ndcg@5"])
