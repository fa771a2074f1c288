"""Every failure offeval_core raises on purpose is a typed error of offeval_core/errors.py: the command line
and the dashboard decide what to show by the type (an ``OffevalError``), so a bare built-in raise would
either be shown as a bug or, caught broadly, hide one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import offeval_core
from offeval_core import errors

ROOT = Path(offeval_core.__file__).parent
BUILTIN = {"ValueError", "TypeError", "KeyError", "RuntimeError", "LookupError", "IndexError", "FileNotFoundError",
           "OSError", "Exception"}

ALLOWED = {
    # (module, start of the message): why it is a programming error no user input reaches
    ("moment_columns.py", "column {c!r} has no moment role"): "the role table is the package's own constant",
    ("moment_columns.py", "moment column {c!r} needs the sum column"): "the role table is the package's own constant",
    ("log_rules.py", "unknown column role"): "roles come from the schema constant, never from a user",
    ("engine/kernel.py", "this query takes"): "the compiled query and its caller are built together",
    ("engine/reduction.py", "internal error: group code"): "the reduce takes every group code from the group table",
    ("file_cache.py", "a cache key is 64 hex digits"): "keys are SHA-256 digests computed inside",
    ("logs_cache.py", "cannot store a {name}"): "caught inside LogsCache.put: the entry is not written",
    ("logs_cache.py", "cannot store a {type(x).__name__}"): "caught inside LogsCache.put: the entry is not written",
    ("limits.py", "unknown limit"): "overrides are the CLI's fixed flags (keyword names, like a bad keyword)",
}


def _message_head(call: ast.Call) -> str:
    if not call.args:
        return ""
    arg = call.args[0]
    if isinstance(arg, ast.Constant):
        return str(arg.value)
    if isinstance(arg, ast.JoinedStr):
        return ast.unparse(arg)[2:-1]
    return ast.unparse(arg)


def bare_raises() -> list[tuple[str, int, str, str]]:
    """(module, line, exception, message head) of every ``raise <built-in>(...)`` in offeval_core."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in BUILTIN:
                head = _message_head(node.exc) if isinstance(node.exc, ast.Call) else ""
                out.append((rel, node.lineno, exc.id, head))
    return sorted(out)


def test_no_bare_builtin_raise_outside_the_allow_list():
    found = bare_raises()
    unexpected = [f"{m}:{line}: raise {e}({h[:60]!r}…)" for m, line, e, h in found
                  if not any(m == am and h.startswith(ah) for am, ah in ALLOWED)]
    assert unexpected == [], "raise a type from offeval_core/errors.py instead:\n" + "\n".join(unexpected)


def test_every_allow_list_entry_is_still_used():
    found = bare_raises()
    stale = [k for k in ALLOWED if not any(m == k[0] and h.startswith(k[1]) for m, _, _, h in found)]
    assert stale == []


def test_the_scan_sees_a_bare_raise(tmp_path, monkeypatch):
    """The scanner itself: a module with ``raise ValueError`` and ``raise TypeError`` is reported, a typed
    raise is not."""
    (tmp_path / "m.py").write_text("def f(x):\n    if x:\n        raise ValueError(f'bad {x}')\n"
                                   "    raise TypeError('no')\n\ndef g():\n    raise InputError('ok')\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert bare_raises() == [("m.py", 3, "ValueError", "bad {x}"), ("m.py", 4, "TypeError", "no")]


@pytest.mark.parametrize(("cls", "builtin"), [
    (errors.InputError, ValueError), (errors.SpecError, ValueError), (errors.UnknownName, KeyError),
    (errors.UnknownName, ValueError), (errors.WrongType, TypeError), (errors.MissingInput, FileNotFoundError),
    (errors.MissingTool, RuntimeError),
])
def test_typed_errors_keep_their_builtin_base(cls, builtin):
    """Callers that catch the built-in type (and tests matching it) keep working; every one is an
    OffevalError, the only type the dashboard and the command line catch."""
    assert issubclass(cls, builtin) and issubclass(cls, errors.OffevalError)


def test_typed_errors_from_the_core_keep_their_message():
    """The type changed, the text did not: a wrong type, an unknown name, a bad option."""
    from offeval_core.multiple import adjust
    from offeval_core.policies import _kind
    from offeval_core.validation import check_level

    with pytest.raises(errors.WrongType, match=r"^level must be a number between 0 and 1, got str '0.9'$"):
        check_level("0.9")
    with pytest.raises(errors.UnknownName) as e:
        _kind("x", ["new"], ["bts"])
    assert str(e.value) == "unknown target policy 'x'; the data have new, bts"
    with pytest.raises(errors.SpecError, match=r"^unknown adjustment 'bh2'; expected one of "):
        adjust([0.01, 0.2], method="bh2")
