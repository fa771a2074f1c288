"""AppTest of the held-out views: the DCG vs nDCG page's "held-out runs" source (the simulated model zoo of
KDD'24 App. A, and uploaded TREC qrels + runs) and the Estimator lab page. Numbers on the page are checked
against the core computed directly with the same settings; malformed uploads show the reader's message."""

from __future__ import annotations

import json

import pytest
from dashboard_support import environment, metric, open_page, shown, write_small_world
from streamlit.testing.v1 import AppTest

from offeval_core.formatting import format_number
from offeval_core.heldout.analyses import estimator_lab, runs_agreement, zoo_agreement
from offeval_core.heldout.io import read_qrels, read_runs


@pytest.fixture(scope="module", autouse=True)
def env(tmp_path_factory):
    """A small simulated demo (the app loads it at start) and a private zoo cache directory."""
    demo = write_small_world(tmp_path_factory.mktemp("demo"))
    cache = tmp_path_factory.mktemp("cache")
    with environment(OFFEVAL_DEMO_DIR=str(demo), OFFEVAL_CACHE_DIR=str(cache)):
        yield cache


def page(name: str) -> AppTest:
    return open_page(name, timeout=90)


def heldout(at: AppTest, **state) -> AppTest:
    for k, v in state.items():
        at.session_state[k] = v
    at.radio(key="w_agr_source").set_value("heldout").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_zoo_source_shows_the_app_a_numbers(env):
    at = heldout(page("dcg_vs_ndcg"), w_ho_grid="small")
    assert at.radio(key="w_ho_kind").value == "zoo"
    level = at.session_state["_offeval_ctx"].settings.level    # the sidebar's confidence level
    direct = zoo_agreement(grid="small", k=100, n_boot=500, level=level, seed=0, cache_dir=env / "zoo")
    a, ci = direct.agreement, direct.inverted_ci
    assert a.n == 25                                         # the small grid: 25 models
    assert metric(at, "Pearson r") == f"{a.pearson_r:.3f}"
    assert metric(at, "Kendall τ") == f"{a.kendall_tau:.3f}"
    assert metric(at, "Inverted pairs") == f"{a.inverted_share:.1%}"
    assert metric(at, f"{ci.level:.0%} CI") == f"{ci.low:.1%} – {ci.high:.1%}"
    # the paper's App. A numbers are shown beside ours
    comp = next(d.value for d in at.dataframe if "paper (App. A)" in d.value.columns).set_index("statistic")
    paper = comp["paper (App. A)"]  # statistics the paper does not report read "undefined", never None
    assert float(paper["Pearson r"]) == 0.6 and float(paper["Kendall τ"]) == 0.5
    assert float(paper["share of inverted pairs"]) == 0.25
    assert not paper.isna().any() and "None" not in set(paper.astype(str))
    assert comp.loc["Pearson r", "ours"] == format_number(a.pearson_r)  # ≤ 4 significant digits, as shown
    spec = json.loads(at.main.get("plotly_chart")[0].proto.spec)
    names = [n for t in spec["data"] if t.get("mode") == "markers" for n in t["text"]]
    assert sorted(names) == sorted(direct.names) and len(names) == 25   # one point per model
    assert [f.suffix for f in (env / "zoo").iterdir()] == [".npz"]   # the trained zoo is saved on disk
    # a different cut-off changes the numbers the same way as the core
    at.selectbox(key="w_ho_k").set_value(10).run()
    d10 = zoo_agreement(grid="small", k=10, n_boot=500, level=level, seed=0, cache_dir=env / "zoo")
    assert metric(at, "Kendall τ") == f"{d10.agreement.kendall_tau:.3f}"


def _upload(at: AppTest, kind: str, files: dict[str, bytes]) -> None:
    """Simulate the uploader callback: bytes kept by the same cached loader, (hash, name) in the session."""
    from dashboard import data

    refs = []
    for name, payload in files.items():
        sha = data.content_key(payload)
        data.heldout_bytes(sha, name, payload)
        refs.append((sha, name))
    at.session_state[f"ho_{kind}"] = refs


QRELS = b"u1 0 a 1\nu1 0 b 2\nu1 0 c 0\nu2 0 a 1\nu2 0 d 1\nu3 0 c 3\nu3 0 e 1\n"


def _run(tag: str, lists: dict[str, list[str]]) -> bytes:
    lines = [f"{u} Q0 {item} {r + 1} {10 - r} {tag}" for u, items in lists.items() for r, item in enumerate(items)]
    return ("\n".join(lines) + "\n").encode()


RUNS = {"r1": {"u1": ["a", "b", "c"], "u2": ["d", "a"], "u3": ["e", "c"]},
        "r2": {"u1": ["b", "a"], "u2": ["a", "x", "d"], "u3": ["c", "e"]},
        "r3": {"u1": ["c", "x", "a"], "u2": ["x", "d"], "u3": ["x", "y", "e"]}}


def test_uploaded_trec_runs_match_runs_agreement(tmp_path):
    at = page("dcg_vs_ndcg")
    at.session_state["w_ho_kind"] = "upload"
    two = _run("r1", RUNS["r1"]) + _run("r2", RUNS["r2"])    # two runs in one TREC file (one per tag)
    _upload(at, "qrels", {"qrels.txt": QRELS})
    _upload(at, "runs", {"two.run": two, "r3.run": _run("r3", RUNS["r3"])})
    heldout(at)
    assert [e.value for e in at.error] == []
    (tmp_path / "q.txt").write_bytes(QRELS)
    (tmp_path / "two.run").write_bytes(two)
    (tmp_path / "r3.run").write_bytes(_run("r3", RUNS["r3"]))
    runs = read_runs(tmp_path / "two.run") + read_runs(tmp_path / "r3.run")
    level = at.session_state["_offeval_ctx"].settings.level
    direct = runs_agreement(read_qrels(tmp_path / "q.txt"), runs, k=100, n_boot=500, seed=0, level=level)
    assert direct.agreement.n == 3
    assert metric(at, "Kendall τ") == f"{direct.agreement.kendall_tau:.3f}"
    assert metric(at, "Pearson r") == f"{direct.agreement.pearson_r:.3f}"
    table = next(d.value for d in at.dataframe if "dcg@100" in d.value.columns).set_index("model")
    assert list(table.index) == ["r1", "r2", "r3"]
    assert table["ndcg@100"].tolist() == [format_number(x) for x in direct.ndcg]


def test_malformed_trec_upload_shows_the_readers_message(tmp_path):
    at = page("dcg_vs_ndcg")
    at.session_state["w_ho_kind"] = "upload"
    bad = b"u1 0 a 1\nu1 0 b\n"                               # line 2 has 3 fields, qrels need 4
    _upload(at, "qrels", {"bad_qrels.txt": bad})
    _upload(at, "runs", {"r1.run": _run("r1", RUNS["r1"])})
    heldout(at)
    (tmp_path / "bad_qrels.txt").write_bytes(bad)
    with pytest.raises(ValueError) as info:
        read_qrels(tmp_path / "bad_qrels.txt")
    expected = str(info.value).replace(str(tmp_path / "bad_qrels.txt"), "bad_qrels.txt")
    assert expected.startswith("bad_qrels.txt: line 2: expected 4 whitespace-separated fields")
    text = " ".join(e.value for e in at.error)
    assert expected in text and "Qrels file bad_qrels.txt" in text
    assert "/tmp" not in text and "offeval-heldout-" not in text   # no temp path, no traceback
    assert not at.exception


def test_one_run_only_names_the_problem():
    at = page("dcg_vs_ndcg")
    at.session_state["w_ho_kind"] = "upload"
    _upload(at, "qrels", {"qrels.txt": QRELS})
    _upload(at, "runs", {"r1.run": _run("r1", RUNS["r1"])})
    heldout(at)
    assert any("runs_agreement needs at least 2 runs, got 1" in e.value for e in at.error)


def test_estimator_lab_page_quick_settings_match_the_core():
    from dashboard.data import LAB_PRESETS
    from offeval_core.heldout.charts import ESTIMATOR_LABELS

    at = page("estimator_lab")
    assert at.radio(key="w_lab_preset").value == "quick"
    assert at.selectbox(key="w_lab_prop").value == "true"       # opens with true propensities, so IPS is shown
    summary = next(d.value for d in at.dataframe if "Kendall τ (mean)" in d.value.columns)
    direct = estimator_lab(lam="recall", propensity="true", **LAB_PRESETS["quick"])
    assert sorted(summary["k"].astype(int).unique()) == list(LAB_PRESETS["quick"]["ks"])
    core = shown(direct.summary.assign(estimator=direct.summary["estimator"].map(ESTIMATOR_LABELS)))  # labels shown
    merged = summary.merge(core, on=["k", "estimator"], suffixes=("_page", "_core"))
    assert len(merged) == len(direct.summary) == 4 * len(LAB_PRESETS["quick"]["ks"])   # Naive, SNIPS, GS, IPS
    assert merged["Kendall τ (mean)_page"].tolist() == merged["Kendall τ (mean)_core"].tolist()
    assert merged["mean bias_page"].tolist() == merged["mean bias_core"].tolist()
    assert len(at.main.get("plotly_chart")) == 5   # four of the lab, one of the interval coverage
    at.selectbox(key="w_lab_k").set_value(10).run()
    assert not at.exception
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.main.get("plotly_chart")]
    assert any(t.startswith("Recall@10: MNAR estimate vs MCAR truth") for t in titles)
