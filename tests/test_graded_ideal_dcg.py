"""The graded iDCG against numpy on a hand example where clipping reorders the labels, with ties.

KDD'24 Eq. 9 with Sec. 6.2 clipping: ℓ_i = c_i · min(m, 1 / D0(r_i)), iDCG_τ = Σ_j ℓ_(j) · D(j) over the
labels of τ sorted descending. The weight is clipped, not the label, so for a graded reward c the order of
the labels changes with m: with D0 = 0.5^(r−1) (w = 1, 2, 4, 8) session A's rewards (3, 0, 1, 1) have
unclipped labels (3, ·, 4, 8), sorted ranks 4, 3, 1; at m = 2 they are (3, ·, 2, 2), sorted rank 1 first
and a tie after it. One sort of the unclipped labels per session (right for a binary reward) would give A
the iDCG 2·D(1) + 2·D(2) + 3·D(3) at m = 2 instead of 3·D(1) + 2·D(2) + 2·D(3).
"""

import math

import numpy as np
import pandas as pd
import pytest

from offeval_core.engine import Grid, reduce
from offeval_core.estimators import aggregate, select
from offeval_core.logs import read_logs

CLIPS = (1, 2, 3, 4, math.inf)
# session: (rewards by logged rank 1..4, the target policy's ranks of those items)
SESSIONS = {
    "A": ((3, 0, 1, 1), (2, 4, 1, 3)),  # reordered at m = 1 and 2 (a tie); every label 3 at m = 3
    "B": ((2, 2, 0, 0), (1, 2, 3, 4)),  # tie at m = 1
    "C": ((0, 0, 5, 0), (4, 3, 2, 1)),  # one rewarded row
    "D": ((0, 0, 0, 0), (1, 2, 3, 4)),  # no reward: iDCG = 0, nDCG counts 0
    "E": ((1, 3, 0, 2), (3, 1, 4, 2)),  # reordered at m = 1 and 2, not at m = 4
    "F": ((2, 1, 1, 2), (4, 3, 2, 1)),  # ties among the unclipped labels (2, 2, 4, 16) and at m = 1
}


def w(rank):  # 1 / D0 with D0 = exponential:0.5 = 0.5^(r−1)
    return 2.0 ** (np.asarray(rank, dtype=float) - 1)


def d(rank):  # D = log2
    return 1.0 / np.log2(np.asarray(rank, dtype=float) + 1)


def numpy_values(m):
    """Per session (A…F): DCG and nDCG of the logging policy and of the target ``a``, and iDCG, at clip m."""
    out = {}
    ranks = np.arange(1, 5)
    for s, (c, target) in SESSIONS.items():
        lab = np.asarray(c, dtype=float) * np.minimum(m, w(ranks))
        ideal = np.sort(lab)[::-1]
        idcg = float((ideal * d(ranks)).sum())
        dcg0, dcga = float((lab * d(ranks)).sum()), float((lab * d(np.asarray(target))).sum())
        out[s] = {"idcg": idcg, "dcg0": dcg0, "dcga": dcga,
                  "ndcg0": dcg0 / idcg if idcg > 0 else 0.0, "ndcga": dcga / idcg if idcg > 0 else 0.0}
    return pd.DataFrame(out).T


def logs_frame():
    rows = []
    for s, (c, target) in SESSIONS.items():
        for r in range(1, 5):
            rows.append({"session_id": s, "rank": r, "watch": float(c[r - 1]), "rank__a": target[r - 1]})
    return pd.DataFrame(rows)


def test_the_example_reorders_and_ties():
    """The example exercises what it is meant to: at m = 2 session A's unclipped order gives another iDCG."""
    lab2 = np.array([3, 0, 1, 1.0]) * np.minimum(2, w(np.arange(1, 5)))
    unclipped_order = np.argsort(-np.array([3, 0, 1, 1.0]) * w(np.arange(1, 5)), kind="stable")
    wrong = float((lab2[unclipped_order] * d(np.arange(1, 5))).sum())
    right = numpy_values(2).loc["A", "idcg"]
    assert right == pytest.approx(3 * d(1) + 2 * d(2) + 2 * d(3), rel=1e-15)
    assert wrong == pytest.approx(2 * d(1) + 2 * d(2) + 3 * d(3), rel=1e-15)
    assert right - wrong == pytest.approx(d(1) - d(3), rel=1e-12)  # 0.5 of a label
    assert np.sum(lab2 == 2.0) == 2  # the tie


@pytest.mark.parametrize("clip", CLIPS)
def test_graded_ndcg_moments_equal_numpy(clip):
    """Every moment of DCG and nDCG of the target and the logging policy, and of iDCG, equals numpy's sums
    over the six sessions (ranking the labels once per session instead of per clip value fails at m = 1, 2)."""
    logs = read_logs(logs_frame())
    grid = Grid(rewards=("watch",), policies=("a",), discounts=("log2",), exposures=("exponential:0.5",),
                clips=CLIPS)
    m = reduce(logs, grid)
    ref = numpy_values(clip)
    assert len(ref) == 6
    kw = dict(reward="watch", discount="log2", exposure="exponential:0.5", clip=clip)
    for metric, own, paired in (("dcg", "dcga", "dcg0"), ("ndcg", "ndcga", "ndcg0")):
        row = aggregate(select(m, policy="a", metric=metric, **kw)).iloc[0]
        x, x0 = ref[own].astype(float), ref[paired].astype(float)
        assert row["n"] == 6
        assert row["sum"] == pytest.approx(x.sum(), rel=1e-12)
        assert row["m2"] == pytest.approx(((x - x.mean()) ** 2).sum(), rel=1e-12)
        assert row["sum_diff"] == pytest.approx((x - x0).sum(), rel=1e-12, abs=1e-12)
        diff = x - x0
        assert row["m2_diff"] == pytest.approx(((diff - diff.mean()) ** 2).sum(), rel=1e-12, abs=1e-12)
        idcg = ref["idcg"].astype(float)
        assert row["den_sum"] == pytest.approx(idcg.sum(), rel=1e-12)
        assert row["den_m2"] == pytest.approx(((idcg - idcg.mean()) ** 2).sum(), rel=1e-12)
        assert row["co_den"] == pytest.approx(((x - x.mean()) * (idcg - idcg.mean())).sum(), rel=1e-12)
        logging = aggregate(select(m, policy=None, metric=metric, **kw)).iloc[0]
        assert logging["sum"] == pytest.approx(x0.sum(), rel=1e-12)

