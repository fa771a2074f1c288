"""A link to the Sensitivity page's online-negatives view (``sens_side=negatives``) on logs whose A/B tests have
no significant online degradation: the page says so in words that fit that view, offers the online
improvements it does have, and one click shows them with a link that no longer names the side."""

from __future__ import annotations

import pytest
from dashboard_support import environment, open_page

from offeval_core.analyses import sensitivity
from offeval_core.engine import Grid, reduce
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, write_world

# two positive A/B tests and a neutral one, 600 sessions per arm and day: online improvements at p < 0.05, and
# no online degradation (checked below against the core)
CONFIG = {"effects": ("positive", "positive", "neutral"), "sessions_per_arm_day": 600}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("no-negatives")
    write_world(preset_config("small", **CONFIG), out, seed=3)
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield out


def test_a_negatives_link_on_logs_without_negatives_offers_the_improvements(world):
    m = reduce(read_logs(world / "logs.parquet"), Grid(rewards=("like", "watch_complete", "watch_time"),
                                                        policies=("treatment",)))
    kw = {"online_alpha": 0.05, "rewards": ("like", "watch_complete", "watch_time")}
    negatives, improvements = (sensitivity(m, side=side, **kw) for side in ("negatives", "improvements"))
    assert len(negatives.settings) == 0 and len(improvements.settings) > 0
    at = open_page("sensitivity", sens_side="negatives", sens_alpha="0.05")
    warning = [w.value for w in at.warning]
    assert warning == [negatives.takeaway]
    assert "significant online degradation (p < 0.05, effect < 0)" in warning[0]   # not "< -0"
    assert "the paper: 0.001" not in warning[0] and "online improvements (the TPR view)" in warning[0]
    assert not at.main.get("plotly_chart") and at.radio(key="w_sens_side").value == "negatives"
    n = len(improvements.settings)
    # the page's one button (the sidebar's clip control has its own "Use the recommended m")
    assert [b.label for b in at.main.get("button")] == [f"Show the {n} online improvements (TPR) instead"]
    at.button(key="w_sens_other").click().run()
    assert not at.exception and not at.warning
    assert at.radio(key="w_sens_side").value == "improvements"
    assert len(at.main.get("plotly_chart")) == 1
    assert dict(at.query_params) == {"sens_alpha": "0.05"}   # the default side is not in the link


def test_the_negatives_view_says_the_online_effect_bound_without_a_minus_zero(world):
    at = open_page("sensitivity", sens_side="negatives", sens_eff="0.5", sens_alpha="0.05")
    assert any("effect < -0.5)" in w.value for w in at.warning), [w.value for w in at.warning]


def test_the_negatives_takeaway_with_settings_says_effect_below_zero_not_minus_zero(world):
    """The negatives that do exist (p < 0.05 here) are described as "effect < 0", as the empty view says it."""
    m = reduce(read_logs(world / "logs.parquet"), Grid(rewards=("like",), policies=("treatment",)))
    res = sensitivity(m, side="negatives", online_alpha=0.5, rewards=("like",))
    assert len(res.settings) and "(p < 0.5, effect < 0)" in res.takeaway and "-0)" not in res.takeaway
    assert sensitivity(m, side="negatives", online_alpha=0.5, rewards=("like",), min_effect=0.01).scope.endswith(
        "(p < 0.5, effect < -0.01)")
