"""In a real browser: an uploaded team export whose A/B arm sits in a column offeval cannot name is asked about
before anything is computed, with what was understood so far; answered in the column mapping, the Data page
shows what offeval understood (the arm labels, the logging policy, the default target, the rewards and why)."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_support import CHROMIUM, choose_option, demo_environment, free_port, serving
from browser_support import dashboard_command as command

from tests.export_fixtures import demo_sample, team_export

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

playwright = pytest.importorskip("playwright.sync_api")
LOAD = 240_000


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    port = free_port()
    with serving(command(port), port=port, env=demo_environment(), wait=60):
        yield f"http://127.0.0.1:{port}"


def settle(pg, *, timeout: float = LOAD) -> None:
    pg.get_by_test_id("stSidebar").wait_for(timeout=timeout)
    pg.get_by_role("heading", level=1).first.wait_for(timeout=timeout)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


def test_the_data_page_asks_then_says_what_it_understood(server, tab, tmp_path):
    export, schema = team_export(demo_sample(80), arm_column="cohort")
    path = tmp_path / "cohort.csv"
    export.to_csv(path, index=False)
    tab.goto(f"{server}/")
    settle(tab)
    tab.get_by_role("radio", name="Upload a file").click()
    settle(tab)
    tab.get_by_test_id("stMain").locator('input[type="file"]').first.set_input_files(str(path))
    asked = tab.get_by_test_id("stAlert").filter(has_text="Before anything is computed")
    asked.first.wait_for(timeout=LOAD)
    settle(tab)
    playwright.expect(asked.first).to_contain_text("column 'cohort' looks like the A/B arm (labels 'A' and 'B'")
    so_far = tab.get_by_test_id("stExpander").filter(has_text="What offeval understood so far")
    playwright.expect(so_far).to_contain_text("clicked, completed (named like a reward)")
    playwright.expect(so_far).to_contain_text("probably the A/B arm: choose cohort as arm in the column mapping")
    assert tab.get_by_text("Validation report").count() == 0  # nothing computed
    tab.screenshot(path=str(tmp_path / "asks.png"))

    arm = tab.get_by_test_id("stSelectbox").filter(has=tab.get_by_text("arm", exact=True))
    choose_option(tab, arm, "cohort")
    settle(tab)
    labels = tab.get_by_role("textbox", name="Arm labels")
    labels.fill("control=A,treatment=B")
    labels.press("Enter")
    settle(tab)
    tab.get_by_role("button", name="Apply mapping").click()
    tab.get_by_text("Validation report — uploaded file cohort.csv").first.wait_for(timeout=LOAD)
    settle(tab)
    understood = tab.get_by_test_id("stExpander").filter(has_text="The same summary")
    counts = schema.groupby("arm")["session_id"].nunique()
    playwright.expect(understood).to_contain_text(
        f"control {counts['control']:,} sessions, treatment {counts['treatment']:,} sessions (column cohort, mapped "
        "by you; A → control, B → treatment, labels mapped by you)")
    playwright.expect(understood).to_contain_text(
        "ranker_v2 (no policy named treatment; the first policy that is not the logging policy (current is))")
    playwright.expect(understood).to_contain_text("current (rank, the logging policy), ranker_v2 (rank)")
    assert tab.get_by_test_id("stException").count() == 0
    tab.screenshot(path=str(tmp_path / "understood.png"))
    print(f"\nscreenshots in {tmp_path}")
