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

