"""The code is layered: a module imports only from its own layer or below — at module level and inside
functions alike (a deferred import is still a dependency) — the import graph of ``offeval_core`` and
``dashboard`` (pages and ``app.py`` included) has no cycle, and the core never imports streamlit or the
dashboard."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "offeval_core"
PACKAGES = ("offeval_core", "dashboard")

# lowest first; a module takes the layer of the longest matching prefix (new modules of a package inherit it)
LAYERS: list[tuple[str, ...]] = [
    ("offeval_core.errors", "offeval_core.results", "offeval_core.validation", "offeval_core.arms",
     "offeval_core.limits", "offeval_core.sanitize", "offeval_core.safe_io", "offeval_core.inputs", "offeval_core.inputs_parquet",
     "offeval_core.mapping", "offeval_core.formatting", "offeval_core.multiple",
     "offeval_core.defaults", "offeval_core.arm_values", "offeval_core.moment_columns", "offeval_core.labels",
     "offeval_core.file_cache", "offeval_core.memory"),
    ("offeval_core.stats", "offeval_core.intervals", "offeval_core.registry", "offeval_core.discounts", "offeval_core.log_schema", "offeval_core.log_rules", "offeval_core.log_checks", "offeval_core.fingerprint", "offeval_core.logs_cache", "offeval_core.logs", "offeval_core.agreement",
     "offeval_core.column_kinds", "offeval_core.reading", "offeval_core.policies",
     "offeval_core.understanding", "offeval_core.display", "offeval_core.figure_text", "offeval_core.charts",
     "offeval_core.correlation_summary", "offeval_core.verdict_chart", "offeval_core.forest", "offeval_core.export", "offeval_core.simulate_config",
     "offeval_core.sim_spec", "offeval_core.simulate", "offeval_core.heldout.io",
     "offeval_core.heldout.world"),
    ("offeval_core.engine", "offeval_core.moments_checks", "offeval_core.moments_io", "offeval_core.moments_cache", "offeval_core.heldout.metrics", "offeval_core.heldout.mnar",
     "offeval_core.heldout.zoo"),
    ("offeval_core.estimators",),
    ("offeval_core.importance", "offeval_core.analyses", "offeval_core.heldout.analyses", "offeval_core.heldout.charts",
     "offeval_core.heldout"),
    ("offeval_core.slate", "offeval_core.diagnose", "offeval_core.diagnose_validation", "offeval_core.verdicts"),
    ("offeval_core.report_html", "offeval_core.report_sections", "offeval_core.report"),
    ("offeval_core.commands", "offeval_core.cli"),
    # the dashboard sits on the whole core: settings and the served file's name, then loading and analysis
    # (cached), then the page helpers, the sidebar, and the pages and app.py on top
    ("dashboard.state", "dashboard.served", "dashboard.data.upload_store", "dashboard.pages"),
    ("dashboard.data", "dashboard.prefill"),
    ("dashboard.context", "dashboard.render", "dashboard.ui"),
    ("dashboard.clip_choice", "dashboard.sidebar", "dashboard.share"),
    ("dashboard.views", "dashboard.app", "dashboard.serve"),
]


def modules() -> dict[str, Path]:
    """Every module of the core and the dashboard (its pages, ``dashboard.views.*``, and ``dashboard.app``)."""
    out = {}
    for pkg in PACKAGES:
        for p in (REPO / pkg).rglob("*.py"):
            out[".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")] = p
    return out


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(node: ast.AST):
    """Every import statement under ``node``: module level, in functions, classes, branches and ``try``;
    only the body of ``if TYPE_CHECKING:`` is skipped (it never runs)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif _type_checking(child):
            for other in child.orelse:
                yield from _import_nodes(ast.Module(body=[other], type_ignores=[]))
        else:
            yield from _import_nodes(child)


def _absolute(node: ast.ImportFrom, name: str) -> str | None:
    if not node.level:
        return node.module
    base = name.split(".")[: -node.level]  # relative to the importing module's package
    return ".".join([*base, node.module] if node.module else base)


def imports(path: Path, known: dict[str, Path], name: str = "") -> tuple[set[str], set[str]]:
    """(project modules, other top-level packages) the file at ``path`` imports, anywhere in it."""
    inner, outer = set(), set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in _import_nodes(tree):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node, name if path.name != "__init__.py" else name + ".__init__")
            if module is None:
                continue
            names = [module, *(f"{module}.{a.name}" for a in node.names)]
        else:
            names = [a.name for a in node.names]
        for n in names:
            if n.split(".")[0] in PACKAGES:
                if n in known and n not in PACKAGES:
                    inner.add(n)
            else:
                outer.add(n.split(".")[0])
    return inner, outer


def layer(name: str) -> int:
    best, level = -1, None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best:
                best, level = len(p), i
    if level is None:
        raise AssertionError(f"{name} is in no layer: add it to LAYERS in {Path(__file__).name}")
    return level


def test_imports_go_down_the_layers_and_never_to_the_dashboard():
    known = modules()
    wrong = []
    for name, path in sorted(known.items()):
        inner, outer = imports(path, known, name)
        if name.startswith("offeval_core"):
            assert not outer & {"streamlit", "dashboard"}, f"{name} imports {outer & {'streamlit', 'dashboard'}}"
        if name in PACKAGES:
            assert not inner or name == "dashboard", "the front door loads its names lazily"
            continue
        wrong += [f"{name} (layer {layer(name)}) imports {d} (layer {layer(d)})" for d in sorted(inner)
                  if layer(d) > layer(name)]
    assert not wrong, "\n".join(wrong)


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """The first cycle found by a depth-first search of ``graph`` (module → modules it imports), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                return [*stack[stack.index(d):], d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, known, name)[0] - {name} for name, path in known.items()}


def test_import_graph_is_acyclic():
    cycle = import_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_graph_sees_the_dashboard_and_imports_inside_functions():
    """The scan reaches the pages and app.py, and counts an import written inside a function."""
    graph = import_graph()
    assert {"dashboard.app", "dashboard.views.which_estimator", "dashboard.data.datasets"} <= set(graph)
    assert {"dashboard.share", "dashboard.sidebar", "dashboard.ui"} <= graph["dashboard.app"]
    # estimate's --clip auto reads the recommendation in a function: a deferred import, still an edge
    assert "offeval_core.analyses.clip_tuning" in graph["offeval_core.commands.estimate"]
    assert "dashboard.state" in graph["dashboard.data.warmup"]  # imported inside warm_up's plan


def test_a_planted_cycle_through_a_function_level_import_is_found(tmp_path):
    """The check fails on a circle closed by an import inside a function, as the two removed ones were."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from offeval_core.slate.estimators import estimate\n")
    b.write_text("def f():\n    from offeval_core.slate.adaptive import adaptive_values\n    return adaptive_values\n")
    known = {"offeval_core.slate.adaptive": a, "offeval_core.slate.estimators": b}
    graph = {n: imports(p, known, n)[0] - {n} for n, p in known.items()}
    assert import_cycle(graph) == ["offeval_core.slate.adaptive", "offeval_core.slate.estimators",
                                   "offeval_core.slate.adaptive"]
    assert import_cycle({"dashboard.data": {"dashboard.data.datasets"},
                         "dashboard.data.datasets": {"dashboard.served"},
                         "dashboard.served": {"dashboard.data"}}) == [
        "dashboard.data", "dashboard.data.datasets", "dashboard.served", "dashboard.data"]


def test_front_door_names_are_not_submodule_names():
    """Importing a submodule sets it as an attribute of the package, which would shadow a lazy export."""
    import offeval_core

    submodules = {n.split(".")[1] for n in modules() if n.count(".") >= 1}
    assert not submodules & set(offeval_core.__all__), submodules & set(offeval_core.__all__)


def test_front_door_names_resolve_without_streamlit():
    import subprocess
    import sys

    code = ("import sys, offeval_core as oe\n"
            "missing = [n for n in oe.__all__ if not hasattr(oe, n)]\n"
            "assert not missing, missing\n"
            "assert 'streamlit' not in sys.modules\n"
            "assert len(set(oe.__all__)) == len(oe.__all__)\n"
            "print(len(oe.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PKG.parent, env={"PYTHONPATH": str(PKG.parent), "PATH": "/usr/bin:/bin"})
    assert int(out.stdout) > 60
