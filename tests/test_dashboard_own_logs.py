"""The dashboard on logs exported the way a team would (tests/own_logs.py), served as ``offeval dashboard FILE --map``:
offline-only logs with ``pos_*`` candidates (the Candidates page, the refusals that point to it) and A/B logs whose
tested policy is not named 'treatment' (every page opens on it, names it and equals the core on the mapped data)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from dashboard_support import environment, metric, open_page, shown, write_small_world
from own_logs import COLUMNS, MAP, REWARDS, offline_only, renamed_ab, write

from dashboard.render import headline
from offeval_core.analyses import (
    Variant,
    common_clip,
    compare_candidates,
    decision_boxes,
    offline_online_correlation,
)
from offeval_core.analyses.clip_tuning import clip_tuning, mean_offline_effect, recommend_clip
from offeval_core.engine import DEFAULT_CLIPS, Grid, reduce
from offeval_core.logs import read_logs
from offeval_core.policies import target_policies
from offeval_core.sanitize import escape_html

LEVEL = 0.99


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return pd.read_parquet(write_small_world(tmp_path_factory.mktemp("world")) / "logs.parquet")


def _mapped(path):
    """The file read with the mapping the user gives (``--map``, the rewards named): the core's view of it."""
    return read_logs(path, columns=COLUMNS, rewards=REWARDS.split(","), guess=True)


def _takes(at):
    return [m.value for m in at.markdown if "offeval-takeaway" in m.value]


def _titles(at):
    return [json.loads(e.proto.spec)["layout"]["title"]["text"] for e in at.main.get("plotly_chart")]


# --------------------------------------------------------------------------------------------- offline only


@pytest.fixture(scope="module")
def offline(world, tmp_path_factory):
    path = write(offline_only(world), tmp_path_factory.mktemp("offline") / "candidates.csv")
    with environment(OFFEVAL_DATA=str(path), OFFEVAL_MAP=MAP, OFFEVAL_REWARDS=REWARDS):
        yield path


def test_offline_only_logs_open_on_a_candidate_not_on_the_logging_policy(offline):
    logs = _mapped(offline)
    t = target_policies(logs)
    assert t.logging == ("production",)
    at = open_page("clip_tuning", timeout=300)
    assert at.selectbox(key="w_policy").value == "ranker_v2" == t.default
    assert dict(at.query_params) == {}                     # the default is derived from the data: not in the URL
    assert any("of ranker_v2 is" in t for t in _takes(at))


def test_candidates_page_equals_the_core_on_the_mapped_logs(offline):
    logs = _mapped(offline)
    at = open_page("candidates", timeout=300)
    assert not at.error, [e.value for e in at.error]
    m = reduce(logs, Grid(rewards=("clicked",), policies=logs.policies, discounts=("pbm",), exposures=("pbm",),
                          clips=DEFAULT_CLIPS))
    recs = {}
    for p in ("ranker_v2", "ranker_v3", "ranker_v4"):
        tuned = clip_tuning(logs, reward="clicked", policy=p, clips=DEFAULT_CLIPS, level=LEVEL, moments=m)
        effect = mean_offline_effect(m, reward="clicked", policy=p, discount="pbm", exposure="pbm", level=LEVEL)
        recs[p] = recommend_clip(tuned.table, level=tuned.level, effect=effect).clip
    clip, reason = common_clip(recs)
    res = compare_candidates(m, candidates=[(p, Variant("dcg", "pbm", "pbm", clip)) for p in recs], reward="clicked",
                             level=LEVEL, adjust="holm", clip_reason=reason)
    table = next(d.value for d in at.dataframe if "beats the logging policy" in d.value.columns)
    assert list(table["policy"]) == list(res.table["policy"])            # production is not a candidate
    core = shown(res.table)  # the core's numbers as every table shows them (≤ 4 significant digits)
    for col in ("effect", "effect low", "effect high", "estimate", "logging"):
        assert table[col].tolist() == core[col].tolist(), col
    assert metric(at, "A/B test next") == res.next_policy == "ranker_v2"
    assert metric(at, "Beat the logging policy") == str(int(res.table["beats_logging"].sum()))
    assert _takes(at)[0] == f'<div class="offeval-takeaway">{escape_html(headline(res.takeaway)[0])}</div>'
    assert _titles(at)[0] == f"3 candidates vs the logging policy — clicked, DCG (pbm, Q̂ m={clip:g})"
    assert any("Not a candidate: production" in c.value for c in at.caption)
    # the sidebar's m instead of the rule; Benjamini-Hochberg instead of Holm
    at.radio(key="w_cand_clip").set_value("sidebar").run()
    at.selectbox(key="w_cand_adj").set_value("bh").run()
    at.select_slider(key="w_clip").set_value(16.0).run()
    res16 = compare_candidates(m, candidates=[(p, Variant("dcg", "pbm", "pbm", 16.0)) for p in recs],
                               reward="clicked", level=LEVEL, adjust="bh")
    table = next(d.value for d in at.dataframe if "beats the logging policy" in d.value.columns)
    assert table["effect"].tolist() == shown(res16.table)["effect"].tolist()
    assert dict(at.query_params) == {"cand_clip": "sidebar", "cand_adj": "bh", "clip": "16"} or \
        {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()} == \
        {"cand_clip": "sidebar", "cand_adj": "bh", "clip": "16"}


@pytest.mark.parametrize("view", ["sensitivity", "correlation", "decisions"])
def test_pages_that_need_an_ab_test_say_so_and_link_to_candidates(offline, view):
    at = open_page(view, timeout=300)
    assert any("needs an A/B test" in w.value and "**Candidates**" in w.value for w in at.warning)
    assert [link.proto.page for link in at.main.get("page_link")] == ["candidates"]
    assert not at.main.get("plotly_chart")


def _one_experiment(at):
    return [w.value for w in at.warning if w.value.startswith("Only one experiment")]


def test_the_data_page_points_one_experiment_logs_to_candidates(offline):
    at = open_page("data", timeout=300)
    assert not at.error, [e.value for e in at.error]
    assert _one_experiment(at) == ["Only one experiment: the Decisions page needs several A/B tests, and the "
                                   "offline-online correlation pages have one experiment to go on. The "
                                   "**Candidates** page compares every candidate with the logging policy offline."]
    links = at.main.get("page_link")
    assert [link.proto.page for link in links] == ["candidates"]
    assert links[0].proto.label == "Candidates: every candidate vs the logging policy"


# ----------------------------------------------------------------------------- a policy not named treatment


@pytest.fixture(scope="module")
def ab(world, tmp_path_factory):
    path = write(renamed_ab(world), tmp_path_factory.mktemp("ab") / "ab_test.csv")
    with environment(OFFEVAL_DATA=str(path), OFFEVAL_MAP=MAP, OFFEVAL_REWARDS=REWARDS):
        yield path


@pytest.fixture(scope="module")
def ab_moments(ab):
    logs = _mapped(ab)
    m = reduce(logs, Grid(rewards=("clicked",), policies=logs.policies, discounts=("pbm", "log2"),
                          exposures=("pbm", "log2"), clips=DEFAULT_CLIPS))
    return logs, m


def test_the_data_page_of_several_experiments_has_no_one_experiment_notice(ab):
    at = open_page("data", timeout=300)
    assert _mapped(ab).frame["experiment_id"].nunique() > 1
    assert _one_experiment(at) == [] and not at.main.get("page_link")


@pytest.mark.parametrize("view", ["sensitivity", "correlation", "decisions", "clip_tuning"])
def test_every_page_opens_on_ranker_v2_and_names_it(ab, view):
    at = open_page(view, timeout=300, sens_alpha="0.05")
    assert not at.error, [e.value for e in at.error]
    assert at.selectbox(key="w_policy").value == "ranker_v2"
    assert "ranker_v2" in _takes(at)[0]
    assert "ranker_v2" in _titles(at)[0]


def test_decisions_equal_the_core_on_the_mapped_logs(ab, ab_moments):
    _, m = ab_moments
    at = open_page("decisions", timeout=300)
    ests = [("dcg", "pbm", "pbm", 1.0), ("dcg", "pbm", "pbm", math.inf), ("ndcg", "pbm", "pbm", math.inf)]
    res = decision_boxes(m, estimators=[Variant(*e) for e in ests], policy="ranker_v2", level=LEVEL,
                         rewards=("clicked",))
    page = max((d.value for d in at.dataframe if "offline estimate" in d.value.columns), key=len)  # "Every box"
    core = shown(res.boxes.drop(columns=["colour"]), kinds={"offline_decision": "text", "online_decision": "text"})
    for label in res.estimators:
        a = page[page["estimator"] == label]
        b = core[core["estimator"] == label]
        for col in ("offline effect", "offline low", "online effect", "offline estimate", "online treatment arm"):
            assert a[col].tolist() == b[col].tolist(), (label, col)
    est = at.segmented_control(key="w_dec_est").value
    assert _takes(at)[0].startswith(f'<div class="offeval-takeaway">ranker_v2 vs the logging policy, {est}:')
    assert _titles(at)[0] == f"Offline vs online decisions per A/B test — ranker_v2, {est}"


def test_correlation_needs_no_column_named_treatment_and_equals_the_core(ab, ab_moments):
    _, m = ab_moments
    at = open_page("correlation", timeout=300)
    assert not at.error, [e.value for e in at.error]
    from offeval_core.analyses import default_variants

    res = offline_online_correlation(m, variants=default_variants(), rewards=("clicked",),
                                     policies=("logging", "ranker_v2"))
    page = next(d.value for d in at.dataframe if "variant" in d.value.columns and "r" in d.value.columns)
    assert set(page["policy"]) == {"logging", "ranker_v2"}
    assert page["r"].tolist() == shown(res.table)["r"].tolist()


def test_exports_name_the_policy(ab):
    from dashboard.render import export_settings
    from offeval_core.formatting import file_stem

    at = open_page("decisions", timeout=300)
    settings = export_settings(at.session_state["_offeval_ctx"])
    assert settings["policy"] == "ranker_v2"            # the footer of every exported chart and the CSV header
    assert "ranker_v2" in file_stem("decision_boxes", settings)

    at = open_page("candidates", timeout=300)
    assert "policy" not in export_settings(at.session_state["_offeval_ctx"])   # the page compares every candidate
