"""One definition each of the no-positive-label nDCG rule (``engine.grid.ndcg_of``) and the offline-arm rule
(``arms.offline_rows``), used by every caller."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from offeval_core.diagnose import check_support
from offeval_core.engine import Grid, reduce
from offeval_core.engine.grid import ndcg_of
from offeval_core.estimators import aggregate, select, session_values
from offeval_core.logs import read_logs
from offeval_core.verdicts import ranking_estimators

ROOT = Path(__file__).resolve().parents[1]


def _calls(rel: str) -> set[str]:
    tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
    return {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
            for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)}


def test_ndcg_of_by_hand():
    assert ndcg_of(np.array([0.5, 0.0, 0.0, 3.0]), np.array([2.0, 0.0, 1.0, 3.0])).tolist() == [0.25, 0.0, 0.0, 1.0]
    out = ndcg_of(np.array([0.0, 1.0]), np.array([0.0, 4.0]), empty=math.nan)
    assert math.isnan(out[0]) and out[1] == 0.25
    assert ndcg_of(0.0, 0.0).tolist() == 0.0


def test_the_reduce_and_the_session_values_use_the_same_zero_rule():
    """Session 1 has no reward (iDCG = 0, nDCG counts 0); the reduce's nDCG mean equals the mean of the numpy
    session values. By hand, D = D0 = log2, m = ∞, de-biased labels c / D0(r) (1 at logged rank 1, log2 3 at 2):
    session 2 (click at logged rank 2, kept at rank 2): DCG = log2 3 · D(2) = 1, iDCG = log2 3 · D(1) = log2 3,
    nDCG = 1 / log2 3; session 3 (both clicked, swapped): DCG = 1 · D(2) + log2 3 · D(1) = iDCG, nDCG = 1."""
    df = pd.DataFrame({"session_id": [1, 1, 2, 2, 3, 3], "rank": [1, 2] * 3, "click": [0, 0, 0, 1, 1, 1],
                       "rank__a": [2, 1, 1, 2, 2, 1]})
    logs = read_logs(df)
    sv = session_values(logs, reward="click", policies=["a"], discount="log2", exposure="log2")
    assert sv.set_index("session_id")["ndcg__a"].tolist() == pytest.approx([0.0, 1 / math.log2(3), 1.0], abs=1e-15)
    assert sv["ndcg__a"].tolist() == ndcg_of(sv["dcg__a"], sv["idcg"]).tolist()
    m = reduce(logs, Grid(rewards=("click",), policies=("a",), discounts=("log2",), exposures=("log2",),
                          clips=(math.inf,)))
    row = aggregate(select(m, reward="click", policy="a", metric="ndcg", discount="log2", exposure="log2"))
    assert float(row["sum"].iloc[0] / row["n"].iloc[0]) == pytest.approx(sv["ndcg__a"].mean(), abs=1e-15)


def test_every_ndcg_caller_uses_the_one_rule():
    for rel in ("offeval_core/engine/kernel.py", "offeval_core/estimators.py", "offeval_core/heldout/metrics.py"):
        assert "ndcg_of" in _calls(rel), rel
    pattern = re.compile(r"idcg\s*>\s*0\s*,|where=idcg|/\s*idcg\b")
    found = [(p.relative_to(ROOT).as_posix(), line.strip())
             for p in (ROOT / "offeval_core").rglob("*.py")
             for line in p.read_text(encoding="utf-8").splitlines()
             if pattern.search(line.split("#")[0]) and not line.lstrip().startswith(">>>")]
    assert found == [("offeval_core/engine/grid.py", "return ibis.ifelse(idcg > 0, dcg / idcg, empty)")], found


def test_verdicts_and_the_support_check_use_every_session_without_a_control_arm():
    """Regression: verdicts.py and diagnose.check_support kept ``arm == "control"`` rows without the fallback of
    arms.offline_mask, so logs whose sessions are all in another arm crashed ("zero-size array to reduction
    operation maximum"). The rule uses every session then: the numbers of the control-only case
    (tests/test_verdicts.py::test_ranking_estimators_by_hand): DCG 5/6, SE 1/3, ESS 361/71."""
    rows = [{"session_id": s, "rank": k, "click": rewards[k - 1], "rank__new": ranks[k - 1], "arm": "treatment"}
            for s, (ranks, rewards) in enumerate([((2, 3), (1, 0)), ((3, 2), (0, 1)), ((1, 2), (1, 1))])
            for k in (1, 2)]
    logs = read_logs(pd.DataFrame(rows))
    d = {e.estimator: e for e in ranking_estimators(logs, "click", "new", {}, "reciprocal")}["dcg"]
    assert (d.value, d.stderr, d.ess) == pytest.approx((5 / 6, 1 / 3, 361 / 71), abs=1e-12)
    assert check_support(logs, policy="new", discount="reciprocal").n == 3
    for rel in ("offeval_core/diagnose.py", "offeval_core/verdicts.py"):
        text = (ROOT / rel).read_text(encoding="utf-8")
        assert '== "control"' not in text, rel
    # the rows: offline_rows, directly or through the one exposure-weight helper; the estimates: select's arm rule
    assert "offline_rows" in _calls("offeval_core/diagnose.py")
    assert "offline_rows" in _calls("offeval_core/importance/weights.py")
    assert {"exposure_weights", "select"} <= _calls("offeval_core/verdicts.py")
    assert "exposure_weights" in _calls("offeval_core/diagnose.py")
