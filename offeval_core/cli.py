"""The ``offeval`` command line. Each sub-command lives in ``offeval_core/commands/<name>.py`` and exposes
``register(subparsers)``; the parser it adds sets ``func`` to a callable returning the exit status."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from offeval_core.errors import EstimatorWarning, OffevalError
from offeval_core.limits import ENV
from offeval_core.sanitize import TerminalStream

__all__ = ["COMMANDS", "build_parser", "main", "map_hint"]

COMMANDS = ["simulate", "validate", "estimate", "heldout", "report", "reduce", "diagnose", "dashboard"]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``only`` (then only that command's modules are imported,
    which keeps the start-up of e.g. ``offeval reduce`` to the engine's imports)."""
    parser = argparse.ArgumentParser(
        prog="offeval", description="Offline evaluation of ranking policies against online A/B tests."
    )
    limits = parser.add_argument_group("input limits (default: the OFFEVAL_MAX_* environment variables, else "
                                       "the documented defaults; docs/security.md)")
    limits.add_argument("--max-bytes", default=None, metavar="SIZE",
                        help="largest input file after decompression, e.g. 4GiB (default 1 GiB)")
    limits.add_argument("--max-rows", default=None, metavar="N", help="most data rows of one file (20 000 000)")
    limits.add_argument("--max-columns", default=None, metavar="N", help="most columns of one file (1 000)")
    limits.add_argument("--max-rank", default=None, metavar="N", help="rank ceiling of rank columns (100 000)")
    limits.add_argument("--max-memory", default=None, metavar="SIZE",
                        help="memory one input may take once loaded (estimated before decoding), e.g. 8GiB "
                             "(default 2 GiB)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only is None else [only]:
        importlib.import_module(f"offeval_core.commands.{name}").register(sub)
    return parser


def _limits_env(args) -> dict[str, str]:
    """The limit flags as OFFEVAL_MAX_* variables (checked here, so a bad value is a usage error)."""
    from offeval_core.limits import parse_size

    out = {}
    for field, var in ENV.items():
        value = getattr(args, field, None)
        if value is not None:
            out[var] = str(parse_size(value, name=f"--{field.replace('_', '-')}"))
    return out


def map_hint(exc: BaseException) -> str:
    """How the command line answers what an error says is missing ('' if nothing): the schema columns a
    :class:`LogValidationError` names as missing (``--map``), arm labels it cannot map (``--arms``), the
    questions of a :class:`~offeval_core.errors.NeedsAnswers` (``--reward``, ``--map arm=…``)."""
    from offeval_core.errors import NeedsAnswers
    from offeval_core.understanding import question_action

    if isinstance(exc, NeedsAnswers):
        return "; ".join(question_action(q, "cli") for q in exc.questions)
    hints = []
    unmapped = getattr(exc, "unmapped", ())
    if unmapped:
        example = ",".join(f"{c}=<your column>" for c in unmapped)
        hints.append(f"map your column names with --map '{example}' (patterns such as rank__*=<prefix>* map several "
                     "target-policy columns at once)")
    if any(getattr(p, "kind", "") == "arm" for p in getattr(exc, "problems", ())):
        hints.append("say which label is which arm with --arms control=<label>,treatment=<label> (or --arms none "
                     "when the column is not the arm)")
    return "; ".join(hints)


def main(argv: list[str] | None = None) -> int:
    """Run one command; every input or output problem prints one message (or the problem list) to stderr
    and exits with status 2, never a traceback. Everything the command prints goes through
    :class:`~offeval_core.sanitize.TerminalStream`: a name or value from a file cannot send a control sequence
    (ANSI colours, OSC titles, hyperlinks or clipboard writes) to the terminal."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalStream(sys.stdout), TerminalStream(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    saved = {var: os.environ.get(var) for var in ENV.values()}
    shown = warnings.showwarning

    def note(message, category, *rest, **kw):  # an estimator's fallback: one line, not a Python warning
        if issubclass(category, EstimatorWarning):
            print(f"offeval {args.command}: note: {message}", file=sys.stderr)
        else:
            shown(message, category, *rest, **kw)

    try:
        os.environ.update(_limits_env(args))
        with warnings.catch_warnings():
            warnings.showwarning = note
            return int(args.func(args) or 0)
    except OffevalError as exc:  # offeval's own errors only: anything else is a bug and shows its traceback
        print(f"offeval {args.command}: error: {exc}", file=sys.stderr)
        if hint := map_hint(exc):
            print(f"offeval {args.command}: hint: {hint}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file the command could not open, create or write (permissions, a directory…)
        name = f"{exc.filename}: " if exc.filename else ""
        print(f"offeval {args.command}: error: {name}{exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"offeval {args.command}: error: out of memory; the input is too large for this machine (lower "
              "--max-rows / --max-bytes, or use `offeval reduce` on Parquet logs)", file=sys.stderr)
        return 2
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


if __name__ == "__main__":
    sys.exit(main())
