"""``ui.guarded`` shows offeval's own errors (every ``OffevalError``) as ``st.error`` and a view a moments file
cannot support as ``st.info``; anything else is a bug and surfaces as one, never dressed as the user's mistake
(AppTest: a minimal script, and a real page whose analysis is made to fail)."""

from __future__ import annotations

import pytest
from dashboard_support import APP, environment, write_small_world
from streamlit.testing.v1 import AppTest

import dashboard.data as data

_SCRIPT = '''
from dashboard import ui
from offeval_core import errors

raising = {
    "bug": lambda: TypeError("unsupported operand type(s) for +: 'int' and 'str'"),
    "key": lambda: KeyError("dcg@10"),
    "value": lambda: ValueError("could not convert string to float: 'x'"),
    "name": lambda: errors.UnknownName("unknown reward 'clicks'; the logs have reward columns: click"),
    "spec": lambda: errors.SpecError("unknown discount 'log3'"),
    "raw": lambda: errors.NeedsRawLogs("the clip tuning needs the per-row logs"),
}
with ui.guarded("Section"):
    raise raising[KIND]()
'''


REDACTED = "This app has encountered an error. The original error message is redacted"
"""Streamlit's own exception box (.streamlit/config.toml: showErrorDetails = "none"): the bug shows as a bug."""


@pytest.mark.parametrize("kind", ["bug", "key", "value"])
def test_an_unexpected_exception_is_not_swallowed(kind):
    """A built-in TypeError, KeyError or ValueError is not an offeval error: it is not turned into an
    ``st.error`` telling the user to fix their input (the broad catch did that), it ends the run as a bug."""
    at = AppTest.from_string(f"KIND = {kind!r}\n" + _SCRIPT, default_timeout=30).run()
    assert [e.value for e in at.error] == []
    assert len(at.exception) == 1
    assert at.exception[0].value.startswith(REDACTED)


def test_an_offeval_error_becomes_a_specific_st_error():
    at = AppTest.from_string("KIND = 'name'\n" + _SCRIPT, default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1
    text = at.error[0].value
    assert text.startswith("**Section:** unknown reward 'clicks'; the logs have reward columns: click")
    assert "**How to fix:** Pick a name the loaded data has in the sidebar" in text


def test_a_spec_error_gets_the_spec_hint():
    at = AppTest.from_string("KIND = 'spec'\n" + _SCRIPT, default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.error[0].value.startswith("**Section:** unknown discount 'log3'")
    assert "Use a discount spec like 'pbm'" in at.error[0].value


def test_needs_raw_logs_is_an_info_not_an_error():
    at = AppTest.from_string("KIND = 'raw'\n" + _SCRIPT, default_timeout=30).run()
    assert not at.exception and not at.error
    assert [i.value for i in at.info] == ["**Section:** the clip tuning needs the per-row logs"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = write_small_world(tmp_path_factory.mktemp("guarded_demo") / "demo")
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield out


def _table1_page(monkeypatch, exc: BaseException) -> AppTest:
    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr(data, "table1_result", broken)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at.switch_page("views/dcg_vs_ndcg.py").run()


def test_a_bug_in_a_pages_analysis_surfaces(demo, monkeypatch):
    """A TypeError from the Table 1 analysis (a bug, not bad input) is the page's exception, not an st.error
    telling the user to fix their data."""
    at = _table1_page(monkeypatch, TypeError("'NoneType' object is not subscriptable"))
    assert len(at.exception) == 1 and at.exception[0].value.startswith(REDACTED)
    assert not any("Table 1" in e.value for e in at.error)
    assert not any(m.value.startswith("**Step 1") for m in at.markdown)  # the section stopped at the bug


def test_an_input_error_in_a_pages_analysis_is_an_st_error(demo, monkeypatch):
    from offeval_core.errors import InputError

    at = _table1_page(monkeypatch, InputError("normaliser must be 'paper' or 'top1', got 'x'"))
    assert not at.exception, [e.value for e in at.exception]
    assert any(e.value.startswith("**Table 1:** normaliser must be 'paper' or 'top1', got 'x'") for e in at.error)
    assert any(h.value == "Why it happens: the Table 1 counter-example" for h in at.header)
