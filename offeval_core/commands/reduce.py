"""``offeval reduce LOGS --out moments.parquet``: the whole variant grid's per-group moments, computed where
the logs live (DuckDB on this machine, out of core; Spark; or the database that holds them, named by URL) and
written to one small file."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import time

from offeval_core.arm_values import parse_arms
from offeval_core.commands.argtypes import memory_size, positive_int
from offeval_core.commands.log_options import ARMS_HELP, say_guesses
from offeval_core.engine import DEFAULT_CLIPS, Grid, connect, connect_spark, reduce, source_from_files
from offeval_core.engine.warehouse import (
    close,
    database_errors,
    is_database_url,
    parse_table_url,
    source_from_table,
)
from offeval_core.errors import InputError, SpecError, UnreadableInput
from offeval_core.fingerprint import file_digest, file_signature
from offeval_core.inputs import file_kind
from offeval_core.mapping import PATTERN_PREFIXES, SCHEMA_FIELDS, parse_mapping
from offeval_core.memory import duckdb_memory_limit
from offeval_core.moments_cache import MomentsCache, moments_key
from offeval_core.moments_io import write_moments
from offeval_core.safe_io import check_output
from offeval_core.sanitize import one_line
from offeval_core.validation import clip_value, parse_clip

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("reduce", help="compute the moments of the full variant grid from Parquet logs or a "
                                      "database table",
                       description="Read Parquet logs without loading them into memory (or reduce a database "
                                   "table where it lives), compute per-group moments for every reward × policy × "
                                   "discount × exposure × clip value, and write them to one small Parquet file "
                                   "the dashboard and `offeval report` open directly.")
    p.add_argument("logs", help="Parquet file, directory of Parquet files (e.g. one per day) or glob; or a database "
                                "table by URL, e.g. 'postgresql://user@host:5432/db?table=impressions' (any "
                                "installed Ibis backend; the password from PGPASSWORD or ~/.pgpass rather than the "
                                "URL)")
    p.add_argument("--out", required=True, help="moments file to write, e.g. moments.parquet (never one of the "
                                                "inputs; an existing file is kept unless --force)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"], help="default duckdb")
    p.add_argument("--spark-master", default="local[2]", help="Spark master URL (default local[2])")
    p.add_argument("--memory-limit", type=memory_size, default=None,
                   help="memory budget of the whole process, e.g. 2GB or 80%% of the machine's: DuckDB gets "
                        "60%% of what the process does not already hold and spills beyond it")
    p.add_argument("--threads", type=positive_int, default=None, help="DuckDB threads (default: all cores)")
    p.add_argument("--temp-dir", default=None, help="DuckDB spill directory")
    p.add_argument("--rewards", default="", help="reward columns, comma-separated (default: the columns read as "
                                                 "rewards, as validate reads them)")
    p.add_argument("--reward", action="append", default=[], help="a reward column (repeatable; with --rewards)")
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
    """A named file must be a Parquet file (a CSV is refused in one line, pointing to the commands that read
    it); the path itself, globs, directories and every file's footer pass the input boundary of the reduce
    (:func:`~offeval_core.inputs_parquet.parquet_dataset`, in ``source_from_files``)."""
    if not path.strip() or "://" in path or any(ch in path for ch in "*?[") or os.path.isdir(path):
        return
    if file_kind(path) != "parquet":
        raise UnreadableInput(f"{path}: reduce reads Parquet logs only (a file, a directory of Parquet files or "
                              "a glob); for a CSV use `offeval estimate`, `offeval report` or `offeval dashboard`, "
                              "or convert it to Parquet first", source=path)


def _engine_error(logs: str, exc: Exception) -> UnreadableInput:
    """A backend's failure to read the logs as one line (no traceback): its kind and first line, escaped."""
    first = one_line(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)[:240]
    return UnreadableInput(f"{logs}: the engine cannot read the logs ({type(exc).__name__}: {first}); check each "
                           "file with `offeval validate FILE`", source=logs)


def _rewards(args) -> tuple[str, ...] | None:
    """The --rewards and --reward names; a schema column (session_id, rank, …, rank__<policy>) is not a reward."""
    names = (*_split(args.rewards), *args.reward)
    for name in names:
        if name in SCHEMA_FIELDS or name.startswith(PATTERN_PREFIXES):
            raise SpecError(f"--rewards names {name!r}, a column of the log schema, not a reward; name the reward "
                            "columns (numeric, ≥ 0: clicks, likes, watch time…) or leave --rewards out to take "
                            "the columns read as rewards", source="--rewards")
    return names or None


def _spark_errors() -> tuple[type[Exception], ...]:
    try:
        from pyspark.errors import PySparkException
    except ImportError:
        return ()
    return (PySparkException,)


def run(args) -> int:
    if is_database_url(args.logs):
        return _run_table(args)
    t0 = time.perf_counter()
    check_output(args.out, inputs=[args.logs], force=args.force)
    _check_logs(args.logs)
    import duckdb

    rewards = _rewards(args)
    duckdb_limit = None
    if args.engine == "spark":
        if args.memory_limit:
            print("offeval reduce: note: --memory-limit applies to DuckDB; size Spark executors with "
                  "spark-submit options instead", file=sys.stderr)
        backend = connect_spark(args.spark_master)
    else:
        try:
            duckdb_limit = duckdb_memory_limit(args.memory_limit) if args.memory_limit else None
            backend = connect(memory_limit=duckdb_limit, threads=args.threads, temp_directory=args.temp_dir)
        except duckdb.Error as exc:
            raise InputError(f"DuckDB refuses these settings (--memory-limit, --threads, --temp-dir): "
                             f"{one_line(str(exc))[:200]}") from None
    engine_errors = (duckdb.Error, *_spark_errors())
    cache = MomentsCache.from_env()
    origin = _origin(args, rewards) if cache is not None else None  # the files' bytes, hashed before reading
    try:
        source = source_from_files(args.logs, backend, columns=parse_mapping(args.map),  # patterns expanded there
                                   rewards=rewards, arms=parse_arms(args.arms), ask="ambiguous")
        say_guesses(source, "reduce")
        grid = _grid(args, source)
        t1 = time.perf_counter()
        key = moments_key(origin[1], grid, engine=args.engine) if origin else None
        moments = cache.get(key, grid, source=source.name) if key else None
        if moments is not None:
            print(f"offeval reduce: the moments of these files and this grid were in the moments cache "
                  f"({cache.directory}); nothing was computed", file=sys.stderr)
        else:
            moments = reduce(source, grid)
            if key and file_signature(args.logs) == origin[0]:  # unchanged while read: stored for next time
                cache.put(key, moments)
    except engine_errors as exc:
        raise _engine_error(args.logs, exc) from None
    _write(args, source, moments, (t0, t1, time.perf_counter()), logs=str(args.logs), engine=args.engine,
           spark_master=args.spark_master if args.engine == "spark" else None, memory_limit=args.memory_limit,
           duckdb_memory_limit=duckdb_limit)
    if args.engine == "spark":
        backend._session.stop()
    return 0


def _run_table(args) -> int:
    """The reduce of a database table named by URL, run by the database (docs/scale.md, "A warehouse"): the
    same reading of the columns, arm labels (``--arms``) and questions as files; the database's errors as one
    line naming the table (:func:`~offeval_core.engine.warehouse.database_errors`: the connection's message
    without credentials, a query's error by its type only)."""
    t0 = time.perf_counter()
    url = parse_table_url(args.logs)  # the URL's credentials go no further than the connection
    if args.engine != "duckdb":
        raise SpecError(f"{url.shown}: a database table is reduced by its own database; --engine {args.engine} "
                        "applies to Parquet files", source=url.shown)
    if args.memory_limit or args.threads or args.temp_dir:
        print("offeval reduce: note: --memory-limit, --threads and --temp-dir apply to Parquet files read by the "
              "embedded DuckDB; a database table is reduced with the database's own settings", file=sys.stderr)
    rewards = _rewards(args)
    arms = parse_arms(args.arms)
    inputs = [url.path] if url.path else []
    check_output(args.out, inputs=inputs, force=args.force)
    source = source_from_table(args.logs, columns=parse_mapping(args.map), rewards=rewards, arms=arms,
                               ask="ambiguous")
    try:
        say_guesses(source, "reduce")
        grid = _grid(args, source)
        t1 = time.perf_counter()
        with database_errors(url, stage="of the reduce"):
            moments = reduce(source, grid)
        _write(args, source, moments, (t0, t1, time.perf_counter()), logs=url.shown, engine=url.backend,
               spark_master=None, memory_limit=None, inputs=inputs)
    finally:
        close(source.backend)  # the temporary tables dropped, the connection closed
    return 0


def _origin(args, rewards) -> tuple[tuple, str] | None:
    """(signature, fingerprint) of the logs a reduce reads (:mod:`offeval_core.fingerprint`): a file's or a
    directory's bytes with the reading options; None for a glob or files that cannot be hashed."""
    signature = file_signature(args.logs)
    digest = file_digest(args.logs) if signature else None
    if digest is None:
        return None
    text = json.dumps({"files": digest, "map": args.map, "rewards": rewards, "arms": args.arms}, sort_keys=True)
    return signature, "files:" + hashlib.sha256(text.encode()).hexdigest()


def _grid(args, source) -> Grid:
    policies = _split(args.policies) or source.policies
    clips = tuple(parse_clip(c) for c in _split(args.clips)) or DEFAULT_CLIPS
    return Grid(rewards=source.rewards, policies=policies, discounts=_split(args.discounts),
                exposures=_split(args.exposures), clips=clips, ndcg_rule=args.ndcg_rule)


def _write(args, source, moments, times, *, logs: str, engine: str, spark_master, memory_limit,
           duckdb_memory_limit: str | None = None, inputs=None) -> None:
    """Write the moments with the run's settings in their metadata and print the run's summary line."""
    t0, t1, t2 = times
    grid = moments.grid
    sessions = int(source.counts["n"].sum())
    settings = {"logs": logs, "engine": engine, "spark_master": spark_master, "memory_limit": memory_limit,
                "duckdb_memory_limit": duckdb_memory_limit, "ndcg_rule": args.ndcg_rule, "sessions": sessions,
                "rows": source.n_rows, "seconds_scan": round(t1 - t0, 3), "seconds_reduce": round(t2 - t1, 3),
                "clips": [clip_value(c) for c in grid.clips], "offline_arm": "control"}
    path = write_moments(moments, args.out, settings=settings, force=args.force,
                         inputs=[args.logs] if inputs is None else inputs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"out": str(path), "rows": source.n_rows, "sessions": sessions,
                      "variants": len(moments.offline), "seconds": round(time.perf_counter() - t0, 2),
                      "peak_rss_mb": round(peak, 1)}))
