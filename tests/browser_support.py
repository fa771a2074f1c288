"""What the browser tests and the dashboard benchmark (bench/bench_dashboard.py) share: Debian's chromium
with the flags these machines need, a free loopback port, the command and environment of a dashboard server
on the bundled demo, and a real server that is healthy before a test starts and stopped after it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("BROWSER_PATH", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dashboard_command(port: int, app: str = "dashboard/app.py") -> list[str]:
    """``streamlit run <app>`` (the dashboard unless another script is named) headless on a loopback ``port`` (no
    usage stats, no file watcher)."""
    return [sys.executable, "-m", "streamlit", "run", app, "--server.headless", "true",
            "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none"]


def demo_environment() -> dict[str, str]:
    """This process's environment without ``OFFEVAL_DEMO_DIR``: the server always runs on the bundled demo."""
    return {k: v for k, v in os.environ.items() if k != "OFFEVAL_DEMO_DIR"}


@contextlib.contextmanager
def serving(cmd: list[str], *, port: int, env: dict[str, str], wait: float = 90) -> Iterator[subprocess.Popen]:
    """Run ``cmd`` (a dashboard server on ``port``) from the repository root until its health endpoint
    answers ``ok``; stop it afterwards."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().decode().strip() == "ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the dashboard server did not become healthy within {wait:g} s")
            time.sleep(0.3)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def launched_chromium(playwright_api) -> Iterator[object]:
    """Debian's chromium driven by Playwright (``playwright install`` is never needed)."""
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_popover(pg, label: str, *, timeout: float = 120):
    """Click the sidebar popover button ``label`` until its body is visible and return the body.

    A rerun that starts just after the click (a query-parameter sync, a widget default settling) can remount
    the popover closed, so one click is not always enough on a loaded machine; the click is repeated every few
    seconds (only while it is closed) until the body shows or ``timeout`` seconds have passed."""
    body = pg.get_by_test_id("stPopoverBody")
    button = pg.get_by_test_id("stSidebar").get_by_text(label).first
    deadline = time.monotonic() + timeout
    while True:
        if not body.first.is_visible():
            button.click(timeout=max(1_000, (deadline - time.monotonic()) * 1000))
        try:
            body.first.wait_for(state="visible", timeout=10_000)  # a slow popover is not toggled shut again
            return body.first
        except Exception:
            if time.monotonic() > deadline:
                raise AssertionError(f"the popover {label!r} did not open within {timeout:g} s") from None


def choose_option(pg, box, name: str, *, timeout: float = 120) -> None:
    """Open the selectbox ``box`` and choose the option ``name``; like :func:`open_popover`, the click that opens
    the list is repeated (only while the option is not shown) since a rerun just after it remounts the list
    closed."""
    option = pg.get_by_role("option", name=name, exact=True)
    deadline = time.monotonic() + timeout
    while True:
        if not option.first.is_visible():
            box.click(timeout=max(1_000, (deadline - time.monotonic()) * 1000))
        try:
            option.first.wait_for(state="visible", timeout=10_000)
            option.first.click()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise AssertionError(f"the option {name!r} did not show within {timeout:g} s") from None


def upload_logs(pg, path, *, timeout: float = 300) -> None:
    """Choose the Data page's "Upload a file" source and give it ``path``, repeated until the uploader holds it.

    The source click starts a rerun; on a loaded machine the uploader it shows can be remounted by a later rerun
    after the file was set, and the file is then lost without a sign. The file's chip (its name under the
    uploader) or the report for it shows that the server got it; until one does, the choice and the file are
    given again every 30 s, for at most ``timeout`` seconds."""
    main = pg.get_by_test_id("stMain")  # not the sidebar's discount-table uploader
    got = main.get_by_test_id("stFileChipName").filter(has_text=path.name).or_(
        pg.get_by_text(f"Validation report — uploaded file {path.name}"))
    deadline = time.monotonic() + timeout
    while True:
        pg.get_by_test_id("stButtonGroup").get_by_text("Upload a file").first.click(
            timeout=max(1_000, (deadline - time.monotonic()) * 1000))
        main.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(
            str(path), timeout=max(1_000, (deadline - time.monotonic()) * 1000))
        try:
            got.first.wait_for(timeout=30_000)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise AssertionError(f"the upload of {path.name} did not reach the server within {timeout:g} s") \
                    from None


def open_controls(pg, label: str = "Page controls") -> None:
    """Open a page's folded controls (``ui.controls``: collapsed until opened) so its widgets can be used."""
    box = pg.get_by_test_id("stExpander").filter(has=pg.locator("summary", has_text=label)).first
    if box.locator("details").first.get_attribute("open") is None:
        box.locator("summary").first.click()
    box.locator("details[open]").first.wait_for(timeout=30_000)
    hold_still(box)


def hold_still(locator, *, quiet: float = 0.5, timeout: float = 30) -> None:
    """Wait until ``locator``'s box has kept its place and size for ``quiet`` seconds. A just-opened expander's
    widgets take their final size over several frames; on a loaded machine Playwright's own check (the same box
    in two consecutive frames) can pass between two of them, and a click aimed at a control then lands beside it
    (the "All rewards" toggle, 1 click in 5 under load: the click hit the block 60 px above it, nothing ran)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while True:
        box = locator.bounding_box()
        now = time.monotonic()
        if box != last:
            last, since = box, now
        elif now - since >= quiet:
            return
        if now > deadline:
            raise AssertionError(f"the element kept moving for {timeout:g} s (last box {last})")
        time.sleep(0.05)
