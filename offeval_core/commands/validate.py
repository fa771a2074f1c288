"""``offeval validate LOGS``: check logs against the schema and print what offeval understood of them."""

from __future__ import annotations

import json
import sys

from offeval_core.commands.log_options import add_log_options, read_command_logs
from offeval_core.errors import InputError, NeedsAnswers
from offeval_core.logs import LogValidationError
from offeval_core.understanding import reading_lines, understand

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("validate", help="check logs against the schema and say what was understood",
                       description="Check ranking logs (CSV or Parquet) and print what offeval understood of them "
                                   "(sessions, arms, policies, rewards and why, ignored columns and why), or every "
                                   "problem found with the first offending rows, or the questions the file leaves "
                                   "open. Exit status 0 = valid, 2 = invalid or a question to answer.")
    p.add_argument("logs", help="CSV or Parquet file (or a directory of Parquet files)")
    add_log_options(p)
    p.add_argument("--reward", action="append", default=None,
                   help="reward column(s) to use (default: the numeric columns that can be rewards; see the output)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from offeval_core.cli import map_hint

    try:
        logs = read_command_logs(args, "validate", rewards=args.reward)
    except NeedsAnswers as exc:  # what was understood so far, then the questions and how to answer them
        if args.json:
            print(json.dumps({"source": exc.source, "valid": False, "questions": [q.text for q in exc.questions],
                              "understood": [{"topic": t, "text": x} for t, x in reading_lines(exc.reading, fields=True)]},
                             indent=2))
            return 2
        print(f"{exc.source}: what offeval understood so far")
        print("\n".join(f"  {t + ':':<19} {x}" for t, x in reading_lines(exc.reading, fields=True)))
        print(f"offeval validate: error: {exc}", file=sys.stderr)
        print(f"offeval validate: hint: {map_hint(exc)}", file=sys.stderr)
        return 2
    except LogValidationError as exc:
        if args.json:
            print(json.dumps({"source": exc.source, "valid": False, "problems": exc.problems}, indent=2))
        else:
            print(str(exc), file=sys.stderr)
            if hint := map_hint(exc):
                print(f"offeval validate: hint: {hint}", file=sys.stderr)
        return 2
    except InputError as exc:  # a missing file, a bad --map: one problem
        if not args.json:
            raise
        print(json.dumps({"source": args.logs, "valid": False, "problems": [str(exc)]}, indent=2))
        return 2
    u = understand(logs)
    if args.json:
        print(json.dumps({"valid": True, **u.to_dict()}, indent=2))
    else:
        print(u.to_text())
    return 0
