"""The normal quantile z_{(1+level)/2}: one definition (``stats.normal_quantile``), exact values, every caller on it."""

from __future__ import annotations

import math
import re
import tokenize
from pathlib import Path

import pandas as pd
import pytest

from offeval_core.stats import normal_quantile

ROOT = Path(__file__).resolve().parents[1]


def test_normal_quantile_values():
    # Φ⁻¹(0.975) = 1.959963984540054, Φ⁻¹(0.995) = 2.5758293035489004, Φ⁻¹(0.95) = 1.6448536269514722
    assert normal_quantile(0.95) == 1.959963984540054
    assert normal_quantile(0.99) == 2.5758293035489004
    assert normal_quantile(0.90) == 1.6448536269514722
    assert math.erf(normal_quantile(0.8) / math.sqrt(2)) == pytest.approx(0.8, abs=1e-15)   # P(|Z| ≤ z) = level


def code_lines(path: Path) -> dict[int, str]:
    """The code of each line of a module, without its strings (docstrings, doctests) and comments."""
    out: dict[int, str] = {}
    with path.open(encoding="utf-8") as fh:
        for tok in tokenize.generate_tokens(fh.readline):
            if tok.type not in (tokenize.STRING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE) \
                    and tok.type != getattr(tokenize, "FSTRING_MIDDLE", -1):
                out[tok.start[0]] = out.get(tok.start[0], "") + " " + tok.string
    return out


def test_no_second_normal_quantile_in_product_code():
    """norm.ppf / erfinv / ndtri / a literal 1.96, 2.576 or 1.645 anywhere but stats._normal_quantile."""
    pattern = re.compile(r"norm \. ppf|norm \. isf|erfinv|ndtri|NormalDist|\b1\.96\b|\b2\.57[56]\b|\b1\.645\b")
    found = []
    for path in [*(ROOT / "offeval_core").rglob("*.py"), *(ROOT / "dashboard").rglob("*.py")]:
        for line, code in code_lines(path).items():
            if pattern.search(code):
                found.append((path.relative_to(ROOT).as_posix(), line))
    stats_line = next(i for i, t in enumerate((ROOT / "offeval_core/stats.py").read_text().splitlines(), 1)
                      if "_sc.ndtri(" in t)
    assert found == [("offeval_core/stats.py", stats_line)]


def test_the_recommendation_and_the_tuning_table_use_the_same_z():
    """Regression: recommend_clip computed z as √2 · erfinv(level) (1.644853626951473 at 90 %) while clip_tuning's
    SLOPE choice used ndtri (1.6448536269514722): estimates 0 and 1 with SE = 0.25 / 1.644853626951473 put the
    widened intervals exactly in touch under the first z and one ulp apart under the second, so the same result's
    rule-alone choice was m = ∞ and the recommendation's SLOPE step m = 1. One z: both m = ∞."""
    from offeval_core.analyses.clip_tuning import ClipTuningResult, recommend_clip, slope_select

    se = 0.15198920797794221
    t = pd.DataFrame({"clip": [1.0, math.inf], "estimate": [0.0, 1.0], "stderr": [se, se], "bias_bound": [0.0, 0.0]})
    res = ClipTuningResult(t, math.nan, "slope", "", "like", "p", "pbm", "pbm", 0.90, 1.0, 100, 1000)
    z = normal_quantile(0.90)
    assert slope_select([1.0, math.inf], [0.0, 1.0], [z * se, z * se]) == math.inf
    assert recommend_clip(res.table, level=res.level, effect=1.0).slope_clip == math.inf
