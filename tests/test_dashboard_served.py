"""The dashboard on a file with the user's own column names, as `offeval dashboard FILE --map …` serves it:
every analysis page draws its charts for the mapped policies; the URL holds only non-default settings and
every page control round-trips through it."""

from __future__ import annotations

import json

import pytest
from dashboard_support import environment, open_page, write_small_world

from offeval_core.logs import read_logs
from tests.user_names import MAP, write_user_csv

ANALYSES = ("sensitivity", "correlation", "dcg_vs_ndcg", "decisions", "clip_tuning")


@pytest.fixture(scope="module")
def served_file(tmp_path_factory):
    world = write_small_world(tmp_path_factory.mktemp("world"))
    import pandas as pd

    path = write_user_csv(pd.read_parquet(world / "logs.parquet"), tmp_path_factory.mktemp("user") / "my.csv")
    with environment(OFFEVAL_DATA=str(path), OFFEVAL_MAP=MAP, OFFEVAL_REWARDS="", OFFEVAL_DEMO_DIR=str(world)):
        yield path


def specs(at):
    return [json.loads(el.proto.spec) for el in at.main.get("plotly_chart")]


def test_the_served_file_is_the_default_dataset_with_its_policies(served_file):
    at = open_page()
    policies = read_logs(served_file, columns={"session_id": "visit", "rank": "pos", "rank__*": "pos_*"},
                         guess=True).policies
    assert at.selectbox(key="w_dataset").value == "file"
    assert not at.error
    understood = next(m.value for m in at.markdown if "| | what offeval understood |" in m.value)
    assert "| **note** | guessed column mapping: day=date; experiment" in understood
    assert dict(at.query_params) == {}  # defaults only: nothing in the URL
    at.switch_page("views/clip_tuning.py").run()
    # every mapped policy, the copy of the logging policy marked as such
    options = at.selectbox(key="w_policy").options
    assert [o.split(" ")[0] for o in options] == list(policies)
    assert options[0] == "production = the logging policy" and at.selectbox(key="w_policy").value == "treatment"
    assert at.selectbox(key="w_reward").options == ["clicked", "completed"]
    assert dict(at.query_params) == {}
    at.selectbox(key="w_policy").set_value("cand_03").run()
    assert dict(at.query_params) == {"policy": ["cand_03"]} or dict(at.query_params) == {"policy": "cand_03"}


def test_the_data_page_says_the_served_file_is_loaded_and_keeps_the_demo_second(served_file):
    """Started on a file, the Data page's Source is that file, in use; the demo is one choice further, its button
    not the page's primary action; the session-length caption is the quantiles of a ranking log's sessions."""
    at = open_page()
    source = at.segmented_control(key="w_source")
    assert source.value == "file"
    assert source.options[0] == "Served file (my.csv)"
    assert [c.value for c in at.caption if c.value.startswith("In use:")] == [
        "In use: **my.csv**, the file this dashboard was started on (`offeval dashboard FILE`)."]
    assert [b.key for b in at.button] == []
    assert [c.value for c in at.caption if c.value.startswith("Session length: mean ")]
    assert [ch for ch in at.main.get("plotly_chart") if "Position bias" in ch.proto.spec]  # ranking logs: drawn
    assert not [i.value for i in at.info if i.value.startswith("No position-bias curve")]
    source.set_value("demo").run()
    assert at.selectbox(key="w_dataset").value == "file"  # choosing where to look loads nothing
    demo = at.button(key="w_use_demo")
    assert demo.proto.type == "secondary"
    demo.click().run()
    assert at.selectbox(key="w_dataset").value == "demo"
    at.segmented_control(key="w_source").set_value("file").run()
    assert at.button(key="w_use_file").proto.type == "primary"


@pytest.mark.parametrize("page", ANALYSES)
def test_every_analysis_page_draws_its_charts_for_the_mapped_policies(served_file, page):
    at = open_page(page, sens_alpha="0.05", level="0.8")
    assert not at.error, [e.value for e in at.error]
    charts = specs(at)
    assert charts, f"{page}: no chart"
    text = json.dumps(charts)
    if page == "dcg_vs_ndcg":  # one point per mapped policy
        assert all(p in text for p in ("production", "cand_01", "cand_10"))


def test_estimator_lab_hides_the_data_controls(served_file):
    at = open_page()
    at.switch_page("views/estimator_lab.py")
    # no run of the lab itself (slow): the sidebar is drawn before the page
    at.run(timeout=180)
    keys = {w.key for w in at.sidebar.selectbox} | {w.key for w in at.sidebar.select_slider}
    assert keys.isdisjoint({"w_dataset", "w_reward", "w_policy", "w_discount", "w_exposure", "w_clip"}), keys
    assert any("do not apply" in m.value for m in at.sidebar.caption)


def test_clip_recommendation_is_the_same_on_the_page_and_in_the_cli(served_file):
    """One rule: the Clip tuning page's recommendation equals `offeval estimate --clip auto`'s."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    at = open_page("clip_tuning", policy="treatment")
    page = next(i.value for i in at.info if i.value.startswith("**Recommended m = "))
    r = subprocess.run([sys.executable, "-m", "offeval_core.cli", "estimate", str(served_file), "--map", MAP,
                        "--reward", "clicked", "--policy", "treatment", "--clip", "auto", "--level", "0.99"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert r.returncode == 0, r.stderr
    cli = r.stderr.strip().splitlines()[-1].removeprefix("offeval estimate: --clip auto: ")
    assert page == f"**Recommended {cli}**"
    assert "bias bound" in cli
    m = cli.split(":")[0].removeprefix("m = ")
    notes = [a.get("text", "").strip() for a in specs(at)[0]["layout"].get("annotations", [])]
    assert f"recommended m = {m}" in notes  # the chart marks the same value
