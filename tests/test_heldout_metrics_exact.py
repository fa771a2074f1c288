"""heldout.metrics by hand: one- and two-user runs whose DCG, nDCG, Recall and ADG are written out, the
users' policies, the evaluation's dictionary, and the dense path."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from offeval_core.heldout.io import qrels_from_frame, run_from_frame
from offeval_core.heldout.metrics import evaluate_run

L3 = math.log2(3)


def _q(rows):
    return qrels_from_frame(pd.DataFrame(rows, columns=["user", "item", "relevance"]))


def _r(rows, name="m"):
    return run_from_frame(pd.DataFrame(rows, columns=["user", "item", "rank"]), name=name)


def test_two_users_by_hand():
    # u: relevance a 3, b 2, c 0; the run ranks b, c, a. v: relevance x 1; the run ranks y, x.
    q = _q([("u", "a", 3), ("u", "b", 2), ("u", "c", 0), ("v", "x", 1)])
    r = _r([("u", "b", 1), ("u", "c", 2), ("u", "a", 3), ("v", "y", 1), ("v", "x", 2)])
    ev = evaluate_run(q, r, ["dcg@2", "ndcg@2", "recall@2", "adg", "dcg"])
    pu = ev.per_user
    assert list(pu.index) == ["u", "v"] and list(pu.columns) == ["dcg@2", "ndcg@2", "recall@2", "adg", "dcg"]
    # u: DCG@2 = 2 + 0 = 2, iDCG@2 = 3 + 2/log2 3; recall@2 = 1/2; ADG = (1/log2 2 + 1/log2 4) / 2 = 3/4;
    # DCG = 2 + 3/log2 4 = 3.5. v: DCG@2 = 1/log2 3 over iDCG@2 = 1; recall@2 = 1; ADG = 1/log2 3
    assert pu.loc["u"].tolist() == pytest.approx([2.0, 2 / (3 + 2 / L3), 0.5, 0.75, 3.5], rel=1e-12)
    assert pu.loc["v"].tolist() == pytest.approx([1 / L3, 1 / L3, 1.0, 1 / L3, 1 / L3], rel=1e-12)


def _world():
    # u: a 3, b 2, c 0 (run: b, c, a); v: x 1 (run: y, x); w1, w2: only non-relevant items; z: relevant, not in the
    # run; y: in the run, not in the qrels
    q = _q([("u", "a", 3), ("u", "b", 2), ("u", "c", 0), ("v", "x", 1), ("w1", "p", 0), ("w2", "p", 0),
            ("z", "k", 2)])
    r = _r([("u", "b", 1), ("u", "c", 2), ("u", "a", 3), ("v", "y", 1), ("v", "x", 2), ("yy", "q", 1)])
    return q, r


def test_resolve_users_under_each_policy():
    from offeval_core.heldout.metrics import (
        REASON_NO_RELEVANT,
        REASON_NOT_IN_QRELS,
        REASON_NOT_IN_RUN,
        resolve_users,
    )

    q, r = _world()
    users, skipped, zero = resolve_users(q, r, missing_in_run="skip", missing_in_qrels="skip")
    assert users == ["u", "v"] and zero == []
    assert list(skipped.items()) == [(REASON_NO_RELEVANT, ["w1", "w2"]), (REASON_NOT_IN_QRELS, ["yy"]),
                                     (REASON_NOT_IN_RUN, ["z"])]
    users, skipped, zero = resolve_users(q, r, missing_in_run="zero", missing_in_qrels="skip")
    assert users == ["u", "v", "z"] and zero == ["z"]
    assert list(skipped) == [REASON_NO_RELEVANT, REASON_NOT_IN_QRELS]
    assert (REASON_NO_RELEVANT, REASON_NOT_IN_QRELS, REASON_NOT_IN_RUN) == (
        "no relevant items in the qrels", "in the run but not in the qrels", "in the qrels but not in the run")
    with pytest.raises(ValueError) as info:
        resolve_users(q, r, missing_in_run="zero")
    assert str(info.value) == ("run 'm': 1 user(s) are in the run but not in the qrels ('yy'); policy "
                               "missing_in_qrels='error' — use 'skip' to evaluate only judged users")
    with pytest.raises(ValueError) as info:
        resolve_users(q, r, missing_in_qrels="skip")
    assert str(info.value) == ("run 'm': 1 user(s) with relevant items in the qrels are not in the run ('z'); policy "
                               "missing_in_run='error' — use 'zero' to score them 0 (as trec_eval -c) or 'skip' to "
                               "leave them out")
    with pytest.raises(ValueError) as info:
        resolve_users(q, r, missing_in_run="drop")
    assert str(info.value) == "missing_in_run must be one of 'error', 'zero', 'skip'; got 'drop'"
    with pytest.raises(ValueError) as info:
        resolve_users(q, r, missing_in_qrels="zero")
    assert str(info.value) == "missing_in_qrels must be one of 'error', 'skip'; got 'zero'"
    # every user judged and ranked: nothing skipped
    users, skipped, zero = resolve_users(_q([("u", "a", 1)]), _r([("u", "a", 1)]))
    assert (users, skipped, zero) == (["u"], {}, [])


def test_evaluation_with_a_zero_filled_user_and_its_dictionary():
    from scipy import stats as sps

    q, r = _world()
    ev = evaluate_run(q, r, ["dcg@2", "recall@2"], missing_in_run="zero", missing_in_qrels="skip", level=0.9)
    assert (ev.run, ev.gain, ev.zero_filled) == ("m", "linear", ["z"])
    # z is scored 0 on every metric
    assert ev.per_user.loc["z"].tolist() == [0.0, 0.0]
    z = sps.norm.ppf(0.95)
    for label, values in (("dcg@2", [2.0, 1 / L3, 0.0]), ("recall@2", [0.5, 1.0, 0.0])):
        x = pd.Series(values)
        e = ev.estimates[label]
        se = x.std(ddof=1) / math.sqrt(3)
        assert (e.value, e.stderr, e.n) == (pytest.approx(x.mean(), rel=1e-12), pytest.approx(se, rel=1e-12), 3)
        assert (e.ci.low, e.ci.high, e.ci.level) == (pytest.approx(x.mean() - z * se, rel=1e-9),
                                                     pytest.approx(x.mean() + z * se, rel=1e-9), 0.9)
    d = ev.to_dict(max_users_listed=1)
    e = ev.estimates["recall@2"]
    assert d == {
        "run": "m", "gain": "linear",
        "metrics": {label: {"mean": est.value, "stderr": est.stderr, "ci": [est.ci.low, est.ci.high], "level": 0.9,
                            "n_users": 3} for label, est in ev.estimates.items()},
        "n_users": 3,
        "zero_filled": {"count": 1, "users": ["z"],
                        "reason": "in the qrels but not in the run; scored 0 (missing_in_run='zero')"},
        "skipped": {"no relevant items in the qrels": {"count": 2, "users": ["w1"]},
                    "in the run but not in the qrels": {"count": 1, "users": ["yy"]}}}
    assert d["metrics"]["recall@2"]["mean"] == pytest.approx(0.5) and e.n == 3
    assert ev.to_dict()["skipped"]["no relevant items in the qrels"]["users"] == ["w1", "w2"]   # 20 by default
    # one user: no standard error, and JSON gets None for it
    one = evaluate_run(_q([("u", "a", 1)]), _r([("u", "a", 1)]), ["adg"])
    assert one.to_dict()["metrics"]["adg"] == {"mean": 1.0, "stderr": None, "ci": [None, None], "level": 0.99,
                                               "n_users": 1}
    assert one.to_dict()["zero_filled"]["count"] == 0 and one.to_dict()["skipped"] == {}


def test_skipped_users_leave_no_user_and_the_message_names_the_reasons():
    q = _q([("w", "p", 0), ("z", "k", 1)])
    with pytest.raises(ValueError) as info:
        evaluate_run(q, _r([("w", "p", 1)]), ["dcg"], missing_in_run="skip")
    assert str(info.value) == ("run 'm': no user left to evaluate (skipped: no relevant items in the qrels, in the "
                               "qrels but not in the run)")


def test_exponential_gain_ideal_cut_and_whole_list_ndcg():
    q = _q([("u", "a", 3), ("u", "b", 2), ("u", "c", 0), ("u", "d", 1)])
    r = _r([("u", "b", 1), ("u", "c", 2), ("u", "a", 3)])          # d is not ranked
    lin = evaluate_run(q, r, ["ndcg@2", "ndcg", "dcg@1", "adg@2", "recall"]).per_user.loc["u"]
    # nDCG@2: DCG 2 over iDCG@2 = 3 + 2/log2 3 (the ideal list cut at 2, not 3 + 2/log2 3 + 1/2);
    # nDCG: (2 + 3/2) / (3 + 2/log2 3 + 1/2); ADG@2: b only: 1/3; recall: b and a of three: 2/3
    assert lin.tolist() == pytest.approx([2 / (3 + 2 / L3), 3.5 / (3.5 + 2 / L3), 2.0, 1 / 3, 2 / 3], rel=1e-12)
    ex = evaluate_run(q, r, ["dcg@2", "ndcg@2"], gain_kind="exponential")
    assert ex.gain == "exponential"
    # gains 2^r − 1: a 7, b 3, d 1: DCG@2 = 3, iDCG@2 = 7 + 3/log2 3
    assert ex.per_user.loc["u"].tolist() == pytest.approx([3.0, 3 / (7 + 3 / L3)], rel=1e-12)


def test_reference_functions_and_cut_offs_by_hand():
    import numpy as np

    from offeval_core.heldout.metrics import (
        MetricSpec,
        dcg_at_k,
        gain,
        ideal_dcg_at_k,
        log2_discount,
        ndcg_at_k,
        parse_metric,
    )

    assert log2_discount([1, 3, 7]).tolist() == [1.0, 0.5, 1 / 3]
    assert gain([0, 1, 2]).tolist() == [0.0, 1.0, 2.0] and gain([2], kind="exponential").tolist() == [3.0]
    assert dcg_at_k([1, 2, 3]) == pytest.approx(1 + 2 / L3 + 1.5, rel=1e-12)
    assert dcg_at_k([1, 2, 3], k=2) == pytest.approx(1 + 2 / L3, rel=1e-12)
    assert dcg_at_k([1, 2, 3], k=np.int64(1)) == 1.0
    assert dcg_at_k([1, 2], gain_kind="exponential") == pytest.approx(1 + 3 / L3, rel=1e-12)
    assert ideal_dcg_at_k([1, 3, 2], k=2) == pytest.approx(3 + 2 / L3, rel=1e-12)
    assert ideal_dcg_at_k([1, 2], gain_kind="exponential") == pytest.approx(3 + 1 / L3, rel=1e-12)
    assert ndcg_at_k([1, 3], [3, 1], k=1) == pytest.approx(1 / 3, rel=1e-12)
    assert ndcg_at_k([2], [2, 1], gain_kind="exponential") == pytest.approx(3 / (3 + 1 / L3), rel=1e-12)
    assert math.isnan(ndcg_at_k([0, 0], [0, 0]))
    for bad, kind, message in [(0, ValueError, "k must be a positive integer (cut-off rank), got 0"),
                               (True, TypeError, "k must be a positive integer, got bool True"),
                               (2.0, TypeError, "k must be a positive integer, got float 2.0")]:
        with pytest.raises(kind) as info:
            dcg_at_k([1], k=bad)
        assert str(info.value) == message
    assert parse_metric(" nDCG @ 10 ") == MetricSpec("ndcg", 10) and parse_metric("Recall") == MetricSpec("recall")
    spec = MetricSpec("adg", 5)
    assert parse_metric(spec) is spec and spec.label == "adg@5" and MetricSpec("dcg").label == "dcg"


def test_dense_path_by_hand():
    import numpy as np

    from offeval_core.heldout.metrics import topn_metrics

    rel = np.array([[3, 0, 2, 0], [0, 0, 0, 0], [0, 1, 0, 0]])
    top = np.array([[2, 1, 0, 3], [0, 1, 2, 3], [0, 3, 2, 1]])
    out = topn_metrics(top, rel, k=2)
    # user 0: ranked (2, 0): DCG 2, iDCG@2 3 + 2/log2 3, recall 1/2, ADG@2 1/2; user 1: nothing relevant: NaN;
    # user 2: ranked (0, 0): 0 everywhere
    assert out["dcg"][[0, 2]].tolist() == [2.0, 0.0]
    assert out["ndcg"][[0, 2]].tolist() == pytest.approx([2 / (3 + 2 / L3), 0.0], rel=1e-12)
    assert out["recall"][[0, 2]].tolist() == [0.5, 0.0] and out["adg"][[0, 2]].tolist() == [0.5, 0.0]
    assert all(math.isnan(out[m][1]) for m in ("dcg", "ndcg", "recall", "adg"))
    ex = topn_metrics(top, rel, k=1, gain_kind="exponential")
    assert ex["dcg"][0] == 3.0 and ex["ndcg"][0] == pytest.approx(3 / 7, rel=1e-12)
    assert ex["recall"][0] == 0.5 and ex["adg"][0] == 0.5
    with pytest.raises(ValueError) as info:
        topn_metrics(top, rel, k=0)
    assert str(info.value) == "k must be a positive integer (cut-off rank), got 0"


def test_per_user_metrics_called_directly_and_the_listing_limit():
    import warnings

    import numpy as np

    from offeval_core.heldout.metrics import gain, ndcg_at_k, parse_metric, per_user_metrics, topn_metrics

    q, r = _world()
    # users in any order, one without relevant items (nDCG undefined: NaN, recall 0 / 0 is NaN too), linear gain
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no 0 / 0 warning for w1
        out = per_user_metrics(q, r, ["v", "w1", "u"], [parse_metric("ndcg@2"), parse_metric("recall@2"),
                                                         parse_metric("adg@2")])
    assert math.isnan(out.loc["w1", "recall@2"]) and math.isnan(out.loc["w1", "adg@2"])
    out = out.drop(columns="adg@2")
    assert out.index.name == "user" and list(out.index) == ["v", "w1", "u"]
    assert out.loc["v"].tolist() == pytest.approx([1 / L3, 1.0], rel=1e-12)
    assert out.loc["u"].tolist() == pytest.approx([2 / (3 + 2 / L3), 0.5], rel=1e-12)
    assert math.isnan(out.loc["w1", "ndcg@2"])
    assert ndcg_at_k([1], [1]) == 1.0 and ndcg_at_k([0.5, 0], [0.5]) == 1.0       # an ideal DCG of 1 or less
    assert gain([1, 2]).dtype == np.float64
    with pytest.raises(ValueError) as info:
        gain([1], kind="log")
    assert str(info.value) == "gain must be one of 'linear', 'exponential'; got 'log'"
    many = _q([(f"w{i:02d}", "p", 0) for i in range(21)] + [("u", "a", 1)])
    d = evaluate_run(many, _r([("u", "a", 1)]), ["dcg"]).to_dict()
    assert d["skipped"]["no relevant items in the qrels"] == {"count": 21, "users": [f"w{i:02d}" for i in range(20)]}
    # the dense path says nothing about a user without relevant items (no 0 / 0 warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = topn_metrics(np.array([[0, 1], [1, 0]]), np.array([[0, 0], [1, 0]]), k=2)
    assert math.isnan(res["recall"][0]) and res["recall"][1] == 1.0 and res["adg"][1] == 1 / L3
