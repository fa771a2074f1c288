"""The package is layered: a module imports (at module level) only from its own layer or below, the import
graph has no cycle, and the core never imports streamlit or the dashboard."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "offeval_core"

# lowest first; a module takes the layer of the longest matching prefix (new modules of a package inherit it)
LAYERS: list[tuple[str, ...]] = [
    ("offeval_core.errors", "offeval_core.results", "offeval_core.validation", "offeval_core.arms",
     "offeval_core.limits", "offeval_core.sanitize", "offeval_core.safe_io", "offeval_core.inputs", "offeval_core.inputs_parquet",
     "offeval_core.mapping", "offeval_core.formatting", "offeval_core.multiple",
     "offeval_core.defaults", "offeval_core.arm_values", "offeval_core.moment_columns", "offeval_core.labels"),
    ("offeval_core.stats", "offeval_core.intervals", "offeval_core.registry", "offeval_core.discounts", "offeval_core.log_schema", "offeval_core.log_rules", "offeval_core.log_checks", "offeval_core.fingerprint", "offeval_core.logs", "offeval_core.agreement",
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
]


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        name = ".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
        out[name] = p
    return out


def imports(path: Path, known: dict[str, Path]) -> tuple[set[str], set[str]]:
    """(offeval_core modules, other top-level packages) imported at module level (not inside functions)."""
    inner, outer = set(), set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = [n for top in tree.body for n in ([top, *top.body] if isinstance(top, ast.If | ast.Try) else [top])]
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for n in names:
            if n.startswith("offeval_core"):
                if n in known and n != "offeval_core":
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
        inner, outer = imports(path, known)
        assert not outer & {"streamlit", "dashboard"}, f"{name} imports {outer & {'streamlit', 'dashboard'}}"
        if name == "offeval_core":
            assert not inner, "the front door loads its names lazily"
            continue
        wrong += [f"{name} (layer {layer(name)}) imports {d} (layer {layer(d)})" for d in sorted(inner)
                  if layer(d) > layer(name)]
    assert not wrong, "\n".join(wrong)


def test_import_graph_is_acyclic():
    known = modules()
    graph = {name: imports(path, known)[0] - {name} for name, path in known.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(d):], d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


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
