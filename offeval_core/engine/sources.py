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
from pathlib import Path

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd
import pyarrow as pa

from offeval_core.arm_values import (
    NO_ARMS,
    ArmValues,
    arm_label_map,
    arm_label_problem,
    guess_arm_values,
    parse_arms,
)
from offeval_core.engine.grid import GROUP_KEYS
from offeval_core.errors import LogValidationError, Problem
from offeval_core.logs import POLICY_PREFIX, Logs

__all__ = ["Source", "connect", "connect_spark", "logs_source", "source_from_files", "source_from_logs"]


def connect(*, memory_limit: str | None = None, threads: int | None = None, temp_directory: str | None = None):
    """The embedded default backend: an in-memory DuckDB through Ibis.

    ``memory_limit`` (e.g. ``"2GB"``) caps DuckDB's buffer memory; larger intermediates spill to
    ``temp_directory`` (DuckDB's default ``.tmp`` next to the working directory when not given).
    """
    config = {k: v for k, v in {"memory_limit": memory_limit, "threads": threads,
                                "temp_directory": temp_directory}.items() if v is not None}
    return ibis.duckdb.connect(**config)


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
                  lengths=prep["lengths"], counts=prep["counts"], n_rows=logs.n_rows)


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
                n_rows=logs.n_rows)
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
    control = (sess["arm"] == "control").to_numpy()
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
                      rewards: Sequence[str] | None = None, arms=None) -> Source:
    """Point the reduce at Parquet files (a file, a directory of day files or a glob) without loading them.

    The backend reads the files itself (DuckDB by default; Spark, or a warehouse table through any other
    Ibis backend: pass ``path`` as an Ibis table). One pass over the rows computes the session table's
    summaries (sessions per group, the session-length histogram for the learnt ``pbm``); only rows with a
    positive reward are cached for the heavy path. Cheap checks run in the same pass: required columns,
    ranks ≥ 1, rewards finite and ≥ 0, arm labels mapped. ``arms`` maps the arm labels as in ``read_logs``
    (:mod:`offeval_core.arm_values`: given, the schema's, a common pair, or ``"none"``).
    """
    backend = backend or connect()
    if isinstance(path, ir.Table):
        table, name = path, getattr(path.op(), "name", "<table>")
    else:
        name = str(path)
        target = _parquet_glob(path)
        if getattr(backend, "name", "") != "duckdb":
            target = str(path)  # Spark and others read a directory of Parquet files themselves
        table = backend.read_parquet(target)
    rename = {user: key for key, user in (columns or {}).items()}
    missing = [u for u in rename if u not in table.columns]
    if missing:
        raise ValueError(f"{name}: column mapping names columns the logs do not have: {', '.join(missing)} "
                         f"(columns found: {', '.join(table.columns)})")
    if rename:
        table = table.rename({k: u for u, k in rename.items()})
    missing = [c for c in ("session_id", "rank") if c not in table.columns]
    if missing:  # the same problem text as read_logs; each interface says how to map (LogValidationError.unmapped)
        raise LogValidationError(name, [f"missing required column '{c}' (columns found: {', '.join(table.columns)}); "
                                        f"if your logs call it differently, map your column to '{c}'" for c in missing],
                                 unmapped=missing)
    schema = table.schema()
    policies = tuple(c[len(POLICY_PREFIX):] for c in table.columns if c.startswith(POLICY_PREFIX))
    special = {"session_id", "rank", "item_id", "logging_propensity", *GROUP_KEYS}
    if rewards is None:
        rewards = tuple(c for c in table.columns if c not in special and not c.startswith((POLICY_PREFIX, "target_"))
                        and (schema[c].is_numeric() or schema[c].is_boolean()))
    else:
        rewards = tuple(rewards)
        for r in rewards:
            if r not in table.columns:
                raise ValueError(f"{name}: unknown reward {r!r}; no such column (columns found: {', '.join(table.columns)})")
    if not rewards:
        raise ValueError(f"{name}: no reward column: expected at least one numeric column besides the schema columns")
    defaults = {"experiment_id": "all", "day": "1", "arm": "control", "segment": "all"}
    if parse_arms(arms) == NO_ARMS and "arm" in table.columns:
        table = table.drop("arm")
    keys = {k: (table[k].cast("string") if k != "day" else table[k]) if k in table.columns else ibis.literal(v)
            for k, v in defaults.items()}
    if "arm" in table.columns:  # the arm labels mapped before any check (the same rule as read_logs)
        labels = backend.execute(table.select(label=table["arm"].cast("string")).distinct().limit(1001))["label"]
        labels = [v for v in labels if isinstance(v, str)]
        given = parse_arms(arms)
        arm_values = given if isinstance(given, ArmValues) else guess_arm_values(labels)
        if arm_values is None:
            user = next((u for u, k in rename.items() if k == "arm"), "arm")
            raise LogValidationError(name, [Problem(arm_label_problem(user, labels), kind="arm")])
        keys["arm"] = keys["arm"].substitute(arm_label_map(labels, arm_values), else_=ibis.null("string"))
    if "day" in table.columns and not (schema["day"].is_date() or schema["day"].is_integer()):
        keys["day"] = table["day"].cast("string")
    rows = table.select(session=table["session_id"], rank=table["rank"].cast("int64"), **keys,
                        **{r: table[r].cast("float64") for r in rewards},
                        **{POLICY_PREFIX + p: table[POLICY_PREFIX + p].cast("int64") for p in policies})
    gk = list(GROUP_KEYS)
    # the checks, then the groups with the hash of their keys (a group's identity in the session pass)
    key_hash = ibis.struct({k: rows[k] for k in gk}).hash()
    checks = {"n_rows": rows.count(), "min_rank": rows["rank"].min(),
              "max_rank": ibis.greatest(rows["rank"].max(), *[rows[POLICY_PREFIX + p].max() for p in policies])
              if policies else rows["rank"].max()}
    if "arm" in table.columns:
        checks["unmapped_arm"] = rows["arm"].isnull().cast("int64").sum()
    for i, r in enumerate(rewards):
        checks[f"bad_{i}"] = (rows[r].isnull() | rows[r].isnan() | rows[r].isinf() | (rows[r] < 0)).cast("int64").sum()
    stats = _fetch_table(backend, rows.aggregate(**checks)).iloc[0]
    if int(stats["n_rows"]) == 0:
        raise ValueError(f"{name}: no data rows: the logs are empty")
    problems = []
    if int(stats["min_rank"]) < 1:
        problems.append("column 'rank' must hold positive integers (1 = top position); the smallest is "
                        f"{int(stats['min_rank'])}")
    if int(stats.get("unmapped_arm", 0)):
        problems.append(f"column 'arm' has labels the arm mapping ({arm_values.describe()}) does not name, or "
                        f"empty values, on {int(stats['unmapped_arm'])} rows")
    for i, r in enumerate(rewards):
        if int(stats[f"bad_{i}"]):
            problems.append(f"reward column '{r}' must be finite and ≥ 0; {int(stats[f'bad_{i}'])} rows are not")
    if problems:
        raise ValueError(f"{name}: " + "; ".join(problems))
    # groups get a dense integer code g, in the order of their keys
    distinct = rows.select(*gk).distinct()
    distinct = backend.to_pyarrow(distinct.mutate(h=ibis.struct({k: distinct[k] for k in gk}).hash()))
    group_arrow = distinct.sort_by([(k, "ascending") for k in gk])
    group_arrow = group_arrow.append_column("g", pa.array(np.arange(group_arrow.num_rows, dtype=np.int64)))
    groups_all = group_arrow.to_pandas()
    if _hash_identifies(groups_all):  # per session its length and its group's hash: integer aggregates
        per = rows.group_by("session").aggregate(length=rows["rank"].max(), h=key_hash.min(), h_hi=key_hash.max())
        mixed, by, on = per.h != per.h_hi, ["h"], ["h"]
        code = ibis.memtable(groups_all[["h", "g"]])
        pos = rows.filter(_any_reward(rows, rewards)).mutate(h=key_hash).join(code, "h")
    else:  # two groups share a hash: per session the group keys themselves
        per = rows.group_by("session").aggregate(length=rows["rank"].max(), **{k: rows[k].min() for k in gk},
                                                 **{f"{k}__hi": rows[k].max() for k in gk})
        mixed, by, on = functools.reduce(lambda a, b: a | b, [per[k] != per[f"{k}__hi"] for k in gk]), gk, gk
        code = ibis.memtable(group_arrow.select([*gk, "g"]))
        pos = rows.filter(_any_reward(rows, rewards)).join(code, gk)
    backend.execute(code.count())  # registers the small table: some backends cache() without doing so
    hist = backend.to_pyarrow(per.group_by(["length", *by]).aggregate(n=per.count(),
                                                                      mixed=mixed.cast("int64").sum())).to_pandas()
    if int(hist["mixed"].sum()):
        raise ValueError(f"{name}: columns experiment_id, day, arm and segment must be the same on every row of a "
                         f"session; {int(hist['mixed'].sum())} session(s) have more than one value")
    hist = hist.merge(groups_all[[*on, "g", "arm"] if "arm" not in on else [*on, "g"]], on=on)
    sessions = per.join(code, on).select("session", "length", "g")
    counts = (hist.groupby("g")["n"].sum().reindex(groups_all["g"], fill_value=0).rename("n").reset_index())
    groups = groups_all[["g", *gk]]
    lengths = (hist.assign(n_control=np.where(hist["arm"] == "control", hist["n"], 0))
               .groupby("length", sort=True)[["n", "n_control"]].sum().reset_index())
    positives = pos.select("session", "g", *[c for c in rows.columns if c not in ("session", *gk)]).cache()
    return Source(rows=positives, sessions=sessions, backend=backend, max_rank=int(stats["max_rank"]),
                  name=name, keys=("g",), groups=groups, rewards=rewards, policies=policies, lengths=lengths,
                  counts=counts, n_rows=int(stats["n_rows"]))


def _hash_identifies(groups: pd.DataFrame) -> bool:
    """Whether the hash ``h`` of the group keys tells every group apart (else the keys themselves are used)."""
    return bool(groups["h"].is_unique)


def _any_reward(rows: ir.Table, rewards: Sequence[str]) -> ir.BooleanValue:
    return functools.reduce(lambda a, b: a | b, [rows[r] > 0 for r in rewards])


def _parquet_glob(path) -> str | list[str]:
    p = Path(str(path))
    if p.is_dir():
        files = sorted(str(f) for f in p.rglob("*.parquet"))
        if not files:
            raise FileNotFoundError(f"{path}: no .parquet files in this directory")
        return files
    if not any(ch in str(path) for ch in "*?[") and not p.exists() and "://" not in str(path):
        raise FileNotFoundError(f"{path}: no such file or directory")
    return str(path)


def _fetch_table(backend, expr: ir.Table) -> pd.DataFrame:
    """Run a query and return a pandas frame (through Arrow: cheaper than per-column conversion)."""
    return backend.to_pyarrow(expr).to_pandas()
