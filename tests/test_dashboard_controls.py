"""Every control changes what it says, after any navigation order, and the page and its URL never disagree
(AppTest, the small simulated world as the demo).

One session walks the pages in the navigation's order, another in the reverse order; on each page every sidebar
control the page shows and every page control is moved, one after the other (each move on top of the previous
ones, and of what earlier pages left in the session). After each move the page's output — its charts' figure
JSON, its tables, metrics and messages — must differ from before the move, and a fresh session opened on the URL
the app wrote (the link a user would share) must show exactly the same output."""

from __future__ import annotations

import json
import math

import pytest
from dashboard_support import environment, open_page, write_small_world

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("demo_dir")]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = write_small_world(tmp_path_factory.mktemp("demo"))
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield out


SIDEBAR = {  # (widget accessor, key, two values: the move sets the one the control does not hold), sidebar order
    "reward": ("selectbox", "w_reward", ("watch_complete", "like")),
    "policy": ("selectbox", "w_policy", ("cand_01", "treatment")),
    "discount": ("selectbox", "w_discount", ("log2", "pbm")),
    "exposure": ("selectbox", "w_exposure", ("reciprocal", "pbm")),
    "clip": ("select_slider", "w_clip", (16.0, 4.0)),
    "level": ("select_slider", "w_level", (0.9, 0.99)),
}
PAGES = {  # page file → (the sidebar controls it shows, its own controls as (accessor, key, values))
    "data": ((), [("slider", "w_pbm_p", (0.6, 0.85)), ("slider", "w_pbm_ranks", (8, 12))]),
    "candidates": (("reward", "discount", "exposure", "level"),
                   [("selectbox", "w_cand_adj", ("bh", "holm")), ("selectbox", "w_cand_rank", ("pndcg", "dcg")),
                    ("radio", "w_cand_clip", ("sidebar", "recommended")), ("select_slider", "w_clip", (2.0, 8.0))]),
    "sensitivity": (("policy", "discount", "exposure", "clip", "level"),  # the reward: after "All rewards" is off
                    [("toggle", "w_sens_all", (False, True)), "reward", ("multiselect", "w_sens_metrics", None),
                     ("select_slider", "w_sens_alpha", (0.05, 0.01)), ("radio", "w_sens_side", ("negatives", "improvements")),
                     ("selectbox", "w_sens_adj", ("holm", "none"))]),
    "correlation": (("reward", "policy", ("discount", ("reciprocal", "exponential:0.9")), "clip"),
                    [("selectbox", "w_method", ("kendall", "pearson")), ("toggle", "w_corr_full", (True, False)),
                     ("multiselect", "w_variants", None), ("selectbox", "w_corr_row", -1)]),
    "dcg_vs_ndcg": (("reward", "discount", "exposure", "clip", "level"),
                    [("multiselect", "w_agr_policies", None), ("select_slider", "w_agr_boot", (0, 200)),
                     ("radio", "w_t1_norm", ("top1", "paper"))]),
    "estimator_lab": ((), [("selectbox", "w_lab_k", (10, 100)), ("selectbox", "w_lab_cov_n", (100, 300))]),
    "decisions": (("reward", "policy", "discount", "exposure", "clip", "level"),
                  [("multiselect", "w_estimators", None), ("toggle", "w_dec_rel", (True, False)),
                   ("selectbox", "w_dec_adj", ("bh", "none")), ("segmented_control", "w_dec_est", -1),
                   ("selectbox", "w_experiment", -1)]),
    "clip_tuning": (("reward", "policy", "discount", "exposure", "clip", "level"),
                    [("radio", "w_clip_rule", ("mse", "slope"))]),
    "which_estimator": (("reward", "policy", "discount"),
                        [("select_slider", "w_which_alpha", (0.1, 0.05)), ("radio", "w_which_model", ("cascade", "independent")),
                         ("select_slider", "w_which_n", (200, 500)), ("select_slider", "w_which_reps", (50, 100))]),
}


SETUP = {"sensitivity": [("select_slider", "w_sens_alpha", 0.05)]}
"""Set before a page's moves: the small world has no online improvement at the paper's p < 0.001 (its smallest
online p is 0.0024), so Sensitivity's default view has nothing to detect and no control but the threshold could
move it; at p < 0.05 it has 3 improvements (1 at p < 0.01)."""


def output(at) -> str:
    """What the page shows: every chart's figure JSON, table, metric and message (JSON text, compared as is)."""
    charts = [json.loads(el.proto.spec) for el in at.main.get("plotly_chart")]
    for c in charts:
        c.get("layout", {}).pop("template", None)
    tables = [d.value.to_dict("split") for d in at.main.get("arrow_data_frame")]
    metrics = [(m.label, m.value) for m in at.main.get("metric")]
    notes = [e.value for kind in ("info", "warning", "error", "success", "caption") for e in at.main.get(kind)]
    takes = [m.value for m in at.main.get("markdown")]
    return json.dumps([charts, tables, metrics, notes, takes], sort_keys=True, default=str)


def url(at) -> dict[str, str]:
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def _value(at, kind: str, key: str, value):
    """The value a move sets: of two values the one the control does not hold; ``None`` for a multiselect drops
    its last choice; ``-1`` picks the last option (the first when the last is chosen)."""
    widget = getattr(at, kind)(key=key)
    if value is None:  # a multiselect: one choice fewer
        return list(widget.value)[:-1]
    if value == -1:  # the last option of a selectbox or a segmented control
        options = list(widget.options)
        return options[-1] if options[-1] != widget.value else options[0]
    a, b = value
    return b if widget.value == a else a


def move(at, kind: str, key: str, value) -> None:
    widget = getattr(at, kind)(key=key)
    widget.set_value(_value(at, kind, key, value)).run()
    assert not at.exception, [e.value for e in at.exception]


def moves(page: str):
    """The page's moves: its sidebar controls, then its own (a name among them is a sidebar control moved there;
    ``(name, values)`` a sidebar control moved between other values)."""
    sidebar, own = PAGES[page]

    def one(item):
        if isinstance(item, str):
            return SIDEBAR[item]
        if isinstance(item[1], tuple) and item[0] in SIDEBAR:
            kind, key, _ = SIDEBAR[item[0]]
            return kind, key, item[1]
        return item
    return [one(item) for item in (*sidebar, *own)]


@pytest.mark.parametrize("order", ["navigation", "reverse"])
def test_every_control_moves_the_page_and_a_fresh_link_shows_the_same(order):
    pages = list(PAGES) if order == "navigation" else list(PAGES)[::-1]
    at = open_page(None, timeout=300)
    problems = []
    for i, page in enumerate(pages):
        if i or page != "data":  # the app opens on the Data page
            at.switch_page(f"views/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])
        for kind, key, value in SETUP.get(page, ()):
            getattr(at, kind)(key=key).set_value(value).run()
        for kind, key, value in moves(page):
            before = output(at)
            move(at, kind, key, value)
            after = output(at)
            if after == before:
                problems.append(f"{order} · {page}: moving {key} changed nothing on the page")
            link = url(at)
            fresh = open_page(None if page == "data" else page, timeout=300, **link)
            if output(fresh) != after:
                problems.append(f"{order} · {page}: after {key}, a fresh link {link} shows another page")
            if url(fresh) != link:
                problems.append(f"{order} · {page}: after {key}, the fresh link wrote {url(fresh)}, not {link}")
    assert not problems, "\n".join(problems)


def test_decisions_estimators_follow_the_clip_after_the_page_was_opened():
    """The issue's example: Decisions opened at m = ∞, then the clip slider moved to 64 — the estimators (left at
    their default) follow it, as a fresh link with ?clip=64 shows."""
    at = open_page("decisions", timeout=300)
    assert at.multiselect(key="w_estimators").value == ["dcg:1", "dcg:inf", "ndcg:inf"]
    at.select_slider(key="w_clip").set_value(64.0).run()
    assert at.multiselect(key="w_estimators").value == ["dcg:1", "dcg:64", "dcg:inf", "ndcg:inf"]
    assert "estimators" not in at.query_params  # still the default: the link leaves it out
    fresh = open_page("decisions", timeout=300, clip="64")
    assert output(fresh) == output(at)
    # a choice of the user's own travels in the link and is kept while it is offered; DCG at m = 64 is offered
    # only while the sidebar's m is 64, so at m = ∞ the page returns to the default, and the link says so
    at.multiselect(key="w_estimators").set_value(["dcg:1", "dcg:64"]).run()
    assert url(at)["estimators"] == "dcg:1,dcg:64"
    at.select_slider(key="w_level").set_value(0.9).run()
    assert at.multiselect(key="w_estimators").value == ["dcg:1", "dcg:64"]
    at.select_slider(key="w_clip").set_value(math.inf).run()
    assert at.multiselect(key="w_estimators").value == ["dcg:1"]
    assert url(at)["estimators"] == "dcg:1"


def test_the_recommended_clip_is_one_click_away_and_the_link_keeps_it(demo_dir):
    """"Use the recommended m" sets the clip to the core's rule (``recommended_clip``) computed on the loaded
    logs, the URL carries it, and a fresh link shows the same clip, reason and page; on every page that reads the
    clip, the sidebar says which clip is in force and why."""
    from offeval_core.analyses.clip_tuning import recommended_clip
    from offeval_core.logs import read_logs

    at = open_page("decisions", timeout=300)
    caption = " ".join(c.value for c in at.sidebar.get("caption"))
    assert "m = ∞: the default, unclipped" in caption
    reward, policy = at.selectbox(key="w_reward").value, at.selectbox(key="w_policy").value
    core = recommended_clip(read_logs(demo_dir / "logs.parquet"), reward=reward, policy=policy, discount="pbm",
                            exposure="pbm", level=at.select_slider(key="w_level").value)
    assert math.isfinite(core.clip)  # the small world's rule clips: the click is a change from the default
    assert f"the recommended clip is m = {core.clip:g}." in caption
    at.button(key="w_use_recommended").click().run()
    assert at.select_slider(key="w_clip").value == core.clip
    assert url(at)["clip"] == f"{core.clip:g}"
    caption = " ".join(c.value for c in at.sidebar.get("caption"))
    assert f"m = {core.clip:g}: the recommended clip" in caption
    assert not [b for b in at.button if b.key == "w_use_recommended"]  # already in force: no button
    fresh = open_page("decisions", timeout=300, **url(at))
    assert fresh.select_slider(key="w_clip").value == core.clip
    assert output(fresh) == output(at) and url(fresh) == url(at)
    # the Clip tuning page: its info box and chart line give the same value, and its own button sets it too
    tuning = open_page("clip_tuning", timeout=300)
    assert any(i.value.startswith(f"**Recommended m = {core.clip:g}:") for i in tuning.info)
    tuning.button(key="w_use_recommended_page").click().run()
    assert tuning.select_slider(key="w_clip").value == core.clip and url(tuning)["clip"] == f"{core.clip:g}"
    # DCG vs nDCG does not show the target policy: the sidebar names whose recommendation it is
    agr = open_page("dcg_vs_ndcg", timeout=300)
    assert f"the recommended clip of {policy} is m = {core.clip:g}." in " ".join(
        c.value for c in agr.sidebar.get("caption"))
    agr.button(key="w_use_recommended").click().run()
    assert url(agr)["clip"] == f"{core.clip:g}"


def test_a_control_moved_on_a_view_with_nothing_to_show_still_reaches_the_link():
    """Sensitivity's online negatives at p < 0.001 on the small world: there are none (the page warns and draws
    nothing). Turning "All rewards" off must still write sens_all=0 to the URL: the page used to end such a run
    with st.stop(), which never reached share.finish, so the link kept the earlier view."""
    at = open_page("sensitivity", timeout=300, sens_side="negatives")
    assert url(at) == {"sens_side": "negatives"}
    at.toggle(key="w_sens_all").set_value(False).run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert any("significant online degradation" in w.value for w in at.main.get("warning"))
    assert url(at) == {"sens_side": "negatives", "sens_all": "0"}


def test_a_page_that_ends_early_after_a_control_moved_still_writes_the_link():
    """DCG vs nDCG with one policy picked: the page asks for two and draws nothing else. The link must carry
    the pick: ended with st.stop(), the run never wrote the URL (it stayed {})."""
    at = open_page("dcg_vs_ndcg", timeout=300)
    picks = at.multiselect(key="w_agr_policies")
    first = picks.value[0]
    assert url(at) == {} and len(picks.value) >= 2
    picks.set_value([first]).run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    assert [w.value for w in at.main.get("warning")] == ["Choose at least two policies in the page controls."]
    assert url(at) == {"agr_policies": first}


def test_pages_end_early_through_the_app_never_with_st_stop():
    """Every early end of a page goes through ui.end_page, which app.py catches before writing the URL; the
    one st.stop() left is context.ctx's, for a page run without the app (nothing to write)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "dashboard"
    calls = {str(p.relative_to(root)): len(re.findall(r"^\s*st\.stop\(\)", p.read_text(), re.M))
             for p in root.rglob("*.py")}
    assert {k: n for k, n in calls.items() if n} == {"context.py": 1}
