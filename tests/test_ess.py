"""Kish's effective sample size: one definition (``stats.kish_ess_from_sums``), exact values, and every weight
diagnostic (importance, slate, clip tuning, verdicts) reading it."""

from __future__ import annotations

import ast
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from offeval_core.logs import read_logs
from offeval_core.stats import kish_ess, kish_ess_from_sums
from offeval_core.verdicts import ranking_estimators

PKG = Path(__file__).resolve().parents[1] / "offeval_core"
CALLERS = {"verdicts.py": "kish_ess", "slate/estimators.py": "kish_ess", "analyses/clip_tuning.py": "kish_ess",
           "importance/reduce.py": "kish_ess_from_sums"}


def test_kish_ess_by_hand():
    # weights 1, 1, 4: (Σw)² / Σw² = 36 / 18 = 2
    assert kish_ess([1.0, 1.0, 4.0]) == 2.0
    # equal weights: ESS = the count, whatever the common value
    assert kish_ess([0.3] * 7) == pytest.approx(7.0, abs=1e-12)
    # one non-zero weight among many: ESS = 1
    assert kish_ess([0.0, 0.0, 5.0, 0.0]) == 1.0
    # from sums: weights 1 and 2 → 3² / 5
    assert kish_ess_from_sums(3.0, 5.0) == 1.8
    # per column (axis=0): (1, 3) and (2, 2) → 16/10 and 16/8
    assert kish_ess(np.array([[1.0, 2.0], [3.0, 2.0]]), axis=0).tolist() == [1.6, 2.0]
    # elementwise on sums (a pandas Series as the importance diagnostics pass them)
    out = kish_ess_from_sums(pd.Series([4.5, 2.0]), pd.Series([6.25, 4.0]))
    assert out.tolist() == [4.5 ** 2 / 6.25, 1.0]


def test_kish_ess_without_weight_is_zero_and_nan_stays_nan():
    assert kish_ess([0.0, 0.0]) == 0.0
    assert kish_ess([]) == 0.0
    assert kish_ess_from_sums(0.0, 0.0) == 0.0
    assert math.isnan(kish_ess_from_sums(1.0, math.nan))
    assert kish_ess_from_sums(np.array([0.0, 2.0, math.nan]), np.array([0.0, 4.0, 1.0])).tolist()[:2] == [0.0, 1.0]


def test_a_ranking_verdict_with_all_zero_weights_is_dont():
    """Regression: verdicts.py's own copy, float(w.sum() ** 2 / (w ** 2).sum()), gave NaN on all-zero weights, so
    the ESS rules never fired and the estimator was trusted ("ESS is nan% of the weights"). D = reciprocal@1
    with every logged item ranked ≥ 2 by the target gives w = 0 on every row: ESS 0, verdict "don't"."""
    rows = [{"session_id": s, "rank": k, "click": int(k == 1), "rank__new": k + 1, "arm": "control"}
            for s in range(3) for k in (1, 2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        est = {e.estimator: e for e in ranking_estimators(read_logs(pd.DataFrame(rows)), "click", "new", {},
                                                          "reciprocal@1")}
    for key in ("dcg", "snips"):
        assert est[key].ess == 0.0 and est[key].ess_share == 0.0
        assert est[key].verdict == "don't"
        assert est[key].reason == "every weight is zero: no logged session informs it."


def test_every_weight_diagnostic_calls_the_one_definition():
    for rel, name in CALLERS.items():
        tree = ast.parse((PKG / rel).read_text(encoding="utf-8"))
        called = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
                  for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)}
        assert name in called, f"{rel} computes an ESS without offeval_core.stats.{name}"


def test_no_second_kish_formula_in_product_code():
    """(Σw)² / Σw² written out again anywhere (``x ** 2 / y``, ``s * s / s2``) besides Welch's df in stats.py."""
    pattern = re.compile(r"\*\*\s*2\)?\s*/|\b(\w+)\s*\*\s*\1\s*/\s*\w*(sq|2)\b")
    root = PKG.parent
    found = []
    for path in [*PKG.rglob("*.py"), *(root / "dashboard").rglob("*.py")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if pattern.search(line) and not line.lstrip().startswith((">>>", "#")):
                found.append((path.relative_to(root).as_posix(), line.strip()))
    assert found == [("offeval_core/stats.py", "return (a + b) ** 2 / denom")]
