"""End-to-end in Debian's Chromium, on files served by `offeval dashboard FILE`: the Candidates page on offline-only
logs with `pos_*` candidates (forest plot, takeaway, the candidate to A/B test next; a refusing page links to it),
and the Open Bandit propensity log on Decisions, Clip tuning and DCG vs nDCG (BTS's offline estimate and CI next to
its online click rate; the link from a page that cannot apply). Screenshots at 1280 × 1400 are saved in the
test's temporary directory."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from browser_support import CHROMIUM, ROOT, free_port, serving

from tests.dashboard_support import write_small_world
from tests.own_logs import MAP, offline_only, write

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect
LOAD = 240_000
OPEN_BANDIT = ROOT / "tests" / "fixtures" / "open_bandit" / "open_bandit.csv.gz"


def _serve(args: list[str]):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    port = free_port()
    cmd = [sys.executable, "-m", "offeval_core.cli", "dashboard", *args, "--port", str(port)]
    return serving(cmd, port=port, env={**os.environ, "PYTHONPATH": str(ROOT)}, wait=120), f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def offline_server(tmp_path_factory):
    world = pd.read_parquet(write_small_world(tmp_path_factory.mktemp("world")) / "logs.parquet")
    path = write(offline_only(world), tmp_path_factory.mktemp("offline") / "candidates.csv")
    ctx, url = _serve([str(path), "--map", MAP, "--reward", "clicked", "--reward", "completed"])
    with ctx:
        yield url


@pytest.fixture(scope="module")
def bandit_server():
    ctx, url = _serve([str(OPEN_BANDIT)])
    with ctx:
        yield url


def settle(pg) -> None:
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=LOAD)
    time.sleep(0.3)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=LOAD)


def open_page(pg, url: str) -> None:
    pg.goto(url)
    pg.get_by_role("heading", level=1).first.wait_for(timeout=LOAD)
    settle(pg)


def metric_value(pg, label: str) -> str:
    box = pg.get_by_test_id("stMetric").filter(has=pg.get_by_test_id("stMetricLabel").get_by_text(label, exact=True))
    return box.get_by_test_id("stMetricValue").inner_text().strip()


def test_candidates_page_in_the_browser(tab, offline_server, tmp_path):
    open_page(tab, f"{offline_server}/candidates")
    titles = tab.get_by_test_id("stPlotlyChart").locator(".gtitle")
    expect(titles).to_have_text([re.compile(r"^3 candidates vs the logging policy — clicked, DCG \(pbm, Q̂ m=\d+\)")],
                                timeout=LOAD)
    take = tab.locator(".offeval-takeaway").first.inner_text()
    assert take.startswith("A/B test ranker_v2 next: its offline DCG"), take
    assert metric_value(tab, "A/B test next") == "ranker_v2"
    assert metric_value(tab, "Candidates") == "3"
    # the forest plot's rows are the three candidates, the logging policy's copy is not one of them
    ticks = tab.get_by_test_id("stPlotlyChart").locator(".ytick text").evaluate_all("els => els.map(e => e.textContent)")
    assert sorted(set(ticks)) == ["ranker_v2", "ranker_v3", "ranker_v4"]
    tab.screenshot(path=str(tmp_path / "candidates.png"))


def test_a_page_that_needs_an_ab_test_links_to_candidates(tab, offline_server):
    open_page(tab, f"{offline_server}/decisions")
    expect(tab.get_by_test_id("stAlertContentWarning")).to_contain_text("needs an A/B test", timeout=LOAD)
    tab.get_by_test_id("stPageLink").get_by_text("Candidates", exact=False).click()
    tab.wait_for_url(re.compile(r"/candidates"), timeout=LOAD)
    expect(tab.get_by_role("heading", level=1).first).to_have_text("Candidates before an A/B test", timeout=LOAD)


def test_open_bandit_decisions_show_bts_estimate_next_to_its_online_click_rate(tab, bandit_server, tmp_path):
    open_page(tab, f"{bandit_server}/decisions")
    expect(tab.get_by_test_id("stPlotlyChart").locator(".gtitle")).to_have_text(
        ["Offline vs online decisions per A/B test — bts, IS (propensity)"], timeout=LOAD)
    assert metric_value(tab, "Offline estimate") == "0.004563"
    assert metric_value(tab, "Online treatment arm") == "0.0042"
    assert metric_value(tab, "Offline 99% CI") == "[-0.0008256, 0.009951]"
    assert metric_value(tab, "Covers the online mean") == "yes"
    tab.screenshot(path=str(tmp_path / "open_bandit_decisions.png"))


def test_open_bandit_clip_tuning_and_the_link_from_dcg_vs_ndcg(tab, bandit_server, tmp_path):
    open_page(tab, f"{bandit_server}/clip-tuning")
    expect(tab.locator(".offeval-takeaway").first).to_contain_text("the CIS estimate of bts is 0.005302", timeout=LOAD)
    # the headline above the chart; the rest of the takeaway, the online comparison, under it
    expect(tab.get_by_test_id("stMain")).to_contain_text("inside the offline 99% CI")
    tab.screenshot(path=str(tmp_path / "open_bandit_clip_tuning.png"))
    open_page(tab, f"{bandit_server}/dcg-vs-ndcg")
    expect(tab.get_by_test_id("stAlertContentInfo")).to_contain_text("DCG and nDCG score a ranking", timeout=LOAD)
    tab.get_by_test_id("stPageLink").get_by_text("Decisions", exact=True).click()
    tab.wait_for_url(re.compile(r"/decisions"), timeout=LOAD)
    expect(tab.get_by_test_id("stPlotlyChart").locator(".gtitle")).to_have_text(
        ["Offline vs online decisions per A/B test — bts, IS (propensity)"], timeout=LOAD)
