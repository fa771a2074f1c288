"""Open a page as a user's browser does: Debian's Chromium with no DevTools client attached.

Playwright drives Chromium over the DevTools protocol, and a page opened that way runs its JavaScript with the
debugger's bookkeeping on: Streamlit's chart code (a 4.7 MB chunk) takes about 0.5 s longer to compile and run
in a new tab than in a browser nobody inspects. :class:`PlainChromium` starts a new Chromium process on a new
profile for every open (a new tab with an empty cache, like Playwright's new context), with a small extension
whose content script waits for the same "done" as the Playwright benchmark (:data:`DONE_JS`) and posts
``performance.now()`` (milliseconds since the navigation started) to a collector on a loopback port.

Each open first loads a blank page of the collector, which asks the collector when to go; the collector answers
once the browser has started and settled (:data:`SETTLE` seconds) and the caller's ``before`` (say, starting the
server) has returned, so neither the browser's own start-up nor the wait for a server is timed, and the page is
opened the moment the server answers, as Playwright opens it.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

DONE_JS = """([title, need]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    const h = [...document.querySelectorAll('h1')].map(e => e.innerText.trim());
    if (!h.some(t => t.startsWith(title))) return false;
    const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
    if (need && !charts.length) return false;
    return [...charts].every(c => c.querySelector('.main-svg'));
}"""
"""A page is done when ``title`` is its heading, the script run has finished and every chart is drawn, and at
least one is when ``need``: the frontend loads its chart code on the first chart, and until then the chart's
element is not in the page (a run that ended is not a chart drawn)."""

_PROBE = """(() => {
  const collector = 'http://127.0.0.1:%(port)d';
  if (location.port === '%(port)d') return;
  const done = %(done)s;
  fetch(collector + '/expect').then(r => r.json()).then(([title, need]) => {
    const tick = () => {
      if (!done([title, need])) { setTimeout(tick, 20); return; }
      fetch(collector + '/done', {method: 'POST', mode: 'no-cors',
                                  body: JSON.stringify({ms: performance.now(), url: location.href})});
    };
    tick();
  });
})();
"""


SETTLE = 1.0
"""Seconds between the browser's blank page asking when to go and the earliest go: its start-up work is done."""


class PlainChromium:
    """Chromium processes with no DevTools client; ``open(url, title, need)`` → seconds to done."""

    def __init__(self, chromium: str, args: list[str], *, timeout: float = 180):
        self.chromium, self.args, self.timeout = chromium, list(args), timeout
        self._reports: queue.Queue = queue.Queue()
        self._expect = ["", False]
        self._asked, self._go = threading.Event(), threading.Event()

    def __enter__(self) -> PlainChromium:
        owner = self

        class Collector(BaseHTTPRequestHandler):
            def do_GET(self):
                parsed = urlparse(self.path)
                if parsed.path == "/expect":
                    body, kind = json.dumps(owner._expect).encode(), "application/json"
                elif parsed.path == "/go" and "to" in parse_qs(parsed.query):
                    target = json.dumps(parse_qs(parsed.query)["to"][0])
                    body = (f"<html><body><script>fetch('/when').then(() => location.href = {target})"
                            "</script>").encode()
                    kind = "text/html"
                elif parsed.path == "/when":  # answered when the caller says go
                    owner._asked.set()
                    owner._go.wait(owner.timeout)
                    body, kind = b"go", "text/plain"
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                owner._reports.put(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self._dir = Path(tempfile.mkdtemp(prefix="offeval-bench-plain-"))
        ext = self._dir / "probe"
        ext.mkdir()
        (ext / "manifest.json").write_text(json.dumps({
            "manifest_version": 3, "name": "offeval bench probe", "version": "1",
            "content_scripts": [{"matches": ["http://127.0.0.1/*"], "js": ["probe.js"],
                                 "run_at": "document_start"}]}), encoding="utf-8")
        (ext / "probe.js").write_text(_PROBE % {"port": self.port, "done": DONE_JS}, encoding="utf-8")
        self._ext = ext
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        shutil.rmtree(self._dir, ignore_errors=True)

    def open(self, url: str, title: str, need: bool, *, before=None, tries: int = 3) -> float:
        """Seconds from the navigation to ``url`` to its done (a new Chromium process on a new profile); ``before``
        (no argument) is called once the browser has settled, just before it navigates."""
        pending = [before] if before is not None else []

        def once() -> None:  # a launch that never reports is retried; the caller's before runs once
            while pending:
                pending.pop()()

        for attempt in range(tries):
            try:
                return self._open(url, title, need, once)
            except queue.Empty:
                if attempt == tries - 1:
                    raise RuntimeError(f"no report from {url} within {self.timeout:g} s ({tries} launches)") from None
        raise AssertionError("unreachable")

    def _open(self, url: str, title: str, need: bool, before) -> float:
        while not self._reports.empty():
            self._reports.get_nowait()
        self._expect[:] = [title, need]
        self._asked.clear()
        self._go.clear()
        profile = tempfile.mkdtemp(prefix="profile-", dir=self._dir)
        cmd = [self.chromium, *self.args, f"--user-data-dir={profile}", "--window-size=1280,1400",
               f"--load-extension={self._ext}", f"--disable-extensions-except={self._ext}",
               f"http://127.0.0.1:{self.port}/go?to={quote(url, safe='')}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if not self._asked.wait(self.timeout):
                raise queue.Empty
            time.sleep(SETTLE)
            before()
            self._go.set()
            report = self._reports.get(timeout=self.timeout)
            return report["ms"] / 1000
        finally:
            self._go.set()  # a blank page still asking is let go
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            time.sleep(0.2)
            shutil.rmtree(profile, ignore_errors=True)
