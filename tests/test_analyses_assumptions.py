"""Assumption holds vs broken (offeval_core.analyses.assumptions): with Asm. 1-5 intact DCG (pbm, Q̂, m = ∞) is
unbiased against the simulator's exact truth; each switch visibly biases it, on several seeds."""

import functools
import re

import pandas as pd
import pytest

from offeval_core.analyses.assumptions import (
    FINDINGS,
    SWITCHES,
    assumption_contrast,
    contrast_takeaway,
    summarize_contrast,
    visibly_weakened,
)

SEEDS = (3, 4, 5)


@functools.cache
def _contrast():
    """At 95 %: the tests' counts (0-2 of 15 bias CIs excluding 0 by chance) are written for that level."""
    return assumption_contrast(seeds=SEEDS, level=0.95)


@pytest.mark.slow
def test_intact_world_is_unbiased_and_covers_at_nominal():
    s = _contrast().summary
    holds = s[s["world"] == "holds"].iloc[0]
    # 15 (seed, policy) bias CIs at 95 %: 0-2 excluding 0 by chance (P(≥ 3) ≈ 3.6 %)
    assert holds["biased_share"] * holds["n"] <= 2
    assert holds["coverage"] >= 0.90


@pytest.mark.slow
@pytest.mark.parametrize("switch", list(SWITCHES))
def test_each_switch_visibly_biases_dcg(switch):
    s = _contrast().summary.set_index(["switch", "world"])
    h, b = s.loc[(switch, "holds")], s.loc[(switch, "broken")]
    finding = FINDINGS.get(switch, "unbiasedness")
    assert visibly_weakened(h, b, finding), (switch, h.to_dict(), b.to_dict())
    verdict = re.search(rf"{switch} \(.*?— (breaking it [^.(]*)", _contrast().takeaway).group(1).strip()
    assert verdict == ("breaking it visibly lowers the CI coverage" if finding == "coverage"
                       else "breaking it visibly weakens unbiasedness")


@pytest.mark.slow
def test_the_contrast_pairs_worlds_by_seed_and_the_table_matches_the_cells():
    res = _contrast()
    cells = res.cells
    for (sw, world, seed, pol), part in cells.groupby(["switch", "world", "seed", "policy"]):
        row = res.table[(res.table["switch"] == sw) & (res.table["world"] == world) & (res.table["seed"] == seed)
                        & (res.table["policy"] == pol)].iloc[0]
        rel = (part["estimate"] - part["truth"]) / part["truth"]
        assert row["rel_bias"] == pytest.approx(rel.mean(), rel=1e-12)
        assert row["n_cells"] == len(part)
    # every 'holds' world is the same world: one simulation per seed, shared by the four switches
    holds = cells[cells["world"] == "holds"]
    first = holds[holds["switch"] == "cascade"].drop(columns="switch").reset_index(drop=True)
    for sw in SWITCHES:
        other = holds[holds["switch"] == sw].drop(columns="switch").reset_index(drop=True)
        pd.testing.assert_frame_equal(first, other)


def test_takeaway_and_verdict_from_a_constructed_summary():
    t = pd.DataFrame({"switch": ["cascade"] * 4, "assumption": ["Asm. 2"] * 4, "world": ["holds", "holds", "broken",
                                                                                         "broken"],
                      "seed": [0, 1, 0, 1], "policy": ["a"] * 4, "rel_bias": [0.01, -0.02, 0.2, 0.1],
                      "rel_bias_low": [-0.03, -0.05, 0.1, -0.01], "rel_bias_high": [0.05, 0.01, 0.3, 0.2],
                      "coverage": [1.0, 0.9, 0.5, 0.7]})
    s = summarize_contrast(t).set_index("world")
    assert s.loc["holds", "biased_share"] == 0 and s.loc["broken", "biased_share"] == 0.5
    assert s.loc["broken", "mean_abs_bias"] == pytest.approx(0.15)
    assert s.loc["broken", "coverage"] == pytest.approx(0.6)
    text = contrast_takeaway(summarize_contrast(t))
    assert "0 of 2 policy-seeds when the assumption holds" in text and "1 of 2 when broken" in text
    assert "visibly weakens" in text
    # a coverage drop of under 10 points is not called visible
    t.loc[t["world"] == "broken", "coverage"] = 0.9
    assert "does not visibly bias DCG in this world" in contrast_takeaway(summarize_contrast(t))


def test_bad_switch_and_seeds():
    with pytest.raises(ValueError, match="switches must be among cascade, reward_interactions"):
        assumption_contrast(["nope"], seeds=(0,))
    with pytest.raises(ValueError, match="seeds must list at least one seed, got none"):
        assumption_contrast(seeds=())
