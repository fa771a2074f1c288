"""The multiple-testing control of the Decisions and Sensitivity pages: it changes the decisions to those of
the adjusted analysis, names the family in the caption, and round-trips through the URL."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dashboard_support import environment, open_page, write_small_world
from statsmodels.stats.multitest import multipletests

from dashboard.state import PAGE_CONTROLS, Settings, parse_query_params, to_query_params
from offeval_core.analyses import decision_boxes
from offeval_core.engine import DEFAULT_CLIPS, Grid, reduce
from offeval_core.logs import read_logs


@pytest.fixture(scope="module", autouse=True)
def demo_dir(tmp_path_factory):
    out = write_small_world(tmp_path_factory.mktemp("demo"))
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield out


def captions(at) -> list[str]:
    return [c.value for c in at.caption]


def table_with(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def takeaway(at) -> str:
    """The page's takeaways: the headline above each chart and the rest of it under the chart."""
    return " ".join(m.value for m in at.markdown)


def test_decisions_toggle_adjusts_and_names_the_family(demo_dir):
    at = open_page("decisions")
    assert at.selectbox(key="w_dec_adj").value == "none"
    assert any(c.startswith("Unadjusted: each of the 3 boxes per estimator (3 A/B tests × 1 policy)") for c in captions(at))
    assert "dec_adj" not in at.query_params
    at.selectbox(key="w_dec_adj").set_value("holm").run()
    assert not at.exception
    assert any("Holm (family-wise error) at α = 0.01; family: 3 A/B tests × 1 policy per estimator (m = 3)" in c
               for c in captions(at))
    assert at.query_params["dec_adj"] == "holm"
    # the page's takeaway is the core's on the same logs, adjusted over the same family
    logs = read_logs(demo_dir / "logs.parquet")
    reward, policy = at.session_state["w_reward"], at.session_state["w_policy"]
    m = reduce(logs, Grid(rewards=(reward,), policies=logs.policies, discounts=("pbm",), exposures=("pbm",),
                          clips=DEFAULT_CLIPS))
    ests = [("dcg", "pbm", "pbm", 1.0), ("dcg", "pbm", "pbm", math.inf), ("ndcg", "pbm", "pbm", math.inf)]
    core = decision_boxes(m, estimators=ests, policy=policy, level=0.99, rewards=(reward,), adjust="holm")
    assert "With Holm (family-wise error) adjustment over 3 A/B tests × 1 policy (m = 3, α = 0.01)" in core.takeaway
    assert core.takeaway.split(". ")[-1] in takeaway(at)
    online = core.boxes.drop_duplicates("experiment_id")
    np.testing.assert_allclose(online["online_p_adj"], multipletests(online["online_p"], method="holm")[1])
    assert core.adjustment in captions(at)


def test_decisions_adjustment_from_the_link():
    at = open_page("decisions", dec_adj="bh")
    assert at.selectbox(key="w_dec_adj").value == "bh"
    assert any("Benjamini-Hochberg (false discovery rate)" in c for c in captions(at))


def test_sensitivity_toggle_adjusts_and_names_the_family():
    at = open_page("sensitivity", level="0.8")
    at.select_slider(key="w_sens_alpha").set_value(0.05).run()
    assert any(c.startswith("Unadjusted: each of the ") and "is detected on its own 80 % CI (one-sided α = 0.1)" in c
               for c in captions(at))
    before = table_with(at, "detected")
    at.selectbox(key="w_sens_adj").set_value("holm").run()
    assert not at.exception
    after = table_with(at, "detected unadjusted")
    n = int(after["settings"].astype(int).max())
    assert any(f"Holm (family-wise error) at α = 0.1; family: the {n} settings (experiment × day × reward) at each "
               "of" in c and f"(m = {n})" in c for c in captions(at))
    assert f"with Holm (family-wise error) adjustment over the {n} settings at each m," in takeaway(at)
    assert (after["detected unadjusted"].to_numpy() == before["detected"].to_numpy()).all()
    assert (after["detected"].astype(int) <= after["detected unadjusted"].astype(int)).all()
    assert at.query_params["sens_adj"] == "holm"
    at2 = open_page("sensitivity", level="0.8", sens_alpha="0.05", sens_adj="holm")
    assert at2.selectbox(key="w_sens_adj").value == "holm"
    assert table_with(at2, "detected unadjusted").equals(after)


@pytest.mark.parametrize("name", ["dec_adj", "sens_adj"])
def test_adjustment_controls_round_trip_and_default_stays_out_of_the_url(name):
    assert PAGE_CONTROLS[name].default == "none"
    assert to_query_params(Settings().with_controls(**{name: "none"})) == {}
    for method in ("holm", "bh"):
        params = to_query_params(Settings().with_controls(**{name: method}))
        assert params == {name: method}
        assert parse_query_params(params).control(name) == method
    bad = parse_query_params({name: "bonferroni"})
    assert bad.control(name) == "none" and bad.problems == (f"ignored {name}='bonferroni': {name} must be one of "
                                                            "none, holm, bh",)
