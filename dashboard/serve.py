"""``python -m dashboard.serve ARGS…``: ``streamlit run ARGS…`` (what ``offeval dashboard`` starts), then the
process ends at once, with Streamlit's exit status.

Stopping the server (Ctrl-C, SIGTERM) ends Streamlit's run while a background preparation may still be
running a DuckDB query. A normal interpreter exit would then run Ibis's finalizers, which drop cached tables
on that busy connection (a ``ResourceInUseException`` traceback, then ``terminate called … FATAL`` and an
abort), and DuckDB's bindings would list their live objects as leaks. Nothing is left to save once the server
has stopped (uploads live in memory; their temporary files are deleted right after reading), so the process
ends with ``os._exit`` after flushing its output.

While the server waits for its first user, a background thread (:func:`preload`) first makes Streamlit's
once-per-process REPL check (:func:`_settle_use_warning`), then loads the default dataset
(the demo, or the file the server was started on) and reads its default moments from the persistent cache when it
holds them, so the first page a user opens does not wait for them; then, one module at a time and only while no
script run is under way, it imports what the app's script runs import (the modules ``app.py`` and every page
name, with pandas, Ibis, DuckDB and Plotly behind them), builds Plotly's template and last imports what the library
imports only inside the functions that use it (:data:`DEFERRED_IMPORTS`). A page opened meanwhile imports what it
needs itself instead of sharing the interpreter with imports of the other pages (Python threads take turns).
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
import threading
import time
from pathlib import Path

__all__ = ["app_imports", "main", "preload"]

_HERE = Path(__file__).resolve().parent

DEFERRED_IMPORTS = ("scipy.stats", "statsmodels.stats.multitest", "statsmodels.stats.contingency_tables", "duckdb")
"""What ``offeval_core`` imports inside the functions that use it (correlations, p-value adjustments, the
Mantel-Haenszel test, the embedded engine's first connection): about 0.6 s of imports the app's first script run
does not make. :func:`preload` imports
them after the first page's needs, so the page that first calls one does not wait for it either."""

NOT_PRELOADED = {
    "dashboard": "the command line's `offeval dashboard` starts the app; the app is already running",
    "kaleido": "PNG/SVG export only, on the user's request (a browser process, not an import worth its memory)",
    "pyspark": "the Spark engine of `offeval reduce --engine spark`; the dashboard reduces on DuckDB",
    "tqdm": "the command line's progress bars",
    "ibis.common.exceptions": "the database route of `offeval reduce` (ibis itself is already imported)",
    "threadpoolctl": "the held-out lab's model zoo, imported with it",
}
"""Third-party modules ``offeval_core`` imports inside functions that :func:`preload` leaves alone (module or package
name → why). Every other such import is already imported by the app's first script run or is in
:data:`DEFERRED_IMPORTS` (``tests/test_dashboard_serve.py`` checks it)."""


def app_imports() -> list[str]:
    """The modules ``app.py`` and the pages (``views/*.py``) import at their top level, in order, once each.

    >>> names = app_imports()
    >>> "streamlit" in names and "dashboard.ui" in names and "offeval_core.analyses.plan" in names
    True
    """
    names: dict[str, None] = {}
    for path in [_HERE / "app.py", *sorted((_HERE / "views").glob("*.py"))]:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names.update(dict.fromkeys(a.name for a in node.names))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names[node.module] = None
                package = _HERE.parent.joinpath(*node.module.split("."))
                names.update(dict.fromkeys(f"{node.module}.{a.name}" for a in node.names  # the project's modules
                                           if (package / f"{a.name}.py").is_file() or (package / a.name).is_dir()))
    return [n for n in names if n != "__future__"]


def preload(*, wait: float = 30.0) -> None:
    """Once Streamlit's runtime exists (its own start-up imports done), make Streamlit's REPL check
    (:func:`_settle_use_warning`), then, unless ``OFFEVAL_PREPARE=0``, load the default dataset and read its cached
    default moments (:func:`dashboard.data.warmup.prefetch`): what a page opened right after a restart waits for
    longest. Then import :func:`app_imports` (a module that fails to import is left
    to the page, which shows the error), build Plotly's template (:func:`_warm_charts`) and import
    :data:`DEFERRED_IMPORTS`, each step only when no script run is under way
    (:func:`dashboard.data.warmup.page_running`)."""
    from streamlit.runtime import Runtime

    for _ in range(int(wait / 0.05)):
        if Runtime.exists():
            break
        time.sleep(0.05)
    _settle_use_warning()  # first: a page opened at once would otherwise make the check on its own deep stack
    try:  # then what the first page waits for longest: the dataset and its cached moments
        from dashboard import served
        from dashboard.data import warmup

        if warmup.enabled():
            warmup.prefetch(served.served_key() if served.served() else "demo")
    except Exception:  # the first page loads the data itself and shows what went wrong
        pass
    # a page run imports what it needs itself: the other pages' imports wait, module by module, until none is under way
    try:
        from dashboard.data.warmup import wait_for_idle
    except Exception:  # the first script run imports it again and reports it
        return
    for name in app_imports():
        wait_for_idle()
        try:
            importlib.import_module(name)
        except Exception:  # the first script run imports it again and reports it
            pass
    wait_for_idle()
    _warm_charts()
    for name in DEFERRED_IMPORTS:
        wait_for_idle()
        try:
            importlib.import_module(name)
        except Exception:  # the function that needs it imports it again and reports it
            pass


def _settle_use_warning() -> None:
    """Streamlit asks once per process, when the first element is drawn, whether it runs in a REPL: with
    ``inspect.stack()``, which reads five lines of source for every frame of the caller's stack, 0.1–0.3 s on a page
    run's deep stack, paid by the first page after every start. Asked here, on this thread's short stack, once the
    runtime exists (so the answer prints nothing)."""
    try:
        from streamlit import delta_generator
        from streamlit.runtime import Runtime

        if Runtime.exists():
            delta_generator._maybe_print_use_warning()
    except Exception:  # the first page asks itself
        pass


def _warm_charts() -> None:
    """Plotly's template and validators built before the first chart (:func:`offeval_core.charts.warm_plotly`)."""
    try:
        from offeval_core.charts import warm_plotly

        warm_plotly()
    except Exception:  # the first chart builds them itself
        pass


def main(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    if str(_HERE.parent) not in sys.path:
        sys.path.insert(0, str(_HERE.parent))
    threading.Thread(target=preload, name="offeval-preload", daemon=True).start()
    code: int | str | None = 0
    try:
        cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="streamlit")
    except SystemExit as exc:  # click ends with sys.exit
        code = exc.code
    return code if isinstance(code, int) else (0 if code is None else 1)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
