"""``offeval diagnose LOGS``: which estimator to trust on these logs — assumption tests with effect sizes and
CIs, per-estimator weight diagnostics and a verdict with its reason (docs/diagnose.md)."""

from __future__ import annotations

import json
import math

import pandas as pd

from offeval_core.commands.log_options import add_log_options, announce_policy, read_command_logs
from offeval_core.defaults import LEVEL
from offeval_core.diagnose import diagnose
from offeval_core.errors import InputError
from offeval_core.logs import read_table

__all__ = [
    "default_reward", "register", "run",
]


def register(sub) -> None:
    p = sub.add_parser("diagnose", help="which estimator to trust: assumption tests and verdicts",
                       description="Test the assumptions of the offline estimators on the logs (cascade, reward "
                                   "interaction, context-dependent position bias, support) and give each "
                                   "estimator a verdict: trust, caution or don't, with the reason.")
    p.add_argument("logs", help="CSV or Parquet logs")
    p.add_argument("--reward", default=None, help="reward column (default: the first binary reward column)")
    p.add_argument("--policy", default=None, help="target policy (default: treatment, else the first policy that is "
                                                  "not the logging policy)")
    p.add_argument("--discount", default="log2", help="target discount D for the support check (default log2)")
    p.add_argument("--categories", default=None, metavar="FILE.csv",
                   help="item categories (columns item_id, category) for the reward-interaction test")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of every check (default 0.05)")
    p.add_argument("--level", type=float, default=LEVEL, help=f"confidence level of the CIs (default {LEVEL:g})")
    add_log_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _categories(path: str | None) -> pd.Series | None:
    if not path:
        return None
    table = read_table(path)
    missing = [c for c in ("item_id", "category") if c not in table.columns]
    if missing:
        raise InputError(f"{path}: the category table needs columns item_id and category; missing "
                         f"{', '.join(missing)}")
    if table["item_id"].duplicated().any():
        raise InputError(f"{path}: item_id {table['item_id'][table['item_id'].duplicated()].iloc[0]!r} appears twice")
    return pd.Series(table["category"].to_numpy(), index=table["item_id"].to_numpy())


def default_reward(logs) -> str:
    """The first reward column holding only 0 and 1, else the first reward."""
    for r in logs.rewards:
        if logs.frame[r].isin((0.0, 1.0)).all():
            return r
    return logs.rewards[0]


def run(args) -> int:
    logs = read_command_logs(args, "diagnose", rewards=[args.reward] if args.reward else None)
    reward = args.reward or default_reward(logs)
    d = diagnose(logs, reward=reward, policy=announce_policy(logs, "diagnose", args.policy), discount=args.discount,
                 categories=_categories(args.categories), alpha=args.alpha, level=args.level)
    if args.json:
        print(json.dumps(d.to_dict(), indent=2))
        return 0
    print(f"{d.source}: reward {d.reward}, target {d.policy or '—'}, α = {d.alpha:g}")
    print("assumptions")
    for c in d.checks:
        status = "not testable" if not c.identified else ("VIOLATED" if c.fires else "ok")
        eff = "" if math.isnan(c.effect) else f" {c.effect:.3g} [{c.low:.3g}, {c.high:.3g}]"
        print(f"  {c.name:<33} {status:<12}{eff}")
        print(f"      {c.finding}")
    if d.estimators:
        print("estimators")
        for e in d.estimators:
            print(f"  {e.label:<45} {e.verdict.upper():<8} {e.reason}")
    return 0
