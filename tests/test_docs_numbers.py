"""Every number README.md and docs/ quote from the bundled demo is the one ``make docs-numbers``
(tools/docs_numbers.py) computes from data/: a regenerated demo or a changed analysis that moves a quoted number
fails here, naming the block."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quoted_demo_numbers_match_the_data():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "docs_numbers.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("checked ")


def test_a_changed_number_is_caught(tmp_path):
    """The block rewriter: a block whose body differs is reported, one that matches is not, text outside the
    markers is never touched."""
    sys.path.insert(0, str(ROOT / "tools"))
    from docs_numbers import rewrite

    text = "a\n<!-- demo-numbers:x -->\nold 1\n<!-- /demo-numbers:x -->\nb 7\n<!-- demo-numbers:y -->\nsame\n" \
           "<!-- /demo-numbers:y -->\n"
    out, changed = rewrite(text, {"x": "new 2\n", "y": "same\n"})
    assert changed == ["x"]
    assert out == text.replace("old 1", "new 2")
