"""The ``offeval`` command line. Each sub-command lives in ``offeval_core/commands/<name>.py`` and exposes
``register(subparsers)``; the parser it adds sets ``func`` to a callable returning the exit status."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ["simulate", "validate", "estimate", "heldout", "report", "reduce"]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``only`` (then only that command's modules are imported,
    which keeps the start-up of e.g. ``offeval reduce`` to the engine's imports)."""
    parser = argparse.ArgumentParser(
        prog="offeval", description="Offline evaluation of ranking policies against online A/B tests."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only is None else [only]:
        importlib.import_module(f"offeval_core.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"offeval {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
