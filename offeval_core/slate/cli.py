"""``offeval estimate --estimator iips|rips|sips|sniips|snrips|snsips|cascade-dr|aips`` on slate logs."""

from __future__ import annotations

import json
import math

import numpy as np

from offeval_core.errors import SpecError, UnknownName
from offeval_core.slate.estimators import ASSUMPTION, LABELS, SLATE_ESTIMATORS, estimate
from offeval_core.slate.schema import from_logs

__all__ = [
    "SLATE_ESTIMATORS", "add_arguments", "run",
]




def add_arguments(p) -> None:
    """Options only the slate estimators read."""
    p.add_argument("--slot-weights", default="none",
                   help="slate estimators: weight λ_k of each slot's reward: none (default, reward per session) "
                        "or a discount spec such as log2 or exponential:0.8@5")


def run(args, logs, *, clip: float, by: list[str], estimator: str) -> int:
    if not args.policy:
        raise SpecError(f"--estimator {estimator} needs --policy: a target policy with "
                         "'target_propensity__<policy>' / 'target_conditional_propensity__<policy>' columns")
    data = from_logs(logs, reward=args.reward, policy=args.policy)
    if by:
        if data.contexts is None or any(k not in data.contexts.columns for k in by):
            raise UnknownName(f"--by keys for slate estimators must be among experiment_id, day, segment; got {by}")
        groups = data.contexts.groupby(by, observed=True, sort=True).indices
    else:
        groups = {(): np.arange(data.n_sessions)}
    results = []
    for key, sessions in groups.items():
        key = key if isinstance(key, tuple) else (key,)
        part = data if not by else data.subset(sessions)
        res = estimate(part, estimator=estimator, level=args.level, slot_weights=args.slot_weights, clip=clip,
                       rng=args.seed)
        results.append(({k: str(v) for k, v in zip(by, key, strict=True)}, res))
    settings = {"logs": str(args.logs), "reward": args.reward, "policy": args.policy, "estimator": estimator,
                "label": LABELS[estimator], "assumption": ASSUMPTION[estimator],
                "clip": "inf" if math.isinf(clip) else clip, "slot_weights": args.slot_weights, "level": args.level,
                "by": by, "offline_arm": "control", "units": "expected reward per session (Σ_k λ_k r_k)",
                "ci": "normal; self-normalised estimators by the delta method"}
    if args.json:
        print(json.dumps({"settings": settings, "groups": [{"keys": k, **r.to_dict()} for k, r in results],
                          "notes": list(logs.notes)}, indent=2))
        return 0
    lvl = f"{args.level:.0%}"
    fmt = (lambda e: f"{e.value:.4f} [{e.ci.low:.4f}, {e.ci.high:.4f}]")  # noqa: E731
    for keys, r in results:
        head = ", ".join(f"{k}={v}" for k, v in keys.items())
        print(f"{head + ': ' if head else ''}{LABELS[estimator]} ({ASSUMPTION[estimator]})")
        print(f"  logging        {fmt(r.logging)}")
        print(f"  {args.policy:<14} {fmt(r.target)}")
        print(f"  effect         {fmt(r.effect)}  p(effect ≤ 0) = {r.effect.p_value:.3g}")
        if r.diagnostics is not None:
            d = r.diagnostics
            print(f"  weights: ESS {d.ess:.1f} ({d.ess_share:.1%} of sessions, worst slot), max weight "
                  f"{d.max_weight:.3g}, largest weight's share {d.max_share:.1%}")
        if r.note:
            print(f"  {r.note}")
    print(f"values are expected reward per session, [{lvl} CI]; offline on control-arm sessions")
    return 0
