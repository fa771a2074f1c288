"""`offeval dashboard` stopped with SIGTERM or Ctrl-C (SIGINT) while a browser session's background preparation
runs DuckDB queries: the process ends with status 0 and prints no traceback, abort or leak report (Ibis's
finalizers used to drop cached tables on the busy connection at exit: ResourceInUseException, then
'terminate called … FATAL', then nanobind's list of leaked DuckDB objects)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from browser_support import CHROMIUM, ROOT, demo_environment, free_port, launched_chromium

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


@pytest.mark.parametrize(("sig", "after"), [(signal.SIGTERM, 15.0), (signal.SIGINT, 15.0), (signal.SIGTERM, 40.0)])
def test_the_server_stops_cleanly_during_the_background_preparation(sig, after):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's package)")
    import playwright.sync_api as pw

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "offeval_core.cli", "dashboard", "--port", str(port)], cwd=ROOT,
                            env=demo_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.5)
        with launched_chromium(pw) as browser:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/sensitivity")  # the session starts the background preparation
            time.sleep(after)
            proc.send_signal(sig)
            out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "Stopping..." in out
    for sign in ("Traceback", "Error", "FATAL", "terminate called", "leaked"):
        assert sign not in out, out
