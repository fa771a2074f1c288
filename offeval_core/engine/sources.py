"""Where a reduce reads from: a :class:`Source` of Ibis tables on a backend (embedded DuckDB by default, Spark,
or any Ibis backend with window functions), built from validated in-memory logs or from Parquet files.

In-memory logs enter DuckDB as Arrow tables (numeric columns are handed over without a copy) and only the
rows with a positive reward are registered: nothing else enters the heavy path (DESIGN.md "Only rewarded
rows matter"). :func:`logs_source` keeps one source per logs object, so repeated reduces of the same logs
reuse its registered tables and its compiled queries.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd
import pyarrow as pa

from offeval_core.arms import OFFLINE_ARM
from offeval_core.engine.checks import check_table
from offeval_core.engine.dialects import flag, hashes_structs
from offeval_core.engine.grid import GROUP_KEYS
from offeval_core.engine.ibis_columns import IbisColumns
from offeval_core.inputs_parquet import ParquetDataset, parquet_dataset
from offeval_core.limits import Limits
from offeval_core.logs import POLICY_PREFIX, Logs, logs_boundary
from offeval_core.reading import Reading

__all__ = ["Source", "connect", "connect_spark", "logs_source", "source_from_files", "source_from_logs"]


def connect(*, memory_limit: str | None = None, threads: int | None = None, temp_directory: str | None = None):
    """The embedded default backend: an in-memory DuckDB through Ibis.

    ``memory_limit`` (e.g. ``"2GB"``) caps DuckDB's buffer memory; larger intermediates spill to
    ``temp_directory`` (DuckDB's default ``.tmp`` next to the working directory when not given). The allocator's
    background threads hand the memory of a finished query back to the system (without them the process kept
    about 0.7 GB after a reduce of the demo's graded reward, for the pandas steps that follow to add to).
    """
    config = {k: v for k, v in {"memory_limit": memory_limit, "threads": threads,
                                "temp_directory": temp_directory}.items() if v is not None}
    return ibis.duckdb.connect(allocator_background_threads=True, **config)


def connect_spark(master: str = "local[2]", *, app_name: str = "offeval", shuffle_partitions: int | None = None,
                  config: dict | None = None):
    """An Ibis backend on a Spark session (``local[2]`` for one machine, ``spark://host:7077`` or ``yarn``
    for a cluster). Local mode binds to 127.0.0.1, has the UI off and works in UTC with Arrow on."""
    import warnings

    warnings.filterwarnings("ignore", message=".*pandas.*", category=FutureWarning)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    if master.startswith("local"):
        builder = (builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.sql.shuffle.partitions", str(shuffle_partitions or 2)))
    elif shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for k, v in (config or {}).items():
        builder = builder.config(k, v)
    return ibis.pyspark.connect(builder.getOrCreate())


@dataclass(frozen=True, eq=False)
class Source:
    """Ibis tables a reduce reads: ``rows`` (one per impression) and ``sessions`` (one per session).

    ``rows`` has ``session``, ``rank``, the reward and ``rank__<policy>`` columns and the group columns
    ``keys``; ``sessions`` has ``session``, ``length`` (last logged rank) and ``keys``. When ``keys`` is
    ``("g",)`` the integer ``g`` codes a group and ``groups`` maps it back to :data:`GROUP_KEYS`.
    ``rows`` may hold only the rows with a positive reward (nothing else enters the heavy path).
    ``logs`` (in-memory logs) or ``lengths`` (session-length histogram, columns ``length``, ``n``,
    ``n_control``) feed the learnt ``pbm`` model; ``counts`` (sessions per group) is filled when known.
    ``reading`` says how the columns of files were read (rewards and why, arm labels, guesses).
    """

    rows: ir.Table
    sessions: ir.Table
    backend: object
    max_rank: int
    name: str = ""
    keys: tuple[str, ...] = GROUP_KEYS
    groups: pd.DataFrame | None = None
    rewards: tuple[str, ...] = ()
    policies: tuple[str, ...] = ()
    logs: Logs | None = field(default=None, repr=False)
    lengths: pd.DataFrame | None = field(default=None, repr=False)
    counts: pd.DataFrame | None = field(default=None, repr=False)
    n_rows: int | None = None
    reading: Reading | None = field(default=None, repr=False)


def source_from_logs(logs: Logs, backend=None) -> Source:
    """Register validated in-memory logs with an Ibis backend (DuckDB by default).

    Only rows with a positive value in some reward column are registered (the heavy path reads nothing
    else), and the group (experiment, day, arm, segment) of a session travels as one integer code. The
    tables are Arrow tables over the logs' own arrays (no copy of numeric columns on DuckDB).
    """
    backend = backend or connect()
    prep = _prepared(logs)
    rows = ibis.memtable(prep["rows"])
    sessions = ibis.memtable(prep["sessions"])
    return Source(rows=rows, sessions=sessions, backend=backend, max_rank=prep["max_rank"], name=logs.source,
                  keys=("g",), groups=prep["groups"], rewards=logs.rewards, policies=logs.policies, logs=logs,
                  lengths=prep["lengths"], counts=prep["counts"], n_rows=logs.n_rows, reading=logs.reading)


_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PREPARED_LOCK = threading.Lock()


def logs_source(logs: Logs) -> Source:
    """The one DuckDB source of ``logs`` in this process (created on first use, freed with the logs).

    Every :func:`~offeval_core.engine.reduce` of the same logs object reads the same registered Arrow
    tables and reuses the queries compiled for it, so a new (reward, D, D0) combination costs only the
    query's execution. The source keeps no reference to ``logs`` (the learnt ``pbm`` comes from its
    session-length histogram, which gives the same curve as :func:`offeval_core.discounts.learn_pbm`).
    """
    prep = _prepared(logs)
    with _PREPARED_LOCK:
        if "source" not in prep:
            backend = connect()
            prep["source"] = Source(
                rows=ibis.memtable(prep["rows"]), sessions=ibis.memtable(prep["sessions"]), backend=backend,
                max_rank=prep["max_rank"], name=logs.source, keys=("g",), groups=prep["groups"],
                rewards=logs.rewards, policies=logs.policies, lengths=prep["lengths"], counts=prep["counts"],
                n_rows=logs.n_rows, reading=logs.reading)
        return prep["source"]


def _prepared(logs: Logs) -> dict:
    """The tables a source registers for ``logs``, computed once per Logs object (they are immutable)."""
    with _PREPARED_LOCK:
        if logs in _PREPARED:
            return _PREPARED[logs]
    frame, sess = logs.frame, logs.sessions
    codes = []
    for k in GROUP_KEYS:
        col = sess[k]
        if isinstance(col.dtype, pd.CategoricalDtype):
            c, u = col.cat.codes.to_numpy().astype(np.int64), len(col.cat.categories)
        else:
            c, uniq = pd.factorize(col.to_numpy())
            c, u = c.astype(np.int64), len(uniq)
        codes.append((c, u))
    flat = np.ravel_multi_index([c for c, _ in codes], [u for _, u in codes])
    group_codes = np.unique(flat, return_inverse=True)[1]
    first = np.unique(group_codes, return_index=True)[1]
    groups = sess.iloc[first][list(GROUP_KEYS)].reset_index(drop=True)
    groups.insert(0, "g", np.arange(len(groups), dtype=np.int64))
    session_codes = sess["session"].to_numpy()
    g_of_session = np.empty(int(session_codes.max()) + 1, dtype=np.int64)
    g_of_session[session_codes] = group_codes
    positive = np.zeros(len(frame), dtype=bool)
    for r in logs.rewards:
        positive |= frame[r].to_numpy() > 0
    pos_session = frame["session"].to_numpy()[positive]
    cols = {"session": pos_session, "g": g_of_session[pos_session], "rank": frame["rank"].to_numpy()[positive]}
    for r in logs.rewards:
        cols[r] = frame[r].to_numpy()[positive]
    for p in logs.policies:
        cols[POLICY_PREFIX + p] = frame[POLICY_PREFIX + p].to_numpy()[positive]
    length = sess["length"].to_numpy().astype(np.int64)
    control = (sess["arm"] == OFFLINE_ARM).to_numpy()  # the offline arm; pbm_from_histogram falls back to all (arms.offline_mask)
    n_len = np.bincount(length)
    n_ctl = np.bincount(length[control], minlength=len(n_len))
    seen = np.flatnonzero(n_len)
    out = {
        "rows": pa.table(cols),
        "sessions": pa.table({"session": session_codes, "g": group_codes.astype(np.int64), "length": length}),
        "groups": groups,
        "counts": pd.DataFrame({"g": groups["g"], "n": np.bincount(group_codes, minlength=len(groups))}),
        "lengths": pd.DataFrame({"length": seen.astype(np.int64), "n": n_len[seen], "n_control": n_ctl[seen]}),
        "pbm": {},
        "max_rank": logs.max_rank,
    }
    with _PREPARED_LOCK:
        return _PREPARED.setdefault(logs, out)


def source_from_files(path, backend=None, *, columns: dict[str, str] | None = None,
                      rewards: Sequence[str] | None = None, limits: Limits | None = None, arms=None,
                      ask: str = "ambiguous", name: str | None = None) -> Source:
    """Point the reduce at Parquet files (a file, a directory of day files or a glob) without loading them.

    The backend reads the files itself (DuckDB by default; Spark, or a warehouse table through any other
    Ibis backend: pass ``path`` as an Ibis table, and ``name``, what messages call it; a database table named by
    URL: :func:`~offeval_core.engine.warehouse.source_from_table`). The files pass the input boundary first (regular files,
    one schema, at most ``max_columns`` columns: :func:`~offeval_core.inputs_parquet.parquet_dataset`), then every
    check of ``read_logs`` runs as queries on the backend (:func:`~offeval_core.engine.checks.check_table`,
    the same reading of the columns, arm-label mapping, rules, rank ceiling and messages), so ``reduce``
    refuses exactly the logs ``validate`` refuses. ``arms`` maps the arm labels as in ``read_logs``
    (:mod:`offeval_core.arm_values`: given, ``"none"``, else the schema's or a common pair, said in
    ``Source.reading.guesses``); ``ask`` raises :class:`~offeval_core.errors.NeedsAnswers` as ``read_logs`` does.
    One pass over the rows computes the session table's summaries (sessions per group, the session-length
    histogram for the learnt ``pbm``); only rows with a positive reward are cached for the heavy path.
    """
    backend = backend or connect()
    limits = limits or Limits.from_env()
    files = None
    if isinstance(path, ir.Table):
        table, name = path, name or getattr(path.op(), "name", "<table>")
    else:
        name = name or str(path)
        with logs_boundary(name):
            files = parquet_dataset(path, source=name, limits=limits, memory=False, sizes=False)
        table = _read_files(backend, files)
    checked = check_table(table, backend, name=name, columns=columns, rewards=rewards, limits=limits, files=files,
                          arms=arms, ask=ask)
    table, rewards = checked.table, checked.rewards
    policies = tuple(c[len(POLICY_PREFIX):] for c in checked.policies)
    schema = table.schema()
    defaults = {"experiment_id": "all", "day": "1", "arm": OFFLINE_ARM, "segment": "all"}
    keys = {k: (table[k].cast("string") if k != "day" else table[k]) if k in table.columns else ibis.literal(v)
            for k, v in defaults.items()}
    if "arm" in table.columns:  # the user's labels mapped to control / treatment, as read_logs maps them
        keys["arm"] = checked.arm()
    if "day" in table.columns and not (schema["day"].is_date() or schema["day"].is_integer()):
        keys["day"] = table["day"].cast("string")
    rows = table.select(session=table["session_id"], rank=table["rank"].cast("int64"), **keys,
                        **{r: table[r].cast("float64") for r in rewards},
                        **{POLICY_PREFIX + p: _policy_ranks(table[POLICY_PREFIX + p]) for p in policies})
    gk = list(GROUP_KEYS)
    # the groups with the hash of their keys (a group's identity in the session pass)
    key_hash = ibis.struct({k: rows[k] for k in gk}).hash()
    # groups get a dense integer code g, in the order of their keys
    distinct = rows.select(*gk).distinct()
    if hashes_structs(backend):
        distinct = distinct.mutate(h=ibis.struct({k: distinct[k] for k in gk}).hash())
    group_arrow = backend.to_pyarrow(distinct).sort_by([(k, "ascending") for k in gk])
    group_arrow = group_arrow.append_column("g", pa.array(np.arange(group_arrow.num_rows, dtype=np.int64)))
    groups_all = group_arrow.to_pandas()
    checks = checked.sessions  # the checks across rows ride on this pass over the sessions
    if _hash_identifies(groups_all):  # per session its length and its group's hash: integer aggregates
        per = rows.group_by("session").aggregate(length=rows["rank"].max(), h=key_hash.min())
        full = rows.group_by("session").aggregate(length=rows["rank"].max(), h=key_hash.min(), h_hi=key_hash.max(),
                                                   **checks.aggregates(rows))
        mixed, by, on = full.h != full.h_hi, ["h"], ["h"]
        code = ibis.memtable(groups_all[["h", "g"]])
        pos = rows.filter(_any_reward(rows, rewards)).mutate(h=key_hash).join(code, "h")
    else:  # two groups share a hash: per session the group keys themselves
        per = rows.group_by("session").aggregate(length=rows["rank"].max(), **{k: rows[k].min() for k in gk})
        full = rows.group_by("session").aggregate(length=rows["rank"].max(), **{k: rows[k].min() for k in gk},
                                                   **{f"{k}__hi": rows[k].max() for k in gk}, **checks.aggregates(rows))
        mixed, by, on = functools.reduce(lambda a, b: a | b, [full[k] != full[f"{k}__hi"] for k in gk]), gk, gk
        code = ibis.memtable(group_arrow.select([*gk, "g"]))
        pos = rows.filter(_any_reward(rows, rewards)).join(code, gk)
    backend.execute(code.count())  # registers the small table: some backends cache() without doing so
    hist = backend.to_pyarrow(full.group_by(["length", *by]).aggregate(
        n=full.count(), _mixed=flag(mixed).sum(), **checks.totals(full))).to_pandas()
    checks.problems({c: hist[c].sum() for c in hist.columns if c.startswith(("_chk_", "_mixed"))})
    hist = hist[["length", *by, "n"]]
    hist = hist.merge(groups_all[[*on, "g", "arm"] if "arm" not in on else [*on, "g"]], on=on)
    sessions = per.join(code, on).select("session", "length", "g")
    counts = (hist.groupby("g")["n"].sum().reindex(groups_all["g"], fill_value=0).rename("n").reset_index())
    groups = groups_all[["g", *gk]]
    lengths = (hist.assign(n_control=np.where(hist["arm"] == OFFLINE_ARM, hist["n"], 0))
               .groupby("length", sort=True)[["n", "n_control"]].sum().reset_index())
    positives = pos.select("session", "g", *[c for c in rows.columns if c not in ("session", *gk)]).cache()
    max_rank = max(checked.sessions.tops.values())  # the checks' pass over the values found the largest ranks
    return Source(rows=positives, sessions=sessions, backend=backend, max_rank=max_rank,
                  name=name, keys=("g",), groups=groups, rewards=rewards, policies=policies, lengths=lengths,
                  counts=counts, n_rows=checked.n_rows, reading=checked.reading)


def _policy_ranks(col: ir.Column) -> ir.IntegerColumn:
    """A target policy's ranks as integers, missing (NULL or NaN: the policy would not show the item) as NULL."""
    if not col.type().is_floating():
        return col.cast("int64")
    return ibis.ifelse(IbisColumns.missing(col), ibis.null().cast("int64"), col.cast("int64"))


def _read_files(backend, files: ParquetDataset) -> ir.Table:
    """The checked Parquet files as one table of the backend, under their one schema."""
    paths = [str(f) for f in files.files]
    kind = getattr(backend, "name", "")
    if kind == "duckdb":
        return backend.read_parquet(paths, union_by_name=True)
    if kind == "pyspark":
        from ibis import util

        frame = backend._session.read.option("mergeSchema", "true").parquet(*paths)
        view = util.gen_name("read_parquet")
        frame.createOrReplaceTempView(view)
        return backend.table(view)
    return backend.read_parquet(paths if len(paths) > 1 else paths[0])


def _hash_identifies(groups: pd.DataFrame) -> bool:
    """Whether the hash ``h`` of the group keys tells every group apart (else, or on an engine that does not hash
    a struct, the keys themselves are used)."""
    return "h" in groups.columns and bool(groups["h"].is_unique)


def _any_reward(rows: ir.Table, rewards: Sequence[str]) -> ir.BooleanValue:
    return functools.reduce(lambda a, b: a | b, [rows[r] > 0 for r in rewards])


def _fetch_table(backend, expr: ir.Table) -> pd.DataFrame:
    """Run a query and return a pandas frame (through Arrow: cheaper than per-column conversion)."""
    return backend.to_pyarrow(expr).to_pandas()
