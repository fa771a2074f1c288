"""``offeval validate LOGS``: check logs against the schema and print a readable report."""

from __future__ import annotations

import json
import sys

from offeval_core.errors import InputError
from offeval_core.logs import LogValidationError, read_logs, summarize
from offeval_core.mapping import parse_mapping

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("validate", help="check logs against the schema and summarise them",
                       description="Check ranking logs (CSV or Parquet) and print a summary, or every problem "
                                   "found with the first offending rows. Exit status 0 = valid, 2 = invalid.")
    p.add_argument("logs", help="CSV or Parquet file (or a directory of Parquet files)")
    p.add_argument("--map", default=None, metavar="NAME=COL,...",
                   help="map schema names to your column names, e.g. session_id=visit,rank=pos")
    p.add_argument("--reward", action="append", default=None,
                   help="reward column(s) to use (default: every numeric non-schema column)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        logs = read_logs(args.logs, columns=parse_mapping(args.map), rewards=args.reward, guess=True)
    except LogValidationError as exc:
        if args.json:
            print(json.dumps({"source": exc.source, "valid": False, "problems": exc.problems}, indent=2))
        else:
            from offeval_core.cli import map_hint

            print(str(exc), file=sys.stderr)
            if hint := map_hint(exc):
                print(f"offeval validate: hint: {hint}", file=sys.stderr)
        return 2
    except InputError as exc:  # a missing file, a bad --map: one problem
        if not args.json:
            raise
        print(json.dumps({"source": args.logs, "valid": False, "problems": [str(exc)]}, indent=2))
        return 2
    summary = summarize(logs)
    if args.json:
        print(json.dumps({"valid": True, **summary.to_dict()}, indent=2))
    else:
        print(summary.to_text())
    return 0
