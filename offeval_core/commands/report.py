"""``offeval report LOGS --out report.html``: every analysis in one self-contained HTML file."""

from __future__ import annotations

import sys
from pathlib import Path

from offeval_core.commands.argtypes import non_negative_int, positive_int
from offeval_core.commands.log_options import add_log_options, read_command_logs
from offeval_core.defaults import LEVEL, ONLINE_ALPHA
from offeval_core.engine import DEFAULT_CLIPS
from offeval_core.errors import SpecError, UnwritableOutput
from offeval_core.moments_io import is_moments_file, read_metadata, read_moments
from offeval_core.policies import target_policies
from offeval_core.report import STEPS, write_report
from offeval_core.safe_io import check_output
from offeval_core.validation import format_clip, parse_clip

__all__ = ["DEFAULT_GRID_TEXT", "register", "run"]

DEFAULT_GRID_TEXT = ",".join(format_clip(c) for c in DEFAULT_CLIPS)


def register(sub) -> None:
    p = sub.add_parser("report", help="write one self-contained HTML report with all analyses",
                       description="Compute sensitivity vs clipping, offline-online correlation, DCG vs nDCG, "
                                   "decision boxes and clip tuning, and write them to one HTML file that "
                                   "opens offline (plotly.js embedded).")
    p.add_argument("logs", help="CSV or Parquet logs, or a moments file written by `offeval reduce` (then the "
                                "sections that need the raw logs are replaced by a notice)")
    p.add_argument("--out", required=True, help="output HTML file, e.g. report.html (never the input; an "
                                                "existing file is kept unless --force)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--reward", action="append", default=None,
                   help="reward column(s); repeat or comma-separate (default: every reward; the first one is "
                        "used for DCG vs nDCG and clip tuning)")
    p.add_argument("--discount", default="pbm", help="discount D = exposure model D0 (default pbm, learnt)")
    p.add_argument("--clip-grid", default=DEFAULT_GRID_TEXT,
                   help="clip values m, comma-separated, 'inf' allowed (default 1,2,4,…,4096,inf)")
    p.add_argument("--q-clip", default="inf", help="clip m of the de-biased labels Q̂, as the dashboard's sidebar m: "
                                                    "the correlation table adds DCG (D, Q̂ at m) to Table 2's columns, "
                                                    "the decision boxes DCG at m (default inf)")
    p.add_argument("--policy", default=None, help="target policy of the A/B tests, taken to have served the treatment "
                                                  "arm: any rank__<policy> or target_propensity__<policy> column "
                                                  "(default: 'treatment' when the data has it, else the first policy "
                                                  "that is not the logging policy; said on stderr)")
    p.add_argument("--level", type=float, default=LEVEL, help=f"CI level of the sensitivity analysis ({LEVEL:g})")
    p.add_argument("--online-alpha", type=float, default=ONLINE_ALPHA,
                   help="online significance threshold, Welch two-sided p (default 0.001): a setting of the "
                        "sensitivity analysis is an online improvement when p < this and effect > --online-min-effect")
    p.add_argument("--online-min-effect", type=float, default=0.0,
                   help="online effect (reward per session) an improvement must exceed (default 0)")
    p.add_argument("--adjust", choices=("none", "holm", "bh"), default="none",
                   help="multiple testing: take the sensitivity detections and the decision boxes on Holm "
                        "(family-wise error) or Benjamini-Hochberg (false discovery rate) adjusted p-values, "
                        "as the dashboard's Sensitivity and Decisions pages can (default none)")
    p.add_argument("--n-boot", type=positive_int, default=500, help="bootstrap resamples for DCG vs nDCG (500)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="bootstrap seed (0)")
    add_log_options(p)
    p.add_argument("--heldout", action="store_true",
                   help="add KDD'24 App. A on held-out data: DCG@k vs nDCG@k over a simulated model zoo "
                        "(off by default; ~10 s with the small grid)")
    p.add_argument("--heldout-grid", choices=("small", "default"), default="small",
                   help="model zoo of --heldout: small = 25 models (default), default = 192 models as in the paper")
    p.add_argument("--heldout-k", type=positive_int, default=100, help="cut-off k of --heldout (default 100)")
    p.add_argument("--heldout-cache", default=None, metavar="DIR",
                   help="directory to save the trained zoo in (reused by later reports)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _clips(text: str) -> tuple[float, ...]:
    parts = [t for t in (s.strip() for s in text.split(",")) if t]
    if not parts:
        raise SpecError(f"--clip-grid must list clip values like 1,2,4,inf, got {text!r}")
    return tuple(parse_clip(t) for t in parts)


def run(args) -> int:
    from tqdm import tqdm

    tables = [args.discount.split(":", 1)[1].split("@")[0]] if args.discount.startswith("table:") else []
    check_output(args.out, inputs=[args.logs, *tables], force=args.force)
    if args.heldout_cache is not None:
        cache = Path(args.heldout_cache)
        if not args.heldout_cache.strip() or (cache.exists() and not cache.is_dir()):
            raise UnwritableOutput(f"--heldout-cache {args.heldout_cache!r} is not a directory; it names the directory "
                                   "the trained zoo is saved in (created if missing)", source="--heldout-cache")
    clips = _clips(args.clip_grid)
    rewards = None
    if args.reward:
        rewards = [r.strip() for item in args.reward for r in item.split(",") if r.strip()]
    bar = tqdm(total=len(STEPS) + 1, desc="reading logs", unit="step", file=sys.stderr,
               disable=args.no_progress, bar_format="{desc:<28} {bar} {n_fmt}/{total_fmt} [{elapsed}]")
    extra = {}
    if is_moments_file(args.logs):
        logs = read_moments(args.logs)
        extra["moments_meta"] = read_metadata(args.logs)
        if args.clip_grid == DEFAULT_GRID_TEXT:
            clips = logs.grid.clips  # the file's grid unless another is asked for
    else:
        logs = read_command_logs(args, "report", rewards=rewards)

    targets = target_policies(logs)
    policy = args.policy
    said = []  # what the report will take, said at its first step: after it accepted every argument
    if policy is None and targets.default is not None:
        policy = targets.default
        others = [p for p in targets.all if p != policy and p not in targets.logging]
        choice = (f"; --policy chooses another ({', '.join(others)})" if others else "")
        said.append(f"offeval report: target policy {policy}, taken to have served the treatment arm "
                    f"({targets.reason}){choice}")
    elif policy is None:
        said.append("offeval report: no target policy in these logs (no rank__<policy> or target_propensity__"
                    "<policy> column): the analyses that need one are skipped")

    def progress(name: str) -> None:
        while said:
            print(said.pop(0), file=sys.stderr)
        bar.update(1)
        bar.set_description_str(name)

    try:
        info = write_report(logs, args.out, rewards=rewards, discount=args.discount, clips=clips,
                            policy=policy, sensitivity_level=args.level, online_alpha=args.online_alpha,
                            online_min_effect=args.online_min_effect,
                            q_clip=parse_clip(args.q_clip), adjust=args.adjust, n_boot=args.n_boot, seed=args.seed, heldout=args.heldout,
                            heldout_grid=args.heldout_grid, heldout_k=args.heldout_k,
                            heldout_cache_dir=args.heldout_cache, progress=progress, **extra)
        bar.update(1)
        bar.set_description_str("done")
    finally:
        bar.close()
    print(f"wrote {info['path']} ({info['bytes'] / 1e6:.1f} MB, {info['figures']} figures)")
    return 0
