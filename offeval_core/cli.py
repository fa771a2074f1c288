"""The ``offeval`` command line. Each sub-command lives in ``offeval_core/commands/<name>.py`` and exposes
``register(subparsers)``; the parser it adds sets ``func`` to a callable returning the exit status."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ["simulate", "validate", "estimate", "heldout", "report", "reduce", "diagnose"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="offeval", description="Offline evaluation of ranking policies against online A/B tests."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"offeval_core.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"offeval {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
