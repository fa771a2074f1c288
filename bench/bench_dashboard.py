"""Headless-browser benchmark of the dashboard: a real ``streamlit run`` server on the bundled demo, in Debian's
Chromium. Pages opened by URL are opened as a user's browser opens them, with no DevTools client attached
(``bench/plain_browser.py``; ``--browser devtools`` opens them through Playwright, whose debugger bookkeeping makes
Streamlit's chart code cost a new tab about twice as much); interactions are driven through Playwright. Prints
median and p95 (seconds) of:

- the first open after the server starts (reads, validates and prepares the demo);
- each page opened by URL: cold (the first time the page is opened on this server, right after the first
  open, while the server prepares the pages' default results in the background) and warm (a new browser tab
  on the same server), against the Method page (no analysis: the framework's floor) opened on the idle
  server once that preparation has finished (also printed: the Method page during the preparation, and
  when the preparation finished);
- in-app navigation between pages (sidebar links, warm);
- the clip slider → updated chart on the Clip tuning, Sensitivity and Decisions pages;
- a new discount combination (the target discount D changed in the sidebar to a model not seen yet) →
  updated Clip tuning chart (three times), then once on every analysis page (alone, on a server whose background
  preparation has finished: `--only discount`);
- a restart: the first chart of the Sensitivity and Clip tuning pages on a new server whose moments cache is
  empty (the baseline, measured in the same run) and on a new server after that one filled the cache, for the
  demo and for a served file (``offeval dashboard FILE``), with the ratio filled / empty;
- the framework's floor: a bare Streamlit page (a title and a line of text) and the same page with one small
  Plotly chart, each opened by URL as the pages are (a new browser context), and the difference: what any page
  with a chart pays for Streamlit's chart code in a new tab, whatever it computes; in both browsers.

    python bench/bench_dashboard.py [--repeat 3] [--changes 8] [--browser {plain,devtools}]
                                    [--only {restart,floor,discount}]

A page is "done" when its title is drawn, the script run has finished and every chart is drawn.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from browser_support import (  # noqa: E402  (the server and browser set-up the browser tests use)
    ARGS,
    CHROMIUM,
    dashboard_command,
    demo_environment,
    free_port,
    launched_chromium,
    serving,
)
from plain_browser import DONE_JS, PlainChromium  # noqa: E402

from dashboard.pages import CHARTLESS_PAGES  # noqa: E402  (the dashboard's pages, defined once)
from dashboard.pages import page as dashboard_page  # noqa: E402

# url path → (navigation label, title); the Data page is the default page, at the root
PAGES = {path: (dashboard_page(path).label, dashboard_page(path).heading)
         for path in ("", "sensitivity", "correlation", "dcg-vs-ndcg", "decisions", "clip-tuning", "method")}
TIMEOUT = 600_000
DISCOUNT_PAGES = {**{path: title for path, (_, title) in PAGES.items() if path not in ("", "method")},
                  **{path: dashboard_page(path).heading for path in ("candidates", "which-estimator")}}
"""The analysis pages a new discount D is measured on (url path → title)."""


CHARTLESS = frozenset({*(dashboard_page(path).heading for path in CHARTLESS_PAGES), "Bare page"})
"""Titles of the pages whose default view draws no chart; every other page is done only once it shows one."""


def done(pg, title: str) -> None:
    """Wait until the page is done (:data:`plain_browser.DONE_JS`: its title drawn, the script run finished,
    every chart drawn)."""
    pg.wait_for_function(DONE_JS, arg=[title, title not in CHARTLESS], timeout=TIMEOUT, polling=20)


def open_by_url(browser, url: str, title: str, *, before=None) -> float:
    """Seconds from opening ``url`` in a new tab with an empty cache to the page done: in a plain Chromium (no
    DevTools client, as users open it) or in a new context of Playwright's; ``before`` (say, starting the server)
    is called with the browser ready, right before it opens the page."""
    if isinstance(browser, PlainChromium):
        return browser.open(url, title, title not in CHARTLESS, before=before)
    ctx = browser.new_context(viewport={"width": 1280, "height": 1400})
    pg = ctx.new_page()
    try:
        if before is not None:
            before()
        t0 = time.perf_counter()
        pg.goto(url)
        done(pg, title)
        return time.perf_counter() - t0
    finally:
        ctx.close()


def prepared(browser, base: str) -> float:
    """When (``time.perf_counter()``) the sidebar of a freshly opened Method page no longer says that the
    pages are being prepared in the background; fails after 600 s."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ctx = browser.new_context(viewport={"width": 1280, "height": 1400})
        pg = ctx.new_page()
        try:
            pg.goto(f"{base}/method")
            done(pg, "Method")
            if "preparing the analysis pages" not in pg.get_by_test_id("stSidebar").inner_text():
                return time.perf_counter()
        finally:
            ctx.close()
        time.sleep(1.0)
    raise RuntimeError("the background preparation did not finish within 600 s")


def stats(xs) -> str:
    xs = np.asarray(xs, dtype=float)
    return f"median {np.median(xs):.2f} s, p95 {np.percentile(xs, 95):.2f} s (n = {len(xs)})"


def slider_changes(pg, n: int) -> list[float]:
    """Move the sidebar's clip slider one step left ``n`` times; seconds until the rerun it triggers has
    finished (the URL carries the new clip value, the script is idle, every chart is drawn and a chart's
    clip marker, where there is one, shows the new value)."""
    thumb = pg.get_by_test_id("stSidebar").get_by_role("slider").first
    times = []
    for _ in range(n):
        old = pg.evaluate("() => new URLSearchParams(location.search).get('clip')")
        thumb.focus()
        t0 = time.perf_counter()
        pg.keyboard.press("ArrowLeft")
        pg.wait_for_function(
            """(old) => {
                if (new URLSearchParams(location.search).get('clip') === old) return false;
                const app = document.querySelector('[data-testid="stApp"]');
                if (app.getAttribute('data-test-script-state') !== 'notRunning') return false;
                const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
                if (!charts.length || ![...charts].every(c => c.querySelector('.main-svg'))) return false;
                const v = document.querySelector('[data-testid="stSidebar"] [data-testid="stSliderThumbValue"]');
                const want = 'm = ' + v.innerText.trim();
                const marks = [...document.querySelectorAll('[data-testid="stPlotlyChart"] .annotation-text')]
                    .map(a => a.textContent.trim()).filter(t => t.startsWith('m = '));
                return marks.length === 0 || marks.includes(want);
            }""", arg=old, timeout=TIMEOUT, polling=10)
        times.append(time.perf_counter() - t0)
    return times


def new_discount(pg, d: str, title: str) -> float:
    """Seconds from choosing target discount ``d`` in the sidebar to the updated page (URL, script run, charts)."""
    box = pg.get_by_test_id("stSidebar").get_by_role("combobox", name="Target discount D")
    box.click()
    pg.keyboard.type(d)
    t0 = time.perf_counter()
    pg.keyboard.press("Enter")
    pg.wait_for_function("(d) => new URLSearchParams(location.search).get('discount') === d", arg=d, timeout=TIMEOUT)
    done(pg, title)
    return time.perf_counter() - t0


def fresh_models(n: int) -> list[str]:
    """``n`` distinct exponential discount models that an earlier run has almost surely not used (λ drawn from
    65,000 values): a model seen before is in the persistent moments cache, which would time reading it, not
    computing it.

    >>> len(set(fresh_models(7)))
    7
    """
    lam = np.random.default_rng().choice(np.arange(30_000, 95_000), size=n, replace=False) / 100_000
    return [f"exponential:{x:.5f}" for x in lam]


def discount_table(pg, base: str) -> None:
    """A new discount D (a model no page has seen yet) on every analysis page (``DISCOUNT_PAGES``), once each:
    the seconds to the updated page, as a table."""
    print("| page | new D | seconds |")
    print("|---|---|---|")
    for (path, title), d in zip(DISCOUNT_PAGES.items(), fresh_models(len(DISCOUNT_PAGES)), strict=True):
        pg.goto(f"{base}/{path}")
        done(pg, title)
        print(f"| {title} | {d} | {new_discount(pg, d, title):.2f} s |")


def discounts_when_prepared(browser) -> None:
    """:func:`discount_table` on a new server on the demo once its background preparation has finished: what a
    new discount costs each page, without the preparation's work in the way."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = demo_environment() | {"PYTHONPATH": str(ROOT)}
    with serving(dashboard_command(port), port=port, env=env):
        ctx = browser.new_context(viewport={"width": 1280, "height": 1400})
        pg = ctx.new_page()
        pg.goto(f"{base}/")
        done(pg, "Data")
        t0 = time.perf_counter()
        print(f"background preparation finished {prepared(browser, base) - t0:.1f} s after the Data page was drawn")
        discount_table(pg, base)
        ctx.close()


RESTART_PAGES = ("sensitivity", "clip-tuning")


def serve_command(port: int) -> list[str]:
    """What ``make run`` / ``offeval dashboard`` starts: ``python -m dashboard.serve run dashboard/app.py …``."""
    cmd = dashboard_command(port)
    return [cmd[0], "-m", "dashboard.serve", *cmd[3:]]


def restarts(browser) -> None:
    """The first chart of each of ``RESTART_PAGES`` on a new server started as ``make run`` starts it (each page
    opened by URL, in order, right after the server is healthy): with an empty cache (the baseline), then on
    another new server after the first one filled the cache (moments and validated logs); for the demo and for a
    served file. Also printed: the seconds from starting the server process to its health endpoint answering."""
    print("| data | page | empty cache | filled cache | filled / empty |")
    print("|---|---|---|---|---|")
    started = {}
    for what, extra in (("demo", {}), ("served file", {"OFFEVAL_DATA": str(ROOT / "data" / "logs.parquet")})):
        with tempfile.TemporaryDirectory(prefix="offeval-bench-cache-") as cache:
            env = demo_environment() | {"PYTHONPATH": str(ROOT), "OFFEVAL_CACHE": "1", "OFFEVAL_CACHE_DIR": cache,
                                        **extra}
            times = {}
            for state in ("empty", "filled"):
                port = free_port()
                with contextlib.ExitStack() as server:
                    def start(state=state, port=port, server=server, what=what, env=env) -> None:
                        t0 = time.perf_counter()
                        server.enter_context(serving(serve_command(port), port=port, env=env, wait=300))
                        started[what, state] = time.perf_counter() - t0
                    for i, path in enumerate(RESTART_PAGES):
                        times[state, path] = open_by_url(browser, f"http://127.0.0.1:{port}/{path}", PAGES[path][1],
                                                         before=None if i else start)
            for path in RESTART_PAGES:
                empty, filled = times["empty", path], times["filled", path]
                print(f"| {what} | {PAGES[path][1]} | {empty:.2f} s | {filled:.2f} s | {filled / empty:.2f} |")
    print("server start (process start → health endpoint): " + ", ".join(
        f"{what} {state} {t:.2f} s" for (what, state), t in started.items()))


BARE_PAGES = {  # what → (title, app)
    "without a chart": ("Bare page", 'import streamlit as st\nst.title("Bare page")\nst.write("One line of text.")\n'),
    "with one chart": ("Bare chart", 'import plotly.graph_objects as go\nimport streamlit as st\n'
                                     'st.title("Bare chart")\n'
                                     'st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])), key="c")\n'),
}


def framework_floor(openers: dict, repeat: int) -> None:
    """Median seconds to open a bare Streamlit page by URL without and with one Plotly chart (``BARE_PAGES``,
    served one after the other by ``streamlit run`` like the dashboard; the first open of each server is left out),
    and their difference: the chart code's cost in a new tab, which no page with a chart can go below; in each
    browser of ``openers`` (what → browser)."""
    medians = {}
    with tempfile.TemporaryDirectory(prefix="offeval-bench-bare-") as tmp:
        for what, (title, code) in BARE_PAGES.items():
            app = Path(tmp) / f"{what.replace(' ', '_')}.py"
            app.write_text(code, encoding="utf-8")
            port = free_port()
            with serving(dashboard_command(port, str(app)), port=port, env=os.environ.copy()):
                for how, browser in openers.items():
                    times = [open_by_url(browser, f"http://127.0.0.1:{port}/", title) for _ in range(repeat + 1)][1:]
                    medians[how, what] = float(np.median(times))
                    print(f"bare Streamlit page {what}, by URL, {how}: {stats(times)}")
    for how in openers:
        print(f"the chart code in a new tab, {how} (with one chart − without): "
              f"{medians[how, 'with one chart'] - medians[how, 'without a chart']:+.2f} s")


BROWSERS = {"plain": "Chromium with no DevTools client, as users open a page (bench/plain_browser.py)",
            "devtools": "Chromium driven by Playwright over the DevTools protocol"}
ONLY = {"restart": "the restart measurement", "floor": "the framework's floor",
        "discount": "a new discount on every analysis page of a prepared server"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="warm opens per page")
    ap.add_argument("--changes", type=int, default=8, help="slider changes per page")
    ap.add_argument("--browser", choices=list(BROWSERS), default="plain",
                    help="what opens the pages by URL: " + "; ".join(f"{k}: {v}" for k, v in BROWSERS.items()))
    ap.add_argument("--only", choices=list(ONLY), default=None,
                    help="run only one measurement: " + "; ".join(f"{k}: {v}" for k, v in ONLY.items()))
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
        return 1
    from playwright import sync_api

    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; "
          f"dashboard on the bundled demo (data/logs.parquet); pages opened by URL in {BROWSERS[args.browser]}\n")
    with launched_chromium(sync_api) as browser, PlainChromium(CHROMIUM, ARGS) as plain:
        opener = plain if args.browser == "plain" else browser
        openers = {"no DevTools client": plain, "Playwright": browser}
        if args.only:
            {"restart": lambda: restarts(opener), "floor": lambda: framework_floor(openers, max(args.repeat, 5)),
             "discount": lambda: discounts_when_prepared(browser)}[args.only]()
        else:
            whole_run(browser, opener, args)
            print("\nrestart: first chart of a page on a new server, moments cache empty vs filled by an earlier server")
            restarts(opener)
            print("\nthe framework's floor: Streamlit alone, no offeval code")
            framework_floor(openers, max(args.repeat, 5))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


def whole_run(browser, opener, args) -> None:
    """Everything but the restarts and the floor, on one server: opens by URL in ``opener``, interactions in
    Playwright's ``browser``."""
    port = free_port()
    env = demo_environment() | {"PYTHONPATH": str(ROOT)}
    base = f"http://127.0.0.1:{port}"
    healthy = []
    with contextlib.ExitStack() as server:
        def start() -> None:
            server.enter_context(serving(dashboard_command(port), port=port, env=env))
            healthy.append(time.perf_counter())
        first = open_by_url(opener, f"{base}/method", "Method", before=start)
        started = healthy[0]
        print(f"first open after the server started (Method page; reads, validates and prepares the demo): "
              f"{first:.2f} s")
        busy = [open_by_url(opener, f"{base}/method", "Method") for _ in range(args.repeat)]
        print(f"Method page by URL while the pages are prepared in the background: {stats(busy)}")
        rows = []
        for path, (_, title) in PAGES.items():
            if path == "method":
                continue
            cold = open_by_url(opener, f"{base}/{path}", title)
            warm = [open_by_url(opener, f"{base}/{path}", title) for _ in range(args.repeat)]
            rows.append((title, cold, float(np.median(warm))))
        ready = prepared(browser, base) - started
        print(f"background preparation of the pages' defaults finished {ready:.1f} s after the server answered")
        floor = [open_by_url(opener, f"{base}/method", "Method") for _ in range(args.repeat)]
        method = float(np.median(floor))
        print(f"Method page by URL on the idle server (the floor): {stats(floor)}\n")
        print("| page | cold by URL | − Method | warm by URL (median) | − Method |")
        print("|---|---|---|---|---|")
        for title, cold, w in rows:
            print(f"| {title} | {cold:.2f} s | {cold - method:+.2f} s | {w:.2f} s | {w - method:+.2f} s |")

        ctx = browser.new_context(viewport={"width": 1280, "height": 1400})
        pg = ctx.new_page()
        pg.goto(f"{base}/")
        done(pg, "Data")
        nav = []
        for _ in range(2):
            for path, (label, title) in PAGES.items():
                link = pg.get_by_test_id("stSidebarNav").get_by_role("link", name=label, exact=True)
                t0 = time.perf_counter()
                link.click()
                pg.wait_for_function("(p) => location.pathname.replace(/^\\/+|\\/+$/g, '') === p", arg=path,
                                     timeout=TIMEOUT)
                done(pg, title)
                nav.append(time.perf_counter() - t0)
        print(f"\nin-app navigation (sidebar links, every page twice): {stats(nav)}")

        for path in ("clip-tuning", "sensitivity", "decisions"):
            title = PAGES[path][1]
            pg.goto(f"{base}/{path}?clip=inf")
            done(pg, title)
            times = slider_changes(pg, args.changes)
            print(f"clip slider → updated chart, {title}: {stats(times)}")

        pg.goto(f"{base}/clip-tuning")
        done(pg, "Clip tuning")
        combo = [new_discount(pg, d, "Clip tuning") for d in fresh_models(3)]
        print(f"new discount D (a reduce of all 12 policies × 14 clips) → updated Clip tuning page: {stats(combo)}")
        print("new discount D → updated page, on every analysis page (a model no page has seen yet, once each):")
        discount_table(pg, base)
        ctx.close()


if __name__ == "__main__":
    sys.exit(main())
