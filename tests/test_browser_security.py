"""End-to-end security checks: a real ``streamlit run`` server started with the shipped configuration, and
Debian's headless Chromium driven by Playwright.

* ``?discount=table:/proc/self/environ`` and ``?moments=/etc/passwd`` show a notice and none of the file's
  content (the server's environment carries a marker that must never reach the page);
* an upload whose column names hold markup shows them as text;
* ten concurrent sessions each load the demo and upload a file without an error, and the server's peak
  memory (VmHWM) is printed and recorded in docs/security.md.
"""

from __future__ import annotations

import re
import socket
import sys
import time
from pathlib import Path

import pytest
from browser_support import CHROMIUM, demo_environment, free_port, open_popover, serving, upload_logs
from security_support import SECRET, moments_file, small_logs

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

playwright = pytest.importorskip("playwright.sync_api")
LOAD = 300_000
# ten sessions render at once: ten renderers and one server share the two cores with the other test worker, so
# one page can wait for the nine others (measured: 82-102 s for all ten alone or beside a busy core, 190 s beside
# two other test runs); a bound on liveness, not on speed (the test prints the seconds)
CROWD = 600_000
MARKUP = "**bold**<img src=x id=injected>"


def _memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    datadir = tmp_path_factory.mktemp("served_data")
    moments_file(datadir, "team.parquet")
    port = free_port()
    # only the port is given: address, usage stats, error details and upload size come from .streamlit/config.toml
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard/app.py", "--server.port", str(port)]
    env = demo_environment()
    env.update(OFFEVAL_DATA_DIR=str(datadir), OFFEVAL_SERVER_MARKER=SECRET)
    url = f"http://127.0.0.1:{port}"
    with serving(cmd, port=port, env=env, wait=60) as proc:
        yield {"url": url, "pid": proc.pid, "port": port}


def settle(pg, *, timeout: float = LOAD) -> None:
    pg.get_by_test_id("stSidebar").wait_for(timeout=timeout)
    pg.get_by_role("heading", level=1).first.wait_for(timeout=timeout)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


def test_server_listens_on_loopback_only(server):
    with socket.socket() as s:
        s.settimeout(2)
        # the shipped config binds 127.0.0.1: another local address of this machine is refused
        other = socket.gethostbyname(socket.gethostname())
        if other.startswith("127."):
            pytest.skip("this machine has no non-loopback address to try")
        assert s.connect_ex((other, server["port"])) != 0


def test_table_path_in_link_shows_a_notice_and_no_content(server, tab, tmp_path):
    tab.goto(f"{server['url']}/sensitivity?discount=table:/proc/self/environ")
    settle(tab)
    notice = tab.get_by_test_id("stSidebar").get_by_test_id("stAlertContentError")
    notice.first.wait_for(timeout=60_000)
    assert "is not a plain file name" in notice.first.inner_text()
    html = tab.content()
    assert SECRET not in html and "OFFEVAL_DATA_DIR=" not in html and "PATH=/" not in html
    assert tab.get_by_test_id("stException").count() == 0
    tab.screenshot(path=str(tmp_path / "table_environ.png"))


def test_moments_path_in_link_shows_a_notice_and_no_content(server, tab, tmp_path):
    tab.goto(f"{server['url']}/?moments=/etc/passwd")
    settle(tab)
    tab.get_by_text("is not a plain file name").first.wait_for(timeout=60_000)
    html = tab.content()
    assert "root:x:0" not in html and "/bin/bash" not in html and "/usr/sbin/nologin" not in html
    assert tab.get_by_test_id("stException").count() == 0
    tab.screenshot(path=str(tmp_path / "moments_passwd.png"))


def _upload(pg, path: Path) -> None:
    upload_logs(pg, path)


def test_markup_in_uploaded_column_names_shows_as_text(server, tab, tmp_path):
    df = small_logs()
    df[MARKUP] = df["like"]
    df["<i>note</i>"] = "text"
    path = tmp_path / "markup.csv"
    df.to_csv(path, index=False)
    tab.goto(server["url"])
    settle(tab)
    _upload(tab, path)
    # the markup column is a reward by value alone: the page asks first, naming it as text
    asked = tab.get_by_test_id("stAlert").filter(has_text="Before anything is computed")
    asked.first.wait_for(timeout=120_000)
    settle(tab)
    assert MARKUP in asked.first.inner_text()  # the tags are shown, not applied
    tab.get_by_role("button", name="Apply mapping").click()
    tab.get_by_text("Validation report — uploaded file markup.csv").first.wait_for(timeout=120_000)
    settle(tab)
    understood = tab.get_by_test_id("stExpander").filter(has_text="The same summary")
    assert "<i>note</i>: text, not a number" in understood.first.inner_text()
    assert tab.locator("#injected").count() == 0 and tab.locator('img[src="x"]').count() == 0
    assert tab.get_by_test_id("stException").count() == 0
    tab.screenshot(path=str(tmp_path / "markup_upload.png"))
    print(f"\nscreenshots in {tmp_path}")


@pytest.mark.slow
def test_ten_concurrent_sessions_load_the_demo_and_an_upload(server, chromium, tmp_path):
    before = _memory(server["pid"])
    contexts, pages = [], []
    for i in range(10):
        path = tmp_path / f"upload{i}.csv"
        small_logs(n_sessions=200, seed=i).to_csv(path, index=False)
        ctx = chromium.new_context(viewport={"width": 1280, "height": 1000})
        pg = ctx.new_page()
        pg.goto(server["url"], wait_until="commit")
        contexts.append(ctx)
        pages.append((pg, path))
    t0 = time.perf_counter()
    for pg, _ in pages:  # every session loads the demo at the same time
        settle(pg)
        pg.get_by_text("Validation report").first.wait_for(timeout=CROWD)
    for pg, path in pages:  # then all upload
        upload_logs(pg, path, timeout=CROWD / 1000)
    for pg, path in pages:
        pg.get_by_text(f"Validation report — uploaded file {path.name}").first.wait_for(timeout=CROWD)
        settle(pg)
    seconds = time.perf_counter() - t0
    after = _memory(server["pid"])
    errors = []
    for pg, _ in pages:
        errors += pg.get_by_test_id("stException").all_inner_texts()
        errors += pg.get_by_test_id("stAlertContentError").all_inner_texts()
        sessions = pg.get_by_test_id("stMetric").filter(has_text="Sessions").first.inner_text()
        assert re.search(r"\b200\b", sessions), sessions
    for ctx in contexts:
        ctx.close()
    print(f"\n10 sessions: {seconds:.1f} s; server RSS before {before['VmRSS']} MiB, after {after['VmRSS']} MiB, "
          f"peak {after['VmHWM']} MiB")
    assert not errors, errors
    assert after["VmHWM"] < 3 * 1024  # bounded: the demo is cached once, uploads in bounded caches


def test_an_uploaded_discount_table_becomes_the_target_discount(server, tab, tmp_path):
    import hashlib

    table = tmp_path / "eye tracking.csv"
    table.write_bytes(b"rank,probability\n1,1\n2,0.6\n3,0.3\n")
    expected = f"table:eye-tracking-{hashlib.sha256(table.read_bytes()).hexdigest()[:12]}.csv"
    tab.goto(server["url"])
    settle(tab)
    sidebar = tab.get_by_test_id("stSidebar")
    open_popover(tab, "Upload a discount table").locator('input[type="file"]').set_input_files(str(table))
    # the target discount D becomes the uploaded table, also in the shareable link
    tab.wait_for_function("(e) => decodeURIComponent(location.search).includes('discount=' + e)", arg=expected,
                          timeout=60_000)
    settle(tab)
    tab.keyboard.press("Escape")
    tab.screenshot(path=str(tmp_path / "discount_table_upload.png"))
    assert sidebar.get_by_test_id("stAlertContentError").count() == 0
    assert tab.get_by_test_id("stException").count() == 0
