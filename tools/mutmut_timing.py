"""pytest plugin of tools/mutation.py: a test's recorded call duration also counts the setup of every fixture it
uses, as if each were set up afresh.

mutmut runs the tests of a mutant fastest first and stops at the first failure, ordering them by the call
durations of its stats run, which leave fixture setup out. A test that reads a module-scoped fixture (a simulated
world and its reduce, tens of seconds) then looks as fast as a test on a hand-made table, and runs first; in the
mutant's own process nothing is set up yet, so every mutant pays for the fixture before reaching the fast test
that would have killed it. With this plugin (``-p mutmut_timing``, ``tools/`` on ``PYTHONPATH``) such a test
counts its fixtures' setup time, and the fast tests run first.
"""

from __future__ import annotations

import time

import pytest

_SETUP: dict = {}  # fixture definition -> seconds its setup took (the longest seen)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    t0 = time.perf_counter()
    try:
        return (yield)
    finally:
        _SETUP[fixturedef] = max(_SETUP.get(fixturedef, 0.0), time.perf_counter() - t0)


def fixture_cost(item) -> float:
    """Seconds to set up every fixture ``item`` uses, each as last seen (dependencies are set up before the
    fixture's own hook, so each counts once)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return 0.0
    total = 0.0
    for name in item.fixturenames:
        defs = info.name2fixturedefs.get(name)
        if defs:
            total += _SETUP.get(defs[-1], 0.0)
    return total


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item, call):
    if call.when == "call":
        call.duration += fixture_cost(item)
