"""One set of defaults: the dashboard, the HTML report and the command line use the same confidence level and
online significance threshold (offeval_core.defaults)."""

from __future__ import annotations

import inspect

from dashboard.state import PAGE_CONTROLS, Settings
from offeval_core import defaults, report
from offeval_core.analyses import sensitivity
from offeval_core.cli import build_parser


def _command_defaults(command: str) -> dict:
    parser = build_parser(command)
    sub = next(a for a in parser._subparsers._group_actions if a.dest == "command")
    return {a.dest: a.default for a in sub.choices[command]._actions}


def test_every_entry_point_uses_the_shared_level_and_online_threshold():
    assert (defaults.LEVEL, defaults.ONLINE_ALPHA) == (0.99, 0.001)  # KDD'24 Sec. 6.2: 99 % CIs, p ≪ 0.001
    assert Settings().level == defaults.LEVEL
    assert PAGE_CONTROLS["sens_alpha"].default == defaults.ONLINE_ALPHA
    sig = inspect.signature(report.build_report)
    assert sig.parameters["sensitivity_level"].default == defaults.LEVEL
    assert sig.parameters["decision_level"].default == defaults.LEVEL  # the report's decisions used 95 % before
    assert sig.parameters["online_alpha"].default == defaults.ONLINE_ALPHA
    s = inspect.signature(sensitivity)
    assert (s.parameters["level"].default, s.parameters["online_alpha"].default) == (defaults.LEVEL,
                                                                                     defaults.ONLINE_ALPHA)
    assert _command_defaults("estimate")["level"] == defaults.LEVEL
    rep = _command_defaults("report")
    assert (rep["level"], rep["online_alpha"]) == (defaults.LEVEL, defaults.ONLINE_ALPHA)
