"""The acceptance layout test, in Debian's headless Chromium: every page × {normal 1280×800, presentation
1280×720, presentation 1920×1080} × {the bundled demo, a user CSV with its own column names, the Open Bandit
propensity log}: no visible text shows markup or an HTML entity; in presentation mode the first chart starts
above the fold; no title or headline runs out of its box; a chart's text annotations (labels, titles, markers)
do not overlap; every decimal number in a table has at most 4 significant digits (whole numbers — counts, ranks,
ids — excepted). The exported SVG of each page's first chart passes the same checks on its text nodes, and its
footer names the dataset (tests/layout_checks.py holds the checks).

One server per dataset, every page visited in one browser per viewport; the first visit of a page computes its
results, the other viewports read them from the server's caches."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from browser_support import CHROMIUM, ROOT, dashboard_command, demo_environment, free_port, serving
from layout_checks import PAGE_JS, SVG_JS, page_problems, svg_problems

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

playwright = pytest.importorskip("playwright.sync_api")
LOAD = 420_000  # ms: a page's first computation on the demo on a busy 2-core machine
PAGES = ("", "candidates", "sensitivity", "correlation", "dcg-vs-ndcg", "estimator-lab", "decisions", "clip-tuning",
         "which-estimator", "method")
NO_CHART = {"demo": {"method"}, "user csv": {"method"},
            "open bandit": {"method", "dcg-vs-ndcg", "", "sensitivity"}}
"""Pages without a chart: Method (a checklist), DCG vs nDCG on a propensity log (it says why the metrics do
not apply and links to the pages that do), Data on a log of one impression per session (no position-bias
curve can be learnt from it; it says so), and Sensitivity on the Open Bandit sample (none of its 21 (campaign, day)
settings has a significant online improvement at the paper's p < 0.001, so there is nothing to detect; it says
so)."""
VIEWPORTS = {"normal 1280×800": (1280, 800, False), "presentation 1280×720": (1280, 720, True),
             "presentation 1920×1080": (1920, 1080, True)}
OPEN_BANDIT = ROOT / "tests" / "fixtures" / "open_bandit" / "open_bandit.csv.gz"


def _user_csv(tmp: Path) -> Path:
    from export_fixtures import demo_sample, team_export

    export, _ = team_export(demo_sample(40))  # visit, pos, video, clicked, completed, date, test, bucket A/B, pos_*
    path = tmp / "team_export.csv"
    export.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module", params=["demo", "user csv", "open bandit"])
def served(request, tmp_path_factory):
    """(name, url) of a dashboard server on one dataset; one at a time (module scope, parametrised)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    port = free_port()
    if request.param == "demo":
        cmd, env = dashboard_command(port), demo_environment()
    else:
        path = _user_csv(tmp_path_factory.mktemp("user")) if request.param == "user csv" else OPEN_BANDIT
        cmd = [sys.executable, "-m", "offeval_core.cli", "dashboard", str(path), "--port", str(port)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with serving(cmd, port=port, env=env, wait=180):
        yield request.param, f"http://127.0.0.1:{port}"


def settle(pg) -> None:
    for _ in range(2):  # a query-parameter sync can start a second run right after the first
        pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=LOAD)
        time.sleep(0.4)
    pg.wait_for_function("() => Array.from(document.querySelectorAll('[data-testid=stPlotlyChart]'))"
                         ".every(el => el.querySelector('.main-svg'))", timeout=120_000)
    time.sleep(0.3)


def visit(pg, url: str, *, chart: bool) -> None:
    pg.goto(url)
    pg.get_by_role("heading", level=1).first.wait_for(timeout=LOAD)
    if chart:
        pg.get_by_test_id("stPlotlyChart").first.wait_for(timeout=LOAD)
    settle(pg)


def exported_svg_problems(pg, browser, where: str, tmp: Path) -> list[str]:
    """Download the first chart's SVG export (the page's own button) and check it in a blank page."""
    button = pg.get_by_test_id("stDownloadButton").filter(has_text="SVG").first
    with pg.expect_download(timeout=180_000) as info:
        button.click()
    path = tmp / f"{where.replace(' ', '_').replace('/', '_')}.svg"
    info.value.save_as(path)
    raw = path.read_text(encoding="utf-8")
    blank = browser.new_page(viewport={"width": 1400, "height": 1400})
    try:
        blank.set_content(f"<html><body style='margin:0'>{raw}</body></html>")
        return svg_problems(raw, blank.evaluate(SVG_JS), where)
    finally:
        blank.close()


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_every_page_is_readable_and_its_export_too(served, chromium, viewport, tmp_path):
    dataset, url = served
    width, height, present = VIEWPORTS[viewport]
    ctx = chromium.new_context(viewport={"width": width, "height": height}, accept_downloads=True)
    pg = ctx.new_page()
    problems: list[str] = []
    try:
        for path in PAGES:
            where = f"{dataset} · {viewport} · /{path}"
            chart = path not in NO_CHART[dataset]
            visit(pg, f"{url}/{path}" + ("?present=1" if present else ""), chart=chart)
            assert pg.get_by_test_id("stException").count() == 0, (where, pg.get_by_test_id("stException")
                                                                    .all_inner_texts())
            state = pg.evaluate(PAGE_JS)
            problems += page_problems(state, where, fold=present and chart)
            top = f"{state['charts'][0]['chartTop']:.0f}" if state["charts"] else "-"
            print(f"{where}: first chart at y = {top}, {len(state['charts'])} charts, {len(state['tables'])} tables")
            pg.screenshot(path=str(tmp_path / f"{(path or 'data')}.png"))
            if viewport.startswith("normal") and chart:
                problems += exported_svg_problems(pg, chromium, where, tmp_path)
    finally:
        ctx.close()
    assert not problems, "\n".join(problems)
