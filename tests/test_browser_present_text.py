"""Presentation mode at 1280×720 on the bundled demo, in Debian's headless Chromium: no metric value or label is
cut ("1,207,877" on Data was shown as "1,20…", "Online treatment arm" on Decisions as "Online treatment a…"),
Decisions' headline is the core's on the demo (an estimator with precision n/a says why, when the demo has one) and
fits its box, and the Data page's description of the demo states the
numbers its own metrics show."""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from browser_support import CHROMIUM, ROOT, dashboard_command, demo_environment, free_port, serving
from layout_checks import PAGE_JS

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

playwright = pytest.importorskip("playwright.sync_api")
LOAD = 420_000  # ms: the first computation of a page on the demo on a busy 2-core machine


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    port = free_port()
    with serving(dashboard_command(port), port=port, env=demo_environment(), wait=120):
        yield f"http://127.0.0.1:{port}"


def visit(pg, url: str) -> None:
    pg.goto(url)
    pg.get_by_role("heading", level=1).first.wait_for(timeout=LOAD)
    for _ in range(2):  # a query-parameter sync can start a second run right after the first
        pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=LOAD)
        time.sleep(0.4)
    pg.wait_for_function("() => Array.from(document.querySelectorAll('[data-testid=stPlotlyChart]'))"
                         ".every(el => el.querySelector('.main-svg'))", timeout=120_000)


def metrics(pg) -> dict[str, str]:
    labels = pg.get_by_test_id("stMetricLabel").all_inner_texts()
    values = pg.get_by_test_id("stMetricValue").all_inner_texts()
    return {k.strip(): v.strip() for k, v in zip(labels, values, strict=True)}


def _demo_headline() -> tuple[str, str]:
    """(estimator, its headline) of the Decisions page at its defaults on the bundled demo, from the core: the
    default reward and target policy, the default estimators at the sidebar's m = ∞ and 99 % level. The
    estimator is the first whose precision is n/a (no offline ship decision) if any, else the first."""
    import math

    import offeval_core as oe
    from offeval_core.analyses import decision_boxes
    from offeval_core.analyses.plan import decision_estimators
    from offeval_core.defaults import LEVEL
    from offeval_core.logs import summarize

    logs = oe.read_logs(ROOT / "data" / "logs.parquet")
    rates = summarize(logs).reward_rates
    reward = next(r for r in logs.rewards if rates[r] > 0)
    policy = oe.default_target_policy(logs)
    ests = list(decision_estimators("pbm", math.inf))
    moments = oe.reduce(logs, oe.Grid(rewards=(reward,), policies=(policy,)))
    res = decision_boxes(moments, estimators=ests, policy=policy, level=LEVEL, rewards=(reward,))
    heads = {e: res.estimator_takeaway(e) for e in res.estimators}
    na = [e for e, h in heads.items() if "precision n/a — no offline ship decision" in h]
    est = (na or list(heads))[0]
    return est, heads[est]


def test_presentation_text_is_whole_and_says_why(server, chromium):
    ctx = chromium.new_context(viewport={"width": 1280, "height": 720})
    pg = ctx.new_page()
    try:
        visit(pg, f"{server}/?present=1")
        assert pg.evaluate(PAGE_JS)["overflow"] == []
        rows = pq.ParquetFile(ROOT / "data" / "logs.parquet").metadata.num_rows   # the bundled demo's rows
        assert metrics(pg)["Impressions"] == f"{rows:,}"

        # the estimator the headline is about: one whose precision is n/a on the demo when there is one (the
        # longest headline, which says why), computed by the core on the demo's logs at the page's defaults
        est, expected = _demo_headline()
        visit(pg, f"{server}/decisions?present=1&dec_est={quote(est)}")
        assert pg.evaluate(PAGE_JS)["overflow"] == []
        head = pg.locator(".offeval-takeaway").first.inner_text()
        assert head.startswith(expected), (head, expected)
    finally:
        ctx.close()


def test_demo_description_states_the_numbers_of_the_page(server, chromium):
    ctx = chromium.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    try:
        visit(pg, f"{server}/")
        about = pg.get_by_text(re.compile(r"^In use\. ")).first.inner_text()
        m = metrics(pg)
        assert about.startswith(f"In use. {m['Experiments']} simulated A/B tests over {m['Days']} days of a "
                                f"short-video feed ({m['Sessions']} sessions), with 3 rewards (like, watch_complete, "
                                f"watch_time), the production and treatment rankers and "
                                f"{int(m['Target policies']) - 2} candidate rankers, plus the exact ground truth."), about
    finally:
        ctx.close()
