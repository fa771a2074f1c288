"""The frontend's chart code is asked for at the start of a page's run (``render.preload_chart_code``): a page
opened by URL loads Plotly's JavaScript while it computes instead of after its analysis. On the Method page,
whose default view draws no chart, it is asked for after the page's content."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from browser_support import (
    CHROMIUM,
    dashboard_command,
    demo_environment,
    free_port,
    launched_chromium,
    serving,
)
from dashboard_support import open_page

from dashboard import render

JS_DIR = Path(st.__file__).parent / "static" / "static" / "js"


def _sidebar_html(at) -> list[str]:
    return [el.proto.body for el in at.sidebar.get("html")]


def test_the_installed_streamlit_has_one_chart_file_and_it_is_the_one_named():
    name = render.chart_chunk(JS_DIR)
    assert name is not None and name.startswith("PlotlyChart.") and name.endswith(".js")
    assert (JS_DIR / name).stat().st_size > 1_000_000  # Plotly itself, not a stub


@pytest.mark.parametrize(("files", "expected"), [
    ((), None),
    (("PlotlyChart.Ab_9-x.js",), "PlotlyChart.Ab_9-x.js"),
    (("PlotlyChart.Ab_9-x.js", "PlotlyChart.Zz12.js"), None),  # two: which one the frontend imports is unknown
    (('PlotlyChart.a"+x+".js',), None),  # a name that is not a plain hash is never written into the script
    (("PlotlyChart.abc.js",), None),  # a hash shorter than four characters
    (("Plotly.Ab_9-x.js", "PlotlyChart.Ab_9-x.css"), None),
])
def test_the_chart_file_is_found_only_when_it_is_one_with_a_plain_name(tmp_path, files, expected):
    for f in files:
        (tmp_path / f).write_text("x")
    assert render.chart_chunk(tmp_path) == expected


def test_a_chart_page_asks_for_the_chart_code_before_anything_else():
    at = open_page("clip_tuning", timeout=300)
    bodies = _sidebar_html(at)
    name = render.chart_chunk(JS_DIR)
    assert f'import(new URL("./{name}", main.src)' in bodies[0]
    assert sum(name in b for b in bodies) == 1
    first = at.sidebar[0]  # the first element of the sidebar, before the dataset, reward and policy choices
    assert first.type == "html" and name in first.proto.body
    assert at.main.get("plotly_chart")  # and the page still draws its charts


def test_the_method_page_asks_for_it_after_its_content():
    at = open_page("method", timeout=300)
    name = render.chart_chunk(JS_DIR)
    bodies = _sidebar_html(at)
    assert sum(name in b for b in bodies) == 1
    last = at.sidebar[len(at.sidebar) - 1]
    assert last.type == "html" and name in last.proto.body
    assert not at.main.get("plotly_chart")


@pytest.mark.browser
@pytest.mark.xdist_group("browser")
def test_the_browser_loads_the_chart_code_on_a_page_without_a_chart():
    """Only the preload can ask for the chart file on the Method page (it has no chart); the module is then
    loaded in the tab, so the next page's first chart does not wait for it."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    name = render.chart_chunk(JS_DIR)
    port = free_port()
    with serving(dashboard_command(port), port=port, env=demo_environment(), wait=120), \
            launched_chromium(sync_api) as browser:
        pg = browser.new_page()
        asked: list[str] = []
        pg.on("request", lambda r: asked.append(r.url.rsplit("/", 1)[-1]))
        pg.goto(f"http://127.0.0.1:{port}/method")
        pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=300_000)
        pg.get_by_role("heading", level=1).first.wait_for(timeout=60_000)
        pg.wait_for_function("() => !!window.__offevalChartCode", timeout=120_000)
        module = pg.evaluate("async () => { const m = await window.__offevalChartCode; "
                             "return m ? Object.keys(m).length : -1; }")
        assert module > 0  # the module loaded (a failed import leaves -1)
        assert pg.get_by_test_id("stPlotlyChart").count() == 0
        assert name in asked
