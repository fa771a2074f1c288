"""End-to-end, on a file with the user's own column names served by `offeval dashboard FILE --map …`:
links reproduce the view exactly (every page, compared by the charts' figure JSON in a fresh browser
context), Back / Forward step through changes, and an upload is mapped in the browser form, policies
included."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
from browser_support import CHROMIUM, ROOT, free_port, open_controls, open_popover, serving

from tests.user_names import MAP, user_named

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

playwright = pytest.importorskip("playwright.sync_api")
LOAD = 240_000
VIEWPORT = {"width": 1280, "height": 1400}

# each page with non-default controls (page controls and global ones)
VIEWS = {
    "data": "?pbm_p=0.6&pbm_ranks=12",
    "sensitivity": "?sens_alpha=0.05&sens_all=0&sens_metrics=dcg&level=0.9",
    "correlation": "?method=kendall&reward=completed&corr_row_pick=1",
    "dcg-vs-ndcg": "?agr_boot=0&agr_policies=production,treatment,cand_01&clip=64&t1_norm=top1",
    "decisions": "?dec_rel=1&estimators=dcg:1,ndcg:inf&dec_est=nDCG+(pbm,+Q̂)&level=0.95",
    "clip-tuning": "?clip_rule=mse&clip=16&policy=cand_02&discount=log2",
}
# default views that draw no chart on this world, and what they say instead: the small world has no
# significant online improvement at the paper's p < 0.001, so Sensitivity's default view has nothing to detect
# (the link's p < 0.05 draws the curves)
DEFAULT_WITHOUT_CHART = {"sensitivity": "has a significant online improvement (p < 0.001, effect > 0)"}


@pytest.fixture(scope="module")
def user_csv(tmp_path_factory):
    from offeval_core.simulate import preset_config, write_world

    world = tmp_path_factory.mktemp("world")
    write_world(preset_config("small"), world, seed=11)
    frame = user_named(pd.read_parquet(world / "logs.parquet"))
    path = tmp_path_factory.mktemp("user") / "my_logs.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def server(user_csv):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    port = free_port()
    cmd = [sys.executable, "-m", "offeval_core.cli", "dashboard", str(user_csv), "--map", MAP, "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    url = f"http://127.0.0.1:{port}"
    with serving(cmd, port=port, env=env, wait=90):
        yield url


def settle(pg, *, timeout: float = LOAD) -> None:
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
    time.sleep(0.3)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
    # every chart present has drawn (polled in the page: a chart of the previous view may vanish meanwhile)
    pg.wait_for_function("() => Array.from(document.querySelectorAll('[data-testid=stPlotlyChart]'))"
                         ".every(el => el.querySelector('.main-svg'))", timeout=60_000)


def open_page(pg, url: str) -> None:
    pg.goto(url)
    pg.get_by_test_id("stSidebar").wait_for(timeout=LOAD)
    pg.get_by_role("heading", level=1).first.wait_for(timeout=LOAD)
    settle(pg)


FIGURES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => JSON.stringify({
  data: gd.data,
  layout: {title: gd.layout.title, shapes: gd.layout.shapes, annotations: gd.layout.annotations,
           xaxis: gd.layout.xaxis && gd.layout.xaxis.title, yaxis: gd.layout.yaxis && gd.layout.yaxis.title}}))"""


COUNTS_JS = """() => [document.querySelectorAll('[data-testid=stPlotlyChart]').length,
  Array.from(document.querySelectorAll('.js-plotly-plot')).filter(gd => gd.data).length]"""


def figures(pg) -> list[dict]:
    """The figure JSON of every chart on the page, once at least one chart element is there (every page these
    tests open draws one; a page still computing after its first rerun has none yet) and every chart element
    has drawn its figure."""
    deadline = time.monotonic() + 120
    last = None
    while time.monotonic() < deadline:
        elements, drawn = pg.evaluate(COUNTS_JS)
        now = [json.loads(x) for x in pg.evaluate(FIGURES_JS)] if elements == drawn and elements > 0 else None
        if now is not None and now == last:
            return now
        last = now
        time.sleep(0.5)
    raise AssertionError("the charts were not drawn within 120 s")


def copied_link(pg) -> str:
    settle(pg)
    code = open_popover(pg, "Copy link to this view").get_by_test_id("stCode").first
    code.wait_for(timeout=30_000)
    link = code.inner_text().strip()
    pg.keyboard.press("Escape")
    return link


def errors(pg) -> list[str]:
    return pg.get_by_test_id("stAlertContentError").all_inner_texts()


@pytest.mark.parametrize("path", list(VIEWS))
def test_a_copied_link_reproduces_the_view_in_a_fresh_browser(server, chromium, tab, path):
    query = VIEWS[path]
    open_page(tab, f"{server}/{'' if path == 'data' else path}{query}")
    assert tab.get_by_test_id("stException").count() == 0
    assert not errors(tab), errors(tab)
    figs = figures(tab)
    assert figs, f"{path}: no chart"
    link = copied_link(tab)
    assert urlsplit(link).path == ("/" if path == "data" else f"/{path}")
    # every control given (except the unknown corr_row_pick, which is ignored) is in the copied link
    given = {k: v[0] for k, v in parse_qs(urlsplit(query).query).items() if k != "corr_row_pick"}
    got = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    assert got == given
    # the view differs from the default one: the controls matter
    other = chromium.new_context(viewport=VIEWPORT).new_page()
    try:
        open_page(other, f"{server}/{'' if path == 'data' else path}")
        if path in DEFAULT_WITHOUT_CHART:
            other.get_by_text(DEFAULT_WITHOUT_CHART[path]).wait_for(timeout=LOAD)
            assert other.get_by_test_id("stPlotlyChart").count() == 0
        else:
            assert figures(other) != figs, f"{path}: the non-default controls did not change any chart"
        open_page(other, link)
        assert figures(other) == figs
    finally:
        other.context.close()


def test_controls_set_in_the_page_travel_and_back_forward_step_through_them(server, chromium, tab):
    """The issue's example: Sensitivity with p < 0.01 and a non-default reward choice (all rewards is the
    default now, so the toggle goes to the sidebar's reward only), set with the mouse."""
    open_page(tab, f"{server}/sensitivity?sens_side=negatives")
    start = tab.url
    open_controls(tab)  # folded until opened; it stays open while its controls are used
    toggle = tab.get_by_test_id("stCheckbox").filter(has_text="All rewards").locator("input")
    assert toggle.is_checked()
    tab.get_by_test_id("stCheckbox").filter(has_text="All rewards").click()  # the toggle, as a user clicks it
    tab.wait_for_function("el => !el.checked", arg=toggle.element_handle(), timeout=10_000)  # the click reached it
    tab.wait_for_url("**sens_all=0*", timeout=60_000)
    settle(tab)
    after_toggle = tab.url
    assert "sens_all=0" in after_toggle
    slider = tab.get_by_test_id("stMain").get_by_role("slider").first
    slider.focus()
    tab.keyboard.press("ArrowLeft")  # p < 0.001 → p < 0.01
    settle(tab)
    assert "sens_alpha=0.01" in tab.url
    figs = figures(tab)
    link = copied_link(tab)
    other = chromium.new_context(viewport=VIEWPORT).new_page()
    try:
        open_page(other, link)
        assert figures(other) == figs
    finally:
        other.context.close()
    # Back steps to the view before the last change, then before the toggle; Forward returns
    tab.go_back()
    settle(tab)
    assert tab.url == after_toggle
    assert "sens_alpha" not in tab.url and not toggle.is_checked()
    tab.go_back()
    settle(tab)
    assert tab.url == start
    assert toggle.is_checked()
    tab.go_forward()
    settle(tab)
    assert not toggle.is_checked()


def test_upload_with_user_names_is_mapped_in_the_form_policies_included(server, tab, user_csv, tmp_path):
    open_page(tab, f"{server}/")
    tab.get_by_role("radio", name="Upload a file").click()
    settle(tab)
    tab.locator('input[type="file"]').set_input_files(str(user_csv))
    settle(tab)
    # guessed at upload: visit, pos, variant, date, test, user_type; policies by the pattern pos_*
    tab.get_by_text("Column mapping", exact=True).first.click()
    settle(tab)
    pattern = tab.get_by_role("textbox", name="Policy columns (pattern)")
    assert pattern.input_value() == "pos_*"  # guessed from rank = pos

    form = tab.get_by_test_id("stExpander").filter(has=tab.get_by_role("textbox", name="Policy columns (pattern)"))
    pattern.fill("")
    pattern.press("Enter")
    settle(tab)
    playwright.expect(form).to_contain_text("Preview: 0 target policies, 2 reward column(s)")
    pattern.fill("pos_*")
    pattern.press("Enter")
    settle(tab)
    playwright.expect(form).to_contain_text("Preview: 12 target policies, 2 reward column(s)")
    tab.get_by_role("button", name="Apply mapping").click()
    settle(tab)
    assert not errors(tab), errors(tab)
    assert tab.get_by_test_id("stMetric").filter(has_text="Target policies").get_by_test_id("stMetricValue") \
        .inner_text() == "12"
    tab.screenshot(path=str(tmp_path / "upload_mapped.png"))
    tab.goto(f"{server}/dcg-vs-ndcg")  # a new session: the upload is not in it; the served file is
    settle(tab)
    assert "cand_10" in json.dumps(figures(tab))


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_presentation_mode_chart_above_the_fold_and_arrow_keys_step_through_pages(server, chromium, size):
    w, h = size
    ctx = chromium.new_context(viewport={"width": w, "height": h})
    pg = ctx.new_page()
    try:
        # p < 0.05: the small world has no online improvement at the default p < 0.001 (no chart to show)
        pg.goto(f"{server}/sensitivity?present=1&sens_alpha=0.05&deck=sensitivity,decisions,clip-tuning")
        for path in ("sensitivity", "decisions", "clip-tuning"):
            pg.wait_for_url(f"**/{path}*", timeout=LOAD)
            pg.get_by_role("heading", level=1).first.wait_for(timeout=LOAD)
            settle(pg)
            figures(pg)
            pg.wait_for_url("**present=1*", timeout=30_000)  # the settings travel with the slide
            pg.screenshot(path=f"/tmp/offeval-present-{path}-{w}x{h}.png")
            box = pg.get_by_test_id("stPlotlyChart").first.bounding_box()
            assert box["y"] >= 0 and box["y"] + box["height"] <= h, (path, box)  # the whole chart is visible
            assert "present=1" in pg.url
            captions = pg.get_by_test_id("stMain").get_by_test_id("stCaptionContainer")
            assert all(captions.nth(i).is_hidden() for i in range(captions.count()))  # captions folded
            pg.locator("body").press("ArrowRight")
        # the last slide stays put; ArrowLeft goes back
        time.sleep(1)
        assert "/clip-tuning" in pg.url
        pg.locator("body").press("ArrowLeft")
        pg.wait_for_url("**/decisions*", timeout=LOAD)
    finally:
        ctx.close()
