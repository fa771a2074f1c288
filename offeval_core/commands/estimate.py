"""``offeval estimate LOGS``: offline DCG / nDCG / pnDCG of a target policy, its paired effect over the
logging policy, and the online A/B outcome, per group."""

from __future__ import annotations

import json

from offeval_core.engine import Grid, reduce
from offeval_core.estimators import summarize_groups
from offeval_core.logs import parse_mapping, read_logs
from offeval_core.validation import parse_clip


def register(sub) -> None:
    p = sub.add_parser("estimate", help="offline estimate of a policy vs the logging policy, and the online truth",
                       description="Estimate a target policy's value on the logging policy's sessions (control "
                                   "arm), its paired effect over the logging policy, and the online outcome.")
    p.add_argument("logs", help="CSV or Parquet logs")
    p.add_argument("--reward", required=True, help="reward column, e.g. like")
    p.add_argument("--policy", default=None, help="target policy (column rank__<policy>); omit for logging only")
    p.add_argument("--discount", default="pbm", help="target discount D: log2, reciprocal, exponential:p, pbm, "
                                                     "table:FILE.csv, optional @n cut-off (default pbm)")
    p.add_argument("--exposure", default="pbm", help="exposure model D0 of the logged ranks (default pbm)")
    p.add_argument("--clip", default="inf", help="clip m ≥ 1 of the inverse exposure 1/D0, or inf (default)")
    p.add_argument("--metric", default="dcg", choices=["dcg", "ndcg", "pndcg"])
    p.add_argument("--ndcg-rule", default="zero", choices=["zero", "drop"],
                   help="sessions with iDCG = 0 count 0 (zero, default) or are dropped (drop)")
    p.add_argument("--level", type=float, default=0.99, help="confidence level (default 0.99)")
    p.add_argument("--by", default="", help="group by these keys, e.g. day,experiment_id (default: all data)")
    p.add_argument("--map", default=None, metavar="NAME=COL,...", help="column mapping, e.g. rank=pos")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    logs = read_logs(args.logs, columns=parse_mapping(args.map))
    clip = parse_clip(args.clip)
    logs.check_reward(args.reward)
    policy = logs.check_policy(args.policy)
    by = [k.strip() for k in args.by.split(",") if k.strip()]
    grid = Grid(rewards=(args.reward,), policies=(policy,) if policy else (), discounts=(args.discount,),
                exposures=(args.exposure,), clips=(clip,), ndcg_rule=args.ndcg_rule)
    moments = reduce(logs, grid)
    results = summarize_groups(moments, reward=args.reward, policy=policy, metric=args.metric,
                               discount=args.discount, exposure=args.exposure, clip=clip, by=by, level=args.level)
    settings = {"logs": str(args.logs), "reward": args.reward, "policy": policy or "logging",
                "metric": args.metric, "discount": args.discount, "exposure": args.exposure,
                "clip": "inf" if clip == float("inf") else clip, "level": args.level, "by": by,
                "ndcg_rule": args.ndcg_rule, "offline_arm": "control"}
    if args.json:
        print(json.dumps({"settings": settings, "groups": [r.to_dict() for r in results]}, indent=2))
        return 0
    print(_table(results, by, args, policy))
    return 0


def _fmt(est) -> str:
    return f"{est.value:.4f} [{est.ci.low:.4f}, {est.ci.high:.4f}]"


def _table(results, by, args, policy) -> str:
    lvl = f"{args.level:.0%}"
    head = [*by, f"logging {args.metric}"]
    if policy:
        head += [f"{policy} {args.metric}", "effect", "p(effect≤0)"]
    head += ["online control", "online treatment", "online effect", "p (Welch, 2-sided)"]
    rows = []
    for r in results:
        row = [str(r.keys[k]) for k in by] + [_fmt(r.logging)]
        if policy:
            row += [_fmt(r.target), _fmt(r.effect), f"{r.effect.p_value:.3g}"]
        if r.online and r.online.treatment is not None:
            row += [f"{r.online.control.value:.4f}", f"{r.online.treatment.value:.4f}", _fmt(r.online.effect),
                    f"{r.online.p_two_sided:.3g}"]
        else:
            row += [f"{r.online.control.value:.4f}" if r.online else "", "", "", ""]
        rows.append(row)
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.append(f"values are mean per session, [{lvl} CI]; offline on control-arm sessions")
    return "\n".join(lines)
