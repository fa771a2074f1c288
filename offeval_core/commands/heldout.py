"""``offeval heldout``: evaluate runs against qrels (DCG@k, nDCG@k, Recall@k, ADG) per user and aggregated."""

from __future__ import annotations

import argparse
import json
import os

from offeval_core.defaults import LEVEL
from offeval_core.errors import InputError, MissingInput, UnreadableInput
from offeval_core.heldout.io import read_qrels, read_runs
from offeval_core.heldout.metrics import (
    GAINS,
    MISSING_IN_QRELS,
    MISSING_IN_RUN,
    evaluate_run,
    parse_metric,
)

__all__ = ["register", "run"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "heldout",
        help="evaluate runs against qrels: DCG@k, nDCG@k, Recall@k, ADG (mean, stderr, users)",
        description=(
            "Evaluate one or more runs (TREC 'qid Q0 doc rank score tag', CSV or Parquet) against qrels "
            "(TREC 'qid 0 doc rel', CSV or Parquet). Prints, per run and metric, the mean over users, its "
            "standard error and the number of users evaluated, and which users were skipped and why. "
            "Runs are ordered by score descending, ties by item id."
        ),
    )
    p.add_argument("--qrels", required=True, help="qrels file (TREC, .csv or .parquet)")
    p.add_argument("--run", action="append", required=True, dest="runs", metavar="RUN",
                   help="run file; repeat for several runs (a file may hold several tags / a 'run' column)")
    p.add_argument("--metric", action="append", dest="metrics", metavar="METRIC",
                   help="ndcg@K, dcg@K, recall@K, adg or adg@K; repeatable (default ndcg@10)")
    p.add_argument("--gain", choices=GAINS, default="linear", help="DCG gain: rel (linear) or 2^rel - 1")
    p.add_argument("--missing-in-run", choices=MISSING_IN_RUN, default="error",
                   help="users with relevant items in the qrels but absent from a run: error (default), "
                        "zero (score 0, like trec_eval -c) or skip")
    p.add_argument("--missing-in-qrels", choices=MISSING_IN_QRELS, default="error",
                   help="users in a run but absent from the qrels: error (default) or skip")
    p.add_argument("--level", type=float, default=LEVEL,
                   help=f"confidence level of the CI of each mean (default {LEVEL:g})")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def _check_file(path: str, flag: str) -> None:
    """A qrels or run file must be named and be a file (a directory gave IsADirectoryError)."""
    if not str(path).strip():
        raise MissingInput(f"{flag} is empty; name a qrels or run file", source=flag)
    if os.path.isdir(path):
        raise UnreadableInput(f"{path}: is a directory; {flag} must name a file (TREC, .csv or .parquet)",
                              source=path, expected="a file")


def run(args: argparse.Namespace) -> int:
    _check_file(args.qrels, "--qrels")
    for path in args.runs:
        _check_file(path, "--run")
    metrics = [parse_metric(m) for m in (args.metrics or ["ndcg@10"])]
    qrels = read_qrels(args.qrels)
    runs = [r for path in args.runs for r in read_runs(path)]
    names = [r.name for r in runs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"run names must be unique across --run files; repeated: {', '.join(dup)}")
    evals = [
        evaluate_run(qrels, r, metrics, gain_kind=args.gain, missing_in_run=args.missing_in_run,
                     missing_in_qrels=args.missing_in_qrels, level=args.level)
        for r in runs
    ]
    if args.json:
        print(json.dumps({"qrels": str(args.qrels), "gain": args.gain, "runs": [ev.to_dict() for ev in evals]},
                         indent=2, ensure_ascii=False))
        return 0
    for ev in evals:
        print(f"run {ev.run} ({ev.per_user.shape[0]} users, gain {ev.gain})")
        for label, e in ev.estimates.items():
            print(f"  {label:<12} mean {e.value:.4f}  stderr {e.stderr:.4f}  users {e.n}")
        if ev.zero_filled:
            shown = ", ".join(ev.zero_filled[:5]) + (", …" if len(ev.zero_filled) > 5 else "")
            print(f"  scored 0, in the qrels but not in the run: {len(ev.zero_filled)} user(s) ({shown})")
        for reason, users in ev.skipped.items():
            shown = ", ".join(users[:5]) + (", …" if len(users) > 5 else "")
            print(f"  skipped, {reason}: {len(users)} user(s) ({shown})")
    return 0
