"""``offeval reduce LOGS --out moments.parquet``: the whole variant grid's per-group moments, computed where
the logs live (DuckDB on this machine, out of core; or Spark) and written to one small file."""

from __future__ import annotations

import json
import os
import resource
import sys
import time

from offeval_core.arm_values import parse_arms
from offeval_core.commands.log_options import ARMS_HELP
from offeval_core.engine import DEFAULT_CLIPS, Grid, connect, connect_spark, reduce, source_from_files
from offeval_core.errors import UnreadableInput
from offeval_core.inputs import file_kind, open_regular
from offeval_core.mapping import parse_mapping
from offeval_core.moments_io import write_moments
from offeval_core.safe_io import check_output
from offeval_core.validation import clip_value, parse_clip

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("reduce", help="compute the moments of the full variant grid from Parquet logs",
                       description="Read Parquet logs without loading them into memory, compute per-group "
                                   "moments for every reward × policy × discount × exposure × clip value, "
                                   "and write them to one small Parquet file the dashboard and `offeval "
                                   "report` open directly.")
    p.add_argument("logs", help="Parquet file, directory of Parquet files (e.g. one per day) or glob")
    p.add_argument("--out", required=True, help="moments file to write, e.g. moments.parquet (never one of the "
                                                "inputs; an existing file is kept unless --force)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"], help="default duckdb")
    p.add_argument("--spark-master", default="local[2]", help="Spark master URL (default local[2])")
    p.add_argument("--memory-limit", default=None, help="DuckDB memory limit, e.g. 2GB (spills beyond it)")
    p.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all cores)")
    p.add_argument("--temp-dir", default=None, help="DuckDB spill directory")
    p.add_argument("--rewards", default="", help="reward columns, comma-separated (default: all)")
    p.add_argument("--policies", default="", help="target policies, comma-separated (default: all rank__ columns)")
    p.add_argument("--discounts", default="pbm,log2", help="target discounts D (default pbm,log2)")
    p.add_argument("--exposures", default="pbm", help="exposure models D0 (default pbm)")
    p.add_argument("--clips", default="", help="clip grid, e.g. 1,16,inf (default 1,2,4,…,4096,inf)")
    p.add_argument("--ndcg-rule", default="zero", choices=["zero", "drop"])
    p.add_argument("--map", default=None, metavar="NAME=COL,...", help="column mapping, e.g. rank=pos")
    p.add_argument("--arms", default=None, metavar="control=A,treatment=B", help=ARMS_HELP)
    p.set_defaults(func=run)


def _split(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _check_logs(path: str) -> None:
    """A named file must be a regular Parquet file (globs and directories are listed by the engine)."""
    if any(ch in path for ch in "*?[") or "://" in path or os.path.isdir(path):
        return
    if file_kind(path) != "parquet":
        raise UnreadableInput(f"{path}: reduce reads Parquet logs only (a file, a directory of Parquet files or "
                              "a glob); for a CSV use `offeval estimate`, `offeval report` or `offeval dashboard`, "
                              "or convert it to Parquet first", source=path)
    open_regular(path, source=path).close()


def _mapping(logs: str, text: str | None) -> dict[str, str]:
    """The --map entries, patterns (rank__*=pos_*) expanded over the Parquet schema (the reduce reads Parquet
    where it lies, without loading it)."""
    from pathlib import Path

    import pyarrow.parquet as pq

    from offeval_core.mapping import expand_mapping

    path = Path(logs)  # a named file is a Parquet file here (checked by _check_logs)
    mapping = parse_mapping(text)
    if any("*" in k for k in mapping):
        first = path if path.is_file() else next(iter(sorted(path.glob("**/*.parquet"))), None)
        names = pq.read_schema(first).names if first is not None else []
        mapping = expand_mapping(names, mapping)
    return mapping


def run(args) -> int:
    t0 = time.perf_counter()
    check_output(args.out, inputs=[args.logs], force=args.force)
    _check_logs(args.logs)
    if args.engine == "spark":
        if args.memory_limit:
            print("offeval reduce: note: --memory-limit applies to DuckDB; size Spark executors with "
                  "spark-submit options instead", file=sys.stderr)
        backend = connect_spark(args.spark_master)
    else:
        backend = connect(memory_limit=args.memory_limit, threads=args.threads, temp_directory=args.temp_dir)
    source = source_from_files(args.logs, backend, columns=_mapping(args.logs, args.map),
                               rewards=_split(args.rewards) or None, arms=parse_arms(args.arms))
    policies = _split(args.policies) or source.policies
    clips = tuple(parse_clip(c) for c in _split(args.clips)) or DEFAULT_CLIPS
    grid = Grid(rewards=source.rewards, policies=policies, discounts=_split(args.discounts),
                exposures=_split(args.exposures), clips=clips, ndcg_rule=args.ndcg_rule)
    t1 = time.perf_counter()
    moments = reduce(source, grid)
    t2 = time.perf_counter()
    sessions = int(source.counts["n"].sum())
    settings = {"logs": str(args.logs), "engine": args.engine,
                "spark_master": args.spark_master if args.engine == "spark" else None,
                "memory_limit": args.memory_limit, "ndcg_rule": args.ndcg_rule, "sessions": sessions,
                "rows": source.n_rows, "seconds_scan": round(t1 - t0, 3), "seconds_reduce": round(t2 - t1, 3),
                "clips": [clip_value(c) for c in grid.clips], "offline_arm": "control"}
    path = write_moments(moments, args.out, settings=settings, force=args.force, inputs=[args.logs])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"out": str(path), "rows": source.n_rows, "sessions": sessions,
                      "variants": len(moments.offline), "seconds": round(time.perf_counter() - t0, 2),
                      "peak_rss_mb": round(peak, 1)}))
    if args.engine == "spark":
        backend._session.stop()
    return 0
