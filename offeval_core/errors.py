"""The exceptions offeval raises: one documented type per kind of failure, all under :class:`OffevalError`.

Callers (the command line, the dashboard) decide what to show by the exception's *type*, never by its
message text. Every input failure is an :class:`InputError`: it carries the file (``source``), the
column, the first offending 1-based data rows and what was expected, and its message never contains
file content or server paths beyond the name the user gave.

The command line exits with status 2 and prints ``str(error)`` for any :class:`InputError`; the dashboard
shows it with ``st.error`` and a hint chosen by type.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import warnings
from collections.abc import Iterator, Sequence

__all__ = [
    "EstimatorWarning",
    "HeldoutValidationError",
    "InputError",
    "LimitExceeded",
    "LogValidationError",
    "LogsOverLimit",
    "MissingInput",
    "MissingTool",
    "MomentsValidationError",
    "NeedsAnswers",
    "NeedsArms",
    "NeedsRawLogs",
    "NonFiniteMoments",
    "OffevalError",
    "OutputExists",
    "Problem",
    "SpecError",
    "UnknownName",
    "UnreadableInput",
    "UnreadableLogs",
    "UnwritableOutput",
    "WrongType",
    "estimator_notes",
]


class OffevalError(Exception):
    """Base class of every error offeval raises on purpose."""


class InputError(OffevalError, ValueError):
    """Input from a user (a file, a URL parameter, a spec, an argument) that offeval cannot use.

    Parameters
    ----------
    message : str
        One line (or a short list) saying what is wrong and what was expected.
    source : str, optional
        The name of the file or parameter as the user gave it (never a resolved server path).
    column : str, optional
        The offending column, if any.
    rows : sequence of int, optional
        The first offending 1-based data rows (header excluded), if any.
    expected : str, optional
        What a valid value looks like.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        column: str | None = None,
        rows: Sequence[int] = (),
        expected: str | None = None,
    ):
        self.source = source
        self.column = column
        self.rows = tuple(int(r) for r in rows)
        self.expected = expected
        super().__init__(message)


class UnreadableInput(InputError):
    """The file cannot be read as the format its name or content claims (corrupt, truncated, wrong kind)."""


class LimitExceeded(InputError):
    """The input is over one of the configured limits (bytes, rows, columns, rank ceiling)."""


class SpecError(InputError):
    """A specification string is malformed: a discount spec, a clip value, an estimator key, a mapping."""


class WrongType(InputError, TypeError):
    """An argument of the wrong type (a string where a number is expected, a DataFrame where logs are expected);
    a ``TypeError`` too, so callers that catch the built-in type keep working."""


class UnknownName(InputError, KeyError):
    """A name (reward, policy, column, dataset) that the loaded data does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Problem(str):
    """One problem line of a :class:`LogValidationError`: the text, plus its ``kind`` (``rank``, ``reward``,
    ``duplicate``, ``arm``, or ``""``) so an interface can choose its hint by kind, never by the wording.

    >>> p = Problem("column 'rank' must hold positive integers", kind="rank")
    >>> p.kind, p == "column 'rank' must hold positive integers"
    ('rank', True)
    """

    kind: str

    def __new__(cls, text: str, *, kind: str = "") -> Problem:
        out = super().__new__(cls, text)
        out.kind = kind
        return out


class NeedsAnswers(InputError):
    """The file does not say something offeval needs (which columns are rewards, which column is the A/B arm)
    and the caller asked to be told instead of given a guess: ``reading`` is what was understood
    (:class:`offeval_core.reading.Reading`), ``questions`` what a person must answer. Nothing was computed."""

    def __init__(self, source: str, reading, questions: Sequence):
        self.reading = reading
        self.questions = tuple(questions)
        lines = "\n".join(f"  - {q.text}" for q in self.questions)
        super().__init__(f"{source}: {len(self.questions)} question(s) before anything is computed:\n{lines}",
                         source=source)


class NeedsArms(InputError):
    """An analysis compares offline with online results but the data hold no A/B test (control and treatment
    arms)."""


class LogValidationError(InputError):
    """Ranking logs that do not follow the schema; ``problems`` lists every specific problem found and
    ``unmapped`` the required schema columns that are missing (a mapping from the user's names would fix them)."""

    def __init__(self, source: str, problems: Sequence[str], *, unmapped: Sequence[str] = ()):
        self.problems = list(problems)
        self.unmapped = tuple(unmapped)
        """Schema columns the logs lack that a column mapping could supply (each interface says how)."""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s) in the logs:\n{lines}", source=source)


class MomentsValidationError(InputError):
    """A moments file whose content is inconsistent (counts, sums, second moments, metadata)."""


class HeldoutValidationError(InputError):
    """Qrels or runs that do not follow their layout (fields, columns, numbers, repeated pairs); the message
    names the lines or rows, never their content."""


class NonFiniteMoments(InputError):
    """A sum, mean or variance of the data is beyond double precision (values or weights near 10³⁰⁸, squares
    of values beyond 10¹⁵⁴): offeval stops rather than show an infinite, undefined or 0 standard error."""


class MissingTool(OffevalError, RuntimeError):
    """A program offeval needs on this machine is not installed (Chromium for static export); the message says
    how to install it. Nothing is downloaded."""


class NeedsRawLogs(OffevalError, LookupError):
    """An analysis needs per-row logs but only a moments file is loaded."""


class OutputExists(OffevalError, FileExistsError):
    """Writing would overwrite an existing output (without ``force``) or one of the inputs."""


class UnwritableOutput(InputError):
    """An output cannot be created where the user asked (no permission, a read-only or full file system, a
    file where a directory is needed); nothing was written."""


class MissingInput(InputError, FileNotFoundError):
    """The named file, directory or data-directory entry does not exist."""


class UnreadableLogs(UnreadableInput, LogValidationError):
    """Logs whose file cannot be read (empty, corrupt, truncated, unsupported kind); one problem listed."""

    def __init__(self, source: str, problems: Sequence[str]):
        LogValidationError.__init__(self, source, problems)


class LogsOverLimit(LimitExceeded, LogValidationError):
    """Logs over one of the configured limits (bytes, rows, columns, rank ceiling); one problem listed."""

    def __init__(self, source: str, problems: Sequence[str]):
        LogValidationError.__init__(self, source, problems)


class EstimatorWarning(UserWarning):
    """An estimator ran but fell back from its definition on part of the data (e.g. PointNCIS contexts with
    a single logged row share their cell's normaliser); the message says where and why."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


_NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("offeval_estimator_notes", default=None)


@contextlib.contextmanager
def estimator_notes() -> Iterator[list[str]]:
    """Collect the messages of the estimator warnings (:class:`EstimatorWarning`) raised inside the block (in this thread or task
    only) into the list it yields, instead of warning: for a caller that shows them itself, e.g. a dashboard page
    next to the numbers they qualify. Blocks nest; the innermost collects.

    >>> with estimator_notes() as notes:
    ...     warn_estimator("3 of 12 sessions fell back")
    >>> notes
    ['3 of 12 sessions fell back']
    """
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def warn_estimator(message: str) -> None:
    """Warn with an :class:`EstimatorWarning` attributed to the first caller outside this package (the line of
    the caller's code that asked for the estimate), however deep inside the package the warning is raised; the
    outermost frame when every frame is the package's. Inside :func:`estimator_notes` the message is collected
    there instead."""
    notes = _NOTES.get()
    if notes is not None:
        notes.append(message)
        return
    frame, level = sys._getframe(1), 2      # stacklevel 2 is warn_estimator's caller
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, EstimatorWarning, stacklevel=level)
