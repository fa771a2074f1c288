"""``offeval estimate LOGS``: offline estimate of a target policy (DCG family of KDD'24 or the importance
sampling family of Gilotte et al.), its paired effect over the logging policy, and the online A/B outcome,
per group."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd

from offeval_core import importance as imp
from offeval_core.commands.argtypes import non_negative_int
from offeval_core.commands.log_options import add_log_options, announce_policy, read_command_logs
from offeval_core.defaults import LEVEL
from offeval_core.engine import Grid, reduce
from offeval_core.errors import SpecError, UnknownName
from offeval_core.estimators import ESTIMATORS, impression_online_results, select, summarize_groups
from offeval_core.logs import LOGGING_POLICY, read_table
from offeval_core.mapping import parse_mapping
from offeval_core.results import json_number
from offeval_core.slate import cli as slate_cli
from offeval_core.validation import check_level, clip_value, parse_clip

__all__ = [
    "register", "run",
]


DCG_FAMILY = ("dcg", "ndcg", "pndcg")
IMPORTANCE = ("is", "snips", "cis", "ncis", "piece-ncis", "point-ncis")


def register(sub) -> None:
    p = sub.add_parser("estimate", help="offline estimate of a policy vs the logging policy, and the online truth",
                       description="Estimate a target policy's value on the logging policy's sessions (control "
                                   "arm), its paired effect over the logging policy, and the online outcome.")
    p.add_argument("logs", help="CSV or Parquet logs")
    p.add_argument("--reward", required=True, help="reward column, e.g. like")
    p.add_argument("--policy", default=None, help="target policy (column rank__<policy> or "
                                                  "target_propensity__<policy>); default: treatment, else the first "
                                                  "policy that is not the logging policy (said on stderr); 'logging' "
                                                  "for the logging policy alone (DCG family)")
    p.add_argument("--estimator", default=None, choices=[*DCG_FAMILY, *IMPORTANCE, *slate_cli.SLATE_ESTIMATORS],
                   help="dcg, ndcg, pndcg (KDD'24) or is, snips, cis, ncis, piece-ncis, point-ncis "
                        "(Gilotte et al. WSDM'18) or slate estimators iips, rips, sips, sniips, snrips, snsips, "
                        "cascade-dr, aips (docs/slate.md); default dcg")
    p.add_argument("--metric", default=None, choices=list(DCG_FAMILY), help="alias of --estimator for the DCG family")
    p.add_argument("--discount", default="pbm", help="target discount D: log2, reciprocal, exponential:p, pbm, "
                                                     "table:FILE.csv, optional @n cut-off (default pbm)")
    p.add_argument("--exposure", default="pbm", help="exposure model D0 of the logged ranks (default pbm)")
    p.add_argument("--clip", default="inf", help="auto: the recommended clip (its reason on stderr); DCG family: clip m ≥ 1 of 1/D0; importance: capping value c ≥ 1 "
                                                 "of the weights; inf (default) = uncapped")
    p.add_argument("--capping", default="max", choices=list(imp.CAPPINGS),
                   help="importance: max-capping min(w, c) (default) or zero-capping w·1{w < c}")
    p.add_argument("--scale", default="session", choices=list(imp.SCALES),
                   help="importance: reward per session (default) or per logged impression (CTR-like)")
    p.add_argument("--weights", default="auto", choices=list(imp.WEIGHT_MODES),
                   help="importance: weights from propensity columns or exposure ratios D(R(i))/D0(i); auto "
                        "(default) uses propensities when the logs have 'logging_propensity'")
    p.add_argument("--strata", default="segment", help="piece-ncis: session-level column of the strata "
                                                       "(default segment)")
    p.add_argument("--context", default="session", help="point-ncis: session-level column naming the context "
                                                        "(default: each session is its own context)")
    p.add_argument("--bootstrap", type=non_negative_int, default=0, metavar="N",
                   help="importance: also report percentile-bootstrap CIs from N session resamples (re-normalised "
                        "in each resample)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--ndcg-rule", default="zero", choices=["zero", "drop"],
                   help="sessions with iDCG = 0 count 0 (zero, default) or are dropped (drop)")
    p.add_argument("--level", type=float, default=LEVEL, help=f"confidence level (default {LEVEL:g})")
    p.add_argument("--by", default="", help="group by these keys, e.g. day,experiment_id (default: all data)")
    add_log_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    slate_cli.add_arguments(p)
    p.set_defaults(func=run)


def _estimator(args) -> str:
    if args.estimator and args.metric and args.estimator != args.metric:
        raise SpecError(f"--metric {args.metric} and --estimator {args.estimator} disagree; give one of them")
    return args.estimator or args.metric or "dcg"


def run(args) -> int:
    check_level(args.level)
    estimator = _estimator(args)
    mapping = parse_mapping(args.map)
    logs = read_command_logs(args, "estimate", rewards=[args.reward])
    logs.check_reward(args.reward)
    args.policy = announce_policy(logs, "estimate", args.policy)
    clip = _auto_clip(args, logs) if str(args.clip).strip().lower() == "auto" else parse_clip(args.clip)
    by = [logs.schema_name(k.strip()) for k in args.by.split(",") if k.strip()]  # the user's names work
    twice = [k for i, k in enumerate(by) if k in by[:i]]
    if twice:
        raise SpecError(f"--by names {twice[0]!r} twice; list each group key once (e.g. --by experiment_id,day)",
                        source="--by")
    if estimator in DCG_FAMILY:
        return _run_dcg(args, logs, clip, by, estimator)
    if estimator in slate_cli.SLATE_ESTIMATORS:
        return slate_cli.run(args, logs, clip=clip, by=by, estimator=estimator)
    return _run_importance(args, logs, clip, by, estimator, mapping)


def _auto_clip(args, logs) -> float:
    """``--clip auto``: the dashboard's and the report's recommendation
    (``analyses.clip_tuning.recommended_clip``), its reason printed on stderr."""
    from offeval_core.analyses.clip_tuning import recommended_clip
    from offeval_core.policies import policy_kind

    policy = args.policy
    if policy is not None and policy_kind(logs, policy) != "propensity":  # a propensity policy is tuned as CIS
        policy = logs.check_policy(policy)
    if policy is None:
        raise SpecError("--clip auto needs --policy: the recommendation weighs the bias bound against the "
                         "target policy's effect")
    rec = recommended_clip(logs, reward=args.reward, policy=policy, discount=args.discount,
                           exposure=args.exposure, level=args.level)
    print(f"offeval estimate: --clip auto: {rec.reason}", file=sys.stderr)
    return rec.clip


def _run_dcg(args, logs, clip, by, metric) -> int:
    policy = logs.check_policy(args.policy)
    grid = Grid(rewards=(args.reward,), policies=(policy,) if policy else (), discounts=(args.discount,),
                exposures=(args.exposure,), clips=(clip,), ndcg_rule=args.ndcg_rule)
    moments = reduce(logs, grid)
    results = summarize_groups(moments, reward=args.reward, policy=policy, metric=metric,
                               discount=args.discount, exposure=args.exposure, clip=clip, by=by, level=args.level)
    settings = {"logs": str(args.logs), "reward": args.reward, "policy": policy or "logging",
                "estimator": metric, "metric": metric, "discount": args.discount, "exposure": args.exposure,
                "clip": clip_value(clip), "level": args.level, "by": [logs.user_name(k) for k in by],
                "ndcg_rule": args.ndcg_rule, "offline_arm": "control", "scale": "session",
                "units": "mean per session"}
    if args.json:
        print(json.dumps({"settings": settings, "groups": [r.to_dict() for r in results]}, indent=2))
        return 0
    print(_table(results, by, args.level, policy, metric, "mean per session", names=logs.columns))
    return 0


def _strata_arg(spec: str, args, logs, mapping, *, name: str):
    """A session-level column of the logs, or (for columns ``read_logs`` does not keep, e.g. text) the
    column read again from the file, keyed by session_id."""
    if spec in (None, "", "none"):
        return None
    if spec == "session" or spec in logs.sessions.columns or spec in logs.frame.columns:
        return spec
    raw = read_table(args.logs).rename(columns={v: k for k, v in logs.columns.items()})
    if logs.reading is not None and logs.reading.sessions_from_rows:  # one session per row, numbered from 1
        raw = raw.assign(session_id=np.arange(1, len(raw) + 1))
    if spec not in raw.columns:
        raise UnknownName(f"--{name} {spec!r} is not a column of {args.logs} (columns: {', '.join(map(str, raw.columns))})")
    per = imp.per_session(raw["session_id"], raw[spec], name=f"--{name} column {spec!r}")
    ids = logs.sessions["session_id"].to_numpy()
    return pd.Series(per.reindex(ids).to_numpy(), index=ids)


def _run_importance(args, logs, clip, by, base, mapping) -> int:
    if args.policy in (None, LOGGING_POLICY):
        raise SpecError(f"--estimator {base} needs --policy: a target policy with a 'target_propensity__<policy>' "
                         "(propensity logs) or 'rank__<policy>' (ranking logs) column")
    key = imp.check_estimator(base, capping=args.capping, scale=args.scale).key
    strata = _strata_arg(args.strata, args, logs, mapping, name="strata")
    context = _strata_arg(args.context, args, logs, mapping, name="context")
    if base == "point-ncis" and not args.bootstrap:  # (the bootstrap says it itself)
        imp.warn_pooled_contexts(imp.session_sums(logs, reward=args.reward, policy=args.policy, clip=clip,
                                                  capping=args.capping, weights=args.weights, discount=args.discount,
                                                  exposure=args.exposure, strata=strata, context=context))
    moments = imp.reduce_importance(logs, rewards=(args.reward,), policies=(args.policy,), clips=(clip,),
                                    cappings=(args.capping,), scales=(args.scale,), weights=args.weights,
                                    discount=args.discount, exposure=args.exposure, strata=strata, context=context)
    d, e = moments.grid.discounts[0], moments.grid.exposures[0]
    for k in by:
        if k not in moments.keys or k == "arm":
            raise UnknownName(f"--by keys must be among {', '.join(k for k in moments.keys if k != 'arm')}; got {k!r}")
    results = summarize_groups(moments, reward=args.reward, policy=args.policy, metric=key, discount=d,
                               exposure=e, clip=clip, by=by, level=args.level)
    trows = select(moments, reward=args.reward, policy=args.policy, metric=key, discount=d, exposure=e, clip=clip)
    diags = imp.weight_diagnostics(trows, by)
    impression_online = _online_impression(moments, key, d, e, clip, args, by) if args.scale == "impression" else None
    units = ("reward per logged impression (CTR-like): Σ over sessions / Σ impressions" if args.scale == "impression"
             else "reward per session")
    settings = {"logs": str(args.logs), "reward": args.reward, "policy": args.policy, "estimator": base,
                "registry_key": key, "label": ESTIMATORS[key].label, "capping": args.capping,
                "clip": clip_value(clip), "scale": args.scale, "units": units,
                "weights": "propensity" if d == imp.PROPENSITY else f"exposure ratio D(R(i))/D0(i), D={d}, D0={e}",
                "strata": args.strata if base == "piece-ncis" else None,
                "context": args.context if base == "point-ncis" else None,
                "level": args.level, "by": by, "offline_arm": "control", "ci": "normal, delta method"}
    groups = []
    for i, r in enumerate(results):
        g = r.to_dict()
        drow = diags.iloc[i] if len(diags) > i else None
        if drow is not None:
            g["diagnostics"] = {k: json_number(float(drow[k])) for k in
                                ("ess", "ess_uncapped", "max_weight", "capped_share", "mean_weight")}
            if base == "point-ncis":
                g["diagnostics"]["exact_normaliser_share"] = json_number(float(drow["exact_share"]))
        if impression_online is not None:
            on = impression_online.get(tuple(r.keys[k] for k in by))
            if on is not None:
                g["online"] = on
        groups.append(g)
    out = {"settings": settings, "groups": groups, "notes": list(logs.notes)}
    if args.bootstrap:
        if by:
            raise SpecError("--bootstrap is computed on all data; drop --by")
        b = imp.bootstrap(logs, reward=args.reward, policy=args.policy, estimator=key, clip=clip,
                          capping=args.capping, scale=args.scale, n_boot=args.bootstrap, level=args.level,
                          rng=np.random.default_rng(args.seed), weights=args.weights, discount=args.discount,
                          exposure=args.exposure, strata=strata, context=context)
        out["bootstrap"] = {"n_boot": b.n_boot, "seed": args.seed, "logging": b.logging.to_dict(),
                            "target": b.target.to_dict(), "effect": b.effect.to_dict()}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(_table(results, by, args.level, args.policy, ESTIMATORS[key].label, units, online=impression_online,
                 names=logs.columns))
    if len(diags):
        dd = diags.iloc[0]
        print(f"weights: ESS {dd['ess']:.1f} of {int(dd['w_rows'])} rows, max weight {dd['max_weight']:.3g}, "
              f"capped mass {dd['capped_share']:.1%}, mean weight {dd['mean_weight']:.4g}")
    if "bootstrap" in out:
        bt = b.target
        print(f"bootstrap ({b.n_boot} resamples): target {bt.value:.4f} [{bt.ci.low:.4f}, {bt.ci.high:.4f}], "
              f"effect {b.effect.value:.4f} [{b.effect.ci.low:.4f}, {b.effect.ci.high:.4f}]")
    return 0


def _online_impression(moments, key, d, e, clip, args, by) -> dict:
    """Online per-impression outcome per group (:func:`offeval_core.estimators.impression_online_results`)."""
    res = impression_online_results(moments, reward=args.reward, metric=key, discount=d, exposure=e, clip=clip,
                                    by=by, level=args.level)
    return {k: r.to_dict() for k, r in res.items()}


def _fmt(est) -> str:
    return f"{est.value:.4f} [{est.ci.low:.4f}, {est.ci.high:.4f}]"


def _table(results, by, level, policy, label, units, online=None, names=None) -> str:
    lvl = f"{level:.0%}"
    head = [*((names or {}).get(k, k) for k in by), f"logging {label}"]
    if policy:
        head += [f"{policy} {label}", "effect", "p(effect≤0)"]
    head += ["online control", "online treatment", "online effect", "p (2-sided)"]
    rows = []
    for r in results:
        row = [str(r.keys[k]) for k in by] + [_fmt(r.logging)]
        if policy:
            row += [_fmt(r.target), _fmt(r.effect), f"{r.effect.p_value:.3g}"]
        on = online.get(tuple(r.keys[k] for k in by)) if online is not None else None
        if on is not None:
            fmt = (lambda d: f"{d['value']:.4f}" if d and d["value"] is not None else "")  # noqa: E731
            eff = on.get("effect")
            row += [fmt(on.get("control")), fmt(on.get("treatment")),
                    f"{eff['value']:.4f} [{eff['ci'][0]:.4f}, {eff['ci'][1]:.4f}]" if eff else "",
                    f"{eff['p_value_two_sided']:.3g}" if eff else ""]
        elif r.online:   # a group may lack either arm (treatment sessions only: no control, no effect)
            o = r.online
            row += [f"{o.control.value:.4f}" if o.control else "", f"{o.treatment.value:.4f}" if o.treatment else "",
                    _fmt(o.effect) if o.effect else "", f"{o.p_two_sided:.3g}" if o.effect else ""]
        else:
            row += ["", "", "", ""]
        rows.append(row)
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.append(f"values are {units}, [{lvl} CI]; offline on control-arm sessions")
    return "\n".join(lines)
