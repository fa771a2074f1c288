"""``dashboard.serve``: the background import at server start covers what the app's first script run imports (the
modules of app.py and of every page), and each of them imports (a failure there would only be shown by the page)."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

from dashboard.serve import app_imports

ROOT = Path(__file__).resolve().parents[1]


def test_app_imports_lists_every_top_level_import_of_the_app_and_its_pages():
    names = set(app_imports())
    for path in [ROOT / "dashboard" / "app.py", *(ROOT / "dashboard" / "views").glob("*.py")]:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                assert node.module in names, (path.name, node.module)
            elif isinstance(node, ast.Import):
                assert {a.name for a in node.names} <= names, path.name
    assert {"dashboard.ui", "dashboard.sidebar", "dashboard.share"} <= names  # `from dashboard import ui, …`
    assert "__future__" not in names


def test_preload_imports_every_listed_module_in_a_fresh_process():
    code = ("import sys; from dashboard.serve import DEFERRED_IMPORTS, app_imports, preload; preload(wait=0); "
            "missing = [n for n in [*app_imports(), *DEFERRED_IMPORTS] if n not in sys.modules]; print(missing)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout + proc.stderr[-2000:]


def test_the_first_script_run_does_not_import_what_the_library_imports_only_where_it_is_used():
    """scipy.stats and statsmodels (~0.5 s) are imported inside the functions that need them: a module-level import
    of either, anywhere the app or a page reaches, would put them back on every first page's path."""
    code = ("import importlib, sys; from dashboard.serve import DEFERRED_IMPORTS, app_imports\n"
            "for n in app_imports(): importlib.import_module(n)\n"
            "print(sorted(n for n in sys.modules if n in DEFERRED_IMPORTS or n.split('.')[0] == 'statsmodels'))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout + proc.stderr[-2000:]


def function_level_imports() -> set[str]:
    """The third-party modules ``offeval_core`` imports inside function bodies."""
    found = set()
    for path in (ROOT / "offeval_core").rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Import):
                        found.update(a.name for a in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        found.add(node.module)
    return {n for n in found if n.split(".")[0] not in sys.stdlib_module_names and n.split(".")[0] != "offeval_core"}


def test_every_function_level_import_of_the_library_is_preloaded_or_left_with_a_reason():
    """A new import inside a library function of a heavy module (as scipy.stats was, ~0.3 s) would otherwise be paid
    by the first page that calls the function: it must be imported by the app's first run, be in DEFERRED_IMPORTS,
    or be in NOT_PRELOADED with the reason."""
    from dashboard.serve import DEFERRED_IMPORTS, NOT_PRELOADED

    found = function_level_imports()
    assert {"scipy.stats", "statsmodels.stats.multitest", "pyspark.sql", "kaleido"} <= found
    code = ("import importlib, sys; from dashboard.serve import app_imports\n"
            "for n in app_imports(): importlib.import_module(n)\n"
            f"print(sorted(n for n in {sorted(found)!r} if n in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=300)
    first_run = set(ast.literal_eval(proc.stdout.strip().splitlines()[-1]))
    left = {n for n in found if any(n == k or n.startswith(k + ".") for k in NOT_PRELOADED)}
    assert found - first_run - set(DEFERRED_IMPORTS) - left == set()
    # and every entry of the two lists is still imported somewhere inside a function
    assert set(DEFERRED_IMPORTS) <= found
    assert all(any(n == k or n.startswith(k + ".") for n in found) for k in NOT_PRELOADED)


def test_preload_reads_the_data_first_and_imports_the_rest_only_when_no_page_runs(monkeypatch):
    """A page opened right after a restart waits for the dataset and its cached moments, not for the other pages'
    imports: the preload prefetches first, then waits until no script run is under way before importing."""
    import threading
    import types

    from dashboard import serve
    from dashboard.data import warmup

    events = []
    monkeypatch.delenv("OFFEVAL_DATA", raising=False)
    monkeypatch.setenv("OFFEVAL_PREPARE", "1")
    monkeypatch.setattr(warmup, "prefetch", lambda key: events.append(("prefetch", key)))
    monkeypatch.setattr(serve, "importlib", types.SimpleNamespace(import_module=lambda n: events.append(("import", n))))
    monkeypatch.setattr(serve, "_warm_charts", lambda: events.append(("charts",)))
    monkeypatch.setattr(serve, "_settle_use_warning", lambda: events.append(("use warning",)))
    thread = threading.Thread(target=serve.preload, kwargs={"wait": 0}, daemon=True)
    with warmup.page_running():
        thread.start()
        deadline = time.monotonic() + 30
        while not events and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # the preload would import now if it did not wait for the page
        assert events == [("use warning",), ("prefetch", "demo")]
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert events == [("use warning",), ("prefetch", "demo"), *(("import", n) for n in app_imports()), ("charts",),
                      *(("import", n) for n in serve.DEFERRED_IMPORTS)]


def test_streamlits_once_per_process_repl_check_is_made_by_the_preload_and_prints_nothing(monkeypatch, caplog):
    """The check Streamlit makes on the first element a process draws (``inspect.stack()`` with source lines over the
    caller's stack) is made by the preload, once the runtime exists, so the first page after a start skips it; and it
    says nothing, since the app runs under ``streamlit run``. Fails if Streamlit renames the check or its flag."""
    from streamlit import delta_generator
    from streamlit.runtime import Runtime

    from dashboard import serve

    monkeypatch.setattr(delta_generator, "_use_warning_has_been_displayed", False)
    monkeypatch.setattr(Runtime, "exists", classmethod(lambda cls: False))
    serve._settle_use_warning()  # no runtime yet: left to the first page (it would warn about a bare script)
    assert delta_generator._use_warning_has_been_displayed is False
    monkeypatch.setattr(Runtime, "exists", classmethod(lambda cls: True))
    with caplog.at_level("WARNING"):
        serve._settle_use_warning()
    assert delta_generator._use_warning_has_been_displayed is True
    assert not [r for r in caplog.records if "streamlit run" in r.getMessage()]
