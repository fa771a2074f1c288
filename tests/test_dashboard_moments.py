"""AppTest of the dashboard on a moments file (``offeval reduce``): the pages that need only moments show the
numbers the core computes from the same file directly; the parts that need rows show a notice instead."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest
from dashboard_support import environment, open_page, shown, write_small_world
from streamlit.testing.v1 import AppTest

from offeval_core.analyses import Variant, decision_boxes, offline_online_correlation, sensitivity
from offeval_core.commands import reduce as reduce_cmd
from offeval_core.moments_io import read_moments


@pytest.fixture(scope="module")
def moments_path(tmp_path_factory):
    out = write_small_world(tmp_path_factory.mktemp("moments_world"))
    parser = argparse.ArgumentParser(prog="offeval")
    reduce_cmd.register(parser.add_subparsers(dest="command"))
    path = out / "moments.parquet"
    args = parser.parse_args(["reduce", str(out / "logs.parquet"), "--out", str(path), "--rewards", "like",
                              "--policies", "treatment,cand_01", "--discounts", "pbm,log2", "--clips", "1,4,64,inf"])
    assert args.func(args) == 0
    with environment(OFFEVAL_DEMO_DIR=str(out), OFFEVAL_DATA_DIR=str(out)):
        yield path


def app(path: Path, page: str | None = None) -> AppTest:
    """The link names the file in the data directory (OFFEVAL_DATA_DIR) by name, never by path."""
    return open_page(page, moments=path.name, level="0.9")


def infos(at: AppTest) -> str:
    return " ".join(i.value for i in at.info)


def test_data_page_shows_the_files_grid_and_what_needs_logs(moments_path):
    at = app(moments_path)
    assert not at.error
    assert at.selectbox(key="w_dataset").value == "moments"
    grid = at.dataframe[0].value.set_index("field")["values"]
    assert grid["clip values m"] == "1, 4, 64, ∞"
    assert grid["policies"] == "treatment, cand_01"
    assert "learnt position-bias curve" in infos(at) and "offeval report LOGS" in infos(at)
    # the sidebar offers only the file's variants (on a page that reads them; the Data page shows the dataset)
    at.switch_page("views/clip_tuning.py").run()
    assert at.selectbox(key="w_discount").options == ["pbm", "log2"]
    assert at.selectbox(key="w_exposure").options == ["pbm"]


def test_sensitivity_table_equals_the_core_on_the_file(moments_path):
    at = app(moments_path, "sensitivity")
    at.toggle(key="w_sens_all").set_value(False).run()   # the sidebar's reward only
    at.select_slider(key="w_sens_alpha").set_value(0.05).run()
    assert not at.exception and not at.error
    page = at.dataframe[0].value
    direct = sensitivity(read_moments(moments_path), policy="treatment", metrics=("dcg", "ndcg"), discount="pbm",
                         exposure="pbm", level=0.9, online_alpha=0.05, rewards=("like",)).table
    assert list(page["metric"]) == list(direct["metric"])
    assert list(page["m"]) == [("∞" if math.isinf(c) else f"{c:g}") for c in direct["clip"]]
    assert page.equals(shown(direct, headers={"tpr": "TPR"}))  # every cell, as the page formats it
    assert direct["n_settings"].max() > 0


def test_decision_boxes_equal_the_core_on_the_file(moments_path):
    at = app(moments_path, "decisions")
    assert not at.exception and not at.error
    picked = at.multiselect(key="w_estimators").value
    # the importance-sampling family is not in a moments file: left out of the choices, with a notice
    assert all(not t.startswith(("ips", "snips", "ncis", "cips")) for t in at.multiselect(key="w_estimators").options)
    assert "importance-sampling estimators" in infos(at)
    ests = [Variant(t.rsplit(":", 1)[0], "pbm", "pbm", math.inf if t.endswith(":inf") else float(t.rsplit(":", 1)[1]))
            for t in picked]
    direct = decision_boxes(read_moments(moments_path), estimators=ests, policy="treatment", level=0.9,
                            relative=False, rewards=("like",)).boxes
    page = at.dataframe[-1].value
    core = shown(direct)
    assert len(page) == len(direct) == 3 * len(ests)
    for col in ("offline effect", "offline low", "offline high", "online effect", "online low", "online high"):
        assert page[col].tolist() == core[col].tolist(), col
    assert list(page["category"]) == list(direct["category"])


def test_clip_tuning_and_dcg_vs_ndcg_say_they_need_the_logs(moments_path):
    at = app(moments_path, "clip_tuning")
    assert not at.error
    text = infos(at)
    assert "clip-tuning chart" in text and "needs the raw logs" in text and "offeval report LOGS" in text
    assert not at.main.get("plotly_chart")
    est = at.dataframe[0].value                       # the estimates at m are still there, from the moments
    assert sorted(est["A/B test"].unique()) == sorted(read_moments(moments_path).online["experiment_id"].unique())
    at.switch_page("views/dcg_vs_ndcg.py").run()
    assert not at.exception and not at.error
    assert "bootstrap over sessions" in infos(at)


def test_correlation_offers_the_files_variants_and_equals_the_core(moments_path):
    at = app(moments_path, "correlation")
    assert not at.exception and not at.error
    # the file has D0 = pbm only: the variants offered (D = D0) are the pbm ones
    ms = at.multiselect(key="w_variants")
    assert ms.options and all("(pbm," in label for label in ms.options)
    variants = [Variant(m, d, d, math.inf if c == "inf" else float(c)) for m, d, c in (t.split(":") for t in ms.value)]
    direct = offline_online_correlation(read_moments(moments_path), variants=variants, method="pearson",
                                        rewards=("like",)).table
    page = at.dataframe[0].value
    assert len(page) == len(direct)
    assert page["r"].tolist() == shown(direct)["r"].tolist()


def test_a_discount_not_in_the_file_is_a_notice_not_an_error(moments_path):
    from dashboard import data

    m = read_moments(moments_path)
    with pytest.raises(data.NeedsRawLogs, match=r"^The discount 'reciprocal' \(in the moments file\) was not computed; "
                                                r"available: pbm, log2: choose one of those in the sidebar\. "):
        data.file_moments_subset(m, "like", "reciprocal", "pbm")
    sub = data.file_moments_subset(m, "like", "log2", "pbm")
    assert set(sub.offline["discount"]) == {"log2"} and len(sub.offline) == (m.offline["discount"] == "log2").sum()


def test_the_moments_parameter_round_trips_through_the_url():
    from dashboard.state import parse_query_params, to_query_params

    s = parse_query_params({"moments": "/data/m.parquet", "clip": "64"})
    assert (s.dataset, s.moments, s.problems) == ("moments", "/data/m.parquet", ())
    assert to_query_params(s) == {"moments": "/data/m.parquet", "clip": "64"}
    assert parse_query_params(to_query_params(s)) == s


def test_an_upload_is_recognised_as_a_moments_file_or_as_logs(moments_path):
    from dashboard import data

    raw = moments_path.read_bytes()
    ds = data.upload_moments(data.content_key(raw), "moments.parquet", raw)
    assert ds.is_moments and ds.key == f"mupload:{data.content_key(raw)}|moments.parquet"
    assert ds.rewards == ("like",) and ds.policies == ("treatment", "cand_01") and ds.has_arms
    assert len(ds.experiments) == 3 and len(ds.days) == 3        # the small preset: 3 experiments × 3 days
    assert data.load(ds.key) is ds                                # the sidebar reloads it from the cache
    logs = (moments_path.parent / "logs.parquet").read_bytes()
    assert data.upload_moments(data.content_key(logs), "logs.parquet", logs) is None


def test_a_server_started_on_a_moments_file_loads_it(moments_path):
    """``offeval dashboard moments.parquet``: the served file is a moments file, read by name (the served
    loader called the moments reader without the file's name and raised TypeError)."""
    from dashboard import data
    from dashboard.served import served_key

    with environment(OFFEVAL_DATA=str(moments_path), OFFEVAL_MAP="", OFFEVAL_REWARDS="", OFFEVAL_ARMS=""):
        ds = data.load(served_key())
    assert ds.is_moments and ds.label == "moments file moments.parquet"
    direct = read_moments(moments_path)
    assert ds.file_moments.grid == direct.grid
    assert ds.file_moments.offline.equals(direct.offline)
