"""What every command that reads ranking logs shares: the ``--map`` and ``--arms`` options, reading the logs
with the common names guessed, and the sentences on stderr that say what was guessed and why.

A command refuses, with the question and the option that answers it, when the file does not say which
columns are rewards or which column is the A/B arm (:class:`~offeval_core.errors.NeedsAnswers`); a guess it
can stand by (a reward named like one, A / B arm labels, one session per bandit round) goes ahead and is said
on stderr.
"""

from __future__ import annotations

import sys

from offeval_core.arm_values import parse_arms
from offeval_core.logs import Logs, read_logs
from offeval_core.mapping import parse_mapping
from offeval_core.policies import target_policies

__all__ = ["ARMS_HELP", "MAP_HELP", "add_log_options", "announce_policy", "read_command_logs"]

MAP_HELP = ("column mapping, e.g. session_id=visit,rank=pos,rank__*=pos_* (a '*' pattern maps every policy column); "
            "common names (visit, pos, variant, date, test…) are guessed")
ARMS_HELP = ("which arm label is control and which treatment, e.g. control=A,treatment=B (A/B, 0/1, control/test, "
             "baseline/variant, off/on are recognised); 'none' when the file has no arm column")


def add_log_options(parser) -> None:
    """``--map`` and ``--arms``."""
    parser.add_argument("--map", default=None, metavar="NAME=COL,...", help=MAP_HELP)
    parser.add_argument("--arms", default=None, metavar="control=A,treatment=B", help=ARMS_HELP)


def read_command_logs(args, command: str, *, rewards=None, path=None, name: str | None = None) -> Logs:
    """Read ``args.logs`` (or ``path``) with ``--map`` / ``--arms``, common names guessed; each guess is said
    on stderr. Raises NeedsAnswers when the file leaves a question open."""
    logs = read_logs(path if path is not None else args.logs, columns=parse_mapping(getattr(args, "map", None)),
                     rewards=rewards, guess=True, arms=parse_arms(getattr(args, "arms", None)), ask="ambiguous",
                     name=name)
    say_guesses(logs, command)
    return logs


def say_guesses(logs, command: str) -> None:
    """Each guess of the reading of ``logs`` (validated logs or a reduce's source over files) on stderr."""
    for g in logs.reading.guesses if logs.reading is not None else ():
        print(f"offeval {command}: guessed {g}", file=sys.stderr)


def announce_policy(logs: Logs, command: str, policy: str | None) -> str | None:
    """The target policy a command uses: ``policy`` when given, else the default (never the logging policy when
    another exists), said on stderr with its reason."""
    if policy is not None:
        return policy
    t = target_policies(logs)
    if t.default is not None:
        print(f"offeval {command}: target policy {t.default} ({t.reason}); --policy chooses another",
              file=sys.stderr)
    return t.default
