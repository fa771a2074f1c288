"""``offeval simulate``: write simulated feed logs with exact ground truth (see offeval_core.simulate)."""

from __future__ import annotations

import argparse
from pathlib import Path

from offeval_core.errors import InputError
from offeval_core.safe_io import atomic_write, check_output
from offeval_core.sim_spec import check_sim_option
from offeval_core.simulate import PRESETS, SURVIVALS, preset_config, true_survival, write_world

__all__ = ["NCIS_PRESET", "register", "run"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="write simulated ranking logs + exact ground truth (Parquet)",
        description="Simulate a short-video feed with A/B tests and write DIR/logs.parquet (or, with "
        "--partition-by-day / --preset large, DIR/logs/day-YYYY-MM-DD.parquet) and "
        "DIR/ground_truth.parquet. The bundled demo data: offeval simulate --out data --preset demo --seed 0",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing; files already "
                                                               "there are kept unless --force)")
    p.add_argument("--force", action="store_true",
                   help="replace existing output files (with --partition-by-day, also remove the day files of an "
                        "earlier run that this one does not write)")
    p.add_argument("--preset", default="demo", choices=[*PRESETS, NCIS_PRESET],
                   help="world size (default: demo); 'ncis-counterexample' writes the one-item logs of Gilotte "
                   "et al. (WSDM'18) Table 1 with propensity columns (sessions per arm: --impressions, default "
                   "10000, a multiple of 1000; exact population frequencies, so --seed is not used)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--impressions", type=int, default=None, metavar="N",
                   help="target number of logged impressions (sets the sessions per experiment-day-arm)")
    p.add_argument("--days", type=int, default=None, help="number of days")
    p.add_argument("--survival", choices=list(SURVIVALS), default=None,
                   help="viewing curve P(V=1|R=r): 'exponential' (the demo's), heavy-tailed 'learnt' or 'powerlaw' "
                        "(default: the preset's)")
    p.add_argument("--cascade", action="store_true", help="break Asm. 2: stopping is likelier after a reward")
    p.add_argument("--reward-interactions", action="store_true",
                   help="break Asm. 3: diminishing returns for same-topic items ranked above")
    p.add_argument("--contextual-position-bias", action="store_true",
                   help="break the context-free PBM: registered users scroll deeper")
    p.add_argument("--support-depth", type=int, default=None, metavar="D",
                   help="break Asm. 5: nobody scrolls beyond rank D, so items the logger ranks below D are "
                   "never logged")
    p.add_argument("--no-watch-time", action="store_true", help="omit the real-valued watch_time reward")
    p.add_argument("--partition-by-day", action="store_true",
                   help="write one logs file per day (always on for --preset large)")
    p.set_defaults(func=run)


NCIS_PRESET = "ncis-counterexample"


def _run_ncis(args: argparse.Namespace) -> int:
    """Write DIR/logs.parquet of :func:`offeval_core.importance.ncis_counterexample` (Gilotte Table 1)."""
    from offeval_core.importance import ncis_counterexample

    n = 10_000 if args.impressions is None else args.impressions
    if isinstance(n, bool) or n < 1:
        raise InputError(f"--impressions must be a positive integer, got {n!r}")
    logs = ncis_counterexample(n)
    path = check_output(Path(args.out) / "logs.parquet", force=args.force)
    atomic_write(path, lambda tmp: logs.to_parquet(tmp, index=False))
    print(f"Wrote {path} ({_mb(path.stat().st_size)}): Gilotte et al. Table 1 counter-example, {n:,} control "
          f"sessions logged by π_p and {n:,} treatment sessions served by π_t, one item each; reward 'value', "
          f"propensities 'logging_propensity' and 'target_propensity__test'. Population values: logging "
          f"1.9, target 2.1 (IS and PieceNCIS by segment recover it; NCIS with c = 10 does not).")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.preset == NCIS_PRESET:
        return _run_ncis(args)
    check_sim_option("seed", args.seed, shown="--seed")  # the caps of the dashboard's widgets and links
    for option, value, flag in (("days", args.days, "--days"), ("support", args.support_depth, "--support-depth")):
        if value is not None:
            check_sim_option(option, value, shown=flag)
    overrides: dict = {}
    if args.days is not None:
        overrides["n_days"] = args.days
    if args.survival is not None:
        overrides["survival"] = args.survival
    if args.cascade:
        overrides["cascade"] = True
    if args.reward_interactions:
        overrides["reward_interactions"] = True
    if args.contextual_position_bias:
        overrides["contextual_position_bias"] = True
    if args.support_depth is not None:
        overrides["support_depth"] = args.support_depth
    if args.no_watch_time:
        overrides["watch_time"] = False
    config = preset_config(args.preset, **overrides)
    if args.impressions is not None:
        if args.impressions < 1:
            raise InputError(f"--impressions must be a positive integer, got {args.impressions!r}")
        mean_len = float(true_survival(config).sum())
        groups = config.n_experiments * config.n_days * 2
        per_group = max(1, round(args.impressions / mean_len / groups))
        check_sim_option("sessions", per_group, shown=f"the sessions that --impressions {args.impressions:,} asks for")
        config = preset_config(args.preset, **overrides, sessions_per_arm_day=per_group)
    partition = args.partition_by_day or args.preset == "large"
    s = write_world(config, args.out, seed=args.seed, partition_by_day=partition, force=args.force)
    rates = ", ".join(
        f"{name} {value:.1%} of views" if name != "watch_time" else f"{name} {value:.1f} s per view"
        for name, value in s["reward_rates"].items()
    )
    files = "; ".join(f"{p} ({_mb(b)})" for p, b in _sizes(s))
    switches = [k for k in ("cascade", "reward_interactions", "contextual_position_bias") if overrides.get(k)]
    if config.support_depth is not None:
        switches.append(f"support_depth={config.support_depth}")
    print(
        f"Simulated preset '{args.preset}' (seed {args.seed}, survival '{config.survival}', switches: "
        f"{', '.join(switches) or 'none'}): {s['rows']:,} logged impressions in {s['sessions']:,} sessions, "
        f"{s['experiments']} experiments x {s['days']} days x 2 arms, K = {config.n_candidates} candidates "
        f"and {len(config.policies)} policies per session; reward rates: {rates}. "
        f"Wrote {files}; ground truth {s['ground_truth_path']} ({_mb(s['ground_truth_bytes'])}) "
        f"in {s['seconds']:.1f} s."
    )
    return 0


def _sizes(summary: dict) -> list[tuple[str, int]]:
    paths = summary["log_paths"]
    if len(paths) == 1:
        return [(paths[0], summary["log_bytes"])]
    return [(f"{len(paths)} day files under {paths[0].rsplit('/', 1)[0]}", summary["log_bytes"])]


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
