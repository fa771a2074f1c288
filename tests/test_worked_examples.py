"""Worked examples from the sources: the textbook DCG examples and KDD'24 Table 1 (Lemma 5.2)."""

import math

import pandas as pd
import pytest

from offeval_core.estimators import dcg, ndcg, pndcg, session_values
from offeval_core.logs import read_logs

FLAT = "exponential:1"  # P(V | R) = 1 everywhere: no de-biasing, labels are the relevance grades


def one_list(grades, *, extra=(), gain="linear"):
    """A single session listing ``grades`` at ranks 1.., plus known-relevant items never shown (``extra``),
    logged after the list so they enter only the ideal ordering."""
    rel = list(grades) + list(extra)
    if gain == "exponential":
        rel = [2**g - 1 for g in rel]
    return read_logs(pd.DataFrame({"session_id": 1, "rank": range(1, len(rel) + 1), "rel": rel}))


@pytest.mark.parametrize(("gain", "dcg6", "idcg6", "ndcg6"), [
    ("linear", 6.861, 8.740, 0.785),
    # 2^rel − 1: 7 + 3/1.585 + 7/2 + 0 + 1/2.585 + 3/2.807 = 13.848; ideal 7,7,7,3,3,3 → 18.438
    ("exponential", 13.848, 18.438, 0.751),
])
def test_textbook_example_with_two_more_known_documents(gain, dcg6, idcg6, ndcg6):
    # DCG of (3, 2, 3, 0, 1, 2); ideal ordering of all known judgments (3, 3, 3, 2, 2, 2, 1, 0) cut to 6
    logs = one_list([3, 2, 3, 0, 1, 2], extra=[3, 2], gain=gain)
    v = session_values(logs, reward="rel", discount="log2@6", exposure=FLAT, clip=1).iloc[0]
    assert round(v["dcg__logging"], 3) == dcg6
    assert round(v["idcg"], 3) == idcg6
    assert round(v["ndcg__logging"], 3) == ndcg6


def test_textbook_example_at_position_five():
    # (3, 2, 3, 0, 1): DCG_5 ≈ 6.15, IDCG_5 ≈ 6.32 (ideal 3, 3, 2, 1, 0), nDCG_5 ≈ 0.97
    logs = one_list([3, 2, 3, 0, 1])
    assert round(dcg(logs, reward="rel", discount="log2@5", exposure=FLAT, clip=1).value, 2) == 6.15
    v = session_values(logs, reward="rel", discount="log2@5", exposure=FLAT, clip=1).iloc[0]
    assert round(v["idcg"], 2) == 6.32
    assert round(ndcg(logs, reward="rel", discount="log2@5", exposure=FLAT, clip=1).value, 2) == 0.97


def table1_logs():
    """KDD'24 Table 1: contexts x1, x2; items a1, a2 with E[Q] = (1, 0) and (1, 2.5); fully observed."""
    return read_logs(pd.DataFrame({
        "session_id": ["x1", "x1", "x2", "x2"],
        "rank": [1, 2, 1, 2],
        "item_id": ["a1", "a2", "a1", "a2"],
        "q": [1.0, 0.0, 1.0, 2.5],
        "rank__R": [1, 2, 1, 2],        # R(x) = a1 on top
        "rank__R_prime": [2, 1, 2, 1],  # R'(x) = a2 on top
    }))


def test_table1_dcg_prefers_r_prime():
    logs = table1_logs()
    top1 = dict(reward="q", discount="log2@1", exposure=FLAT, clip=1)
    assert dcg(logs, policy="R", **top1).value == pytest.approx(1.00)
    assert dcg(logs, policy="R_prime", **top1).value == pytest.approx(1.25)


def test_table1_ndcg_prefers_r_with_a_consistent_cutoff():
    # iDCG cut at rank 1 as well: iDCG(x1) = 1, iDCG(x2) = 2.5 → nDCG(R) = (1 + 0.4)/2, nDCG(R') = (0 + 1)/2
    logs = table1_logs()
    top1 = dict(reward="q", discount="log2@1", exposure=FLAT, clip=1)
    assert ndcg(logs, policy="R", **top1).value == pytest.approx(0.70)
    assert ndcg(logs, policy="R_prime", **top1).value == pytest.approx(0.50)
    # post-normalisation keeps DCG's order (Sec. 5): 1 / 1.75 < 1.25 / 1.75
    assert pndcg(logs, policy="R", **top1).value == pytest.approx(1 / 1.75)
    assert pndcg(logs, policy="R_prime", **top1).value == pytest.approx(1.25 / 1.75)


def test_table1_ndcg_as_printed_with_ideal_summing_all_quality():
    # the table normalises by the sum of all items' quality: iDCG(x1) = 1, iDCG(x2) = 3.5
    logs = table1_logs()
    top1 = session_values(logs, reward="q", policies=["R", "R_prime"], discount="log2@1", exposure=FLAT, clip=1)
    ideal_all = session_values(logs, reward="q", discount="exponential:1", exposure=FLAT, clip=1)["idcg"]
    assert list(ideal_all) == [1.0, 3.5]
    per_session_r = top1["dcg__R"] / ideal_all
    per_session_rp = top1["dcg__R_prime"] / ideal_all
    assert [round(x, 2) for x in per_session_r] == [1.00, 0.29]
    assert [round(x, 2) for x in per_session_rp] == [0.00, 0.71]
    assert round(per_session_r.mean(), 2) == 0.64 and round(per_session_rp.mean(), 2) == 0.36
    # per context both metrics agree (Lemma 5.1); in aggregate they disagree (Lemma 5.2)
    assert (top1["dcg__R"] > top1["dcg__R_prime"]).tolist() == (per_session_r > per_session_rp).tolist()
    assert top1["dcg__R"].mean() < top1["dcg__R_prime"].mean() and per_session_r.mean() > per_session_rp.mean()


def test_clipping_changes_the_label_as_defined():
    # one click at logged rank 3 under exposure 0.5^(r-1): 1/D0 = 4; target puts it at rank 1 (D = 1/r)
    logs = read_logs(pd.DataFrame({"session_id": 1, "rank": [1, 2, 3], "click": [0, 0, 1], "rank__t": [3, 2, 1]}))
    values = {m: dcg(logs, reward="click", policy="t", discount="reciprocal", exposure="exponential:0.5",
                     clip=m).value for m in (1, 2, 3, 4, 8, math.inf)}
    assert values == pytest.approx({1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 8: 4.0, math.inf: 4.0})
