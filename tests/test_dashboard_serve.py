"""``dashboard.serve``: the background import at server start covers what the app's first script run imports (the
modules of app.py and of every page), and each of them imports (a failure there would only be shown by the page)."""

from __future__ import annotations

import ast
import subprocess
import sys
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
