"""docs/quickstart.md runs as written: every call and every printed number of the notebook quickstart."""

from __future__ import annotations

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "quickstart.md"


def test_quickstart_runs_as_written():
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False,
                              report=True)
    assert result.attempted >= 15
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {DOC.name} failed (see above)"


def test_front_door_names_never_shadow_a_submodule():
    """Importing a submodule sets it as an attribute of the package, so a front-door name equal to a submodule's
    name (e.g. ``simulate``) would turn into that module once anything imports it."""
    import importlib
    import pkgutil

    import offeval_core as oe

    submodules = {m.name for m in pkgutil.iter_modules(oe.__path__)}
    assert not submodules & set(oe.__all__)
    importlib.import_module("offeval_core.simulate")
    assert callable(oe.simulate_world) and not isinstance(oe.simulate_world, type(importlib))
