"""The benchmark's plain browser (``bench/plain_browser.py``: Chromium with no DevTools client, a content script that
reports when the page is done) on a real ``streamlit run`` server: it reports only once the title, the finished run
and the chart are all there, the time it reports is the page's own (from the navigation, so never more than the
open took), and a page that never gets done is an error, not a number."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from browser_support import ARGS, CHROMIUM, ROOT, dashboard_command, free_port, serving

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

sys.path.insert(0, str(ROOT / "bench"))
from plain_browser import PlainChromium  # noqa: E402

APP = """import time
import plotly.graph_objects as go
import streamlit as st
st.title("Plain page")
time.sleep(1.5)  # the chart comes 1.5 s after the title: a page is done only once it is drawn
if st.query_params.get("chart") != "no":
    st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])), key="c")
"""


def test_the_plain_browser_reports_a_page_done_once_its_chart_is_drawn(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    app = tmp_path / "plain_app.py"
    app.write_text(APP, encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with serving(dashboard_command(port, str(app)), port=port, env=os.environ.copy(), wait=120):
        with PlainChromium(CHROMIUM, ARGS, timeout=120) as browser:
            t0 = time.perf_counter()
            seconds = browser.open(url, "Plain page", True)
            took = time.perf_counter() - t0
            assert 1.5 < seconds < took  # after the sleep before the chart; within the open (browser start excluded)
            started = []
            assert browser.open(url, "Plain page", True, before=lambda: started.append(time.perf_counter())) > 1.5
            assert len(started) == 1  # called once, before the page is opened

            assert browser.open(f"{url}?chart=no", "Plain page", False) > 1.5  # a page without a chart, told so

        with PlainChromium(CHROMIUM, ARGS, timeout=8) as browser:
            with pytest.raises(RuntimeError, match="no report from"):
                browser.open(url, "A title this page never shows", True, tries=1)
            with pytest.raises(RuntimeError, match="no report from"):  # its run ended, but a chart was expected
                browser.open(f"{url}?chart=no", "Plain page", True, tries=1)
