"""The log reduce: per-session DCG-family values for a grid of variants, aggregated into moments.

Written once as backend-neutral Ibis expressions (DuckDB embedded by default, reading Parquet itself and
spilling beyond its memory limit; Spark through Ibis's pyspark backend; any Ibis backend with window
functions runs the same code). Only rewarded rows are read on the heavy path: DCG, iDCG and every
IPS-type sum take contributions only from rows with a non-zero reward (DESIGN.md "Only rewarded rows
matter"); sessions without a reward contribute zeros to the sums and are counted from the session table.

Per session τ, variant (D, D0, m) and policy R (KDD'24 Eq. 9 with Sec. 6.2 clipping):

    ℓ_i    = c_i · min(m, 1 / D0(r_i))                 de-biased, clipped label
    DCG_τ  = Σ_i ℓ_i · D(R(i))
    iDCG_τ = Σ_j ℓ_(j) · D(j)                          labels of τ sorted descending
    nDCG_τ = DCG_τ / iDCG_τ   (0 when iDCG_τ = 0, or the session is dropped)

Plan of the queries, per reward and (D, D0) pair: the per-row lookups 1 / D0(r_i) and D(R(i)) are joins
with a small rank table, done once per rewarded row; the per-session sums are wide over the clip grid
(one column per m) in one group-by per session; the moments come from crossing that table with the clip
index and one low-cardinality group-by per (clip, group). Sorting the labels once per session serves
every clip value and policy when the reward is binary (c · min(m, w) then sorts like w); for graded
rewards c · min(m, w) need not preserve the order of c · w, so the labels are ranked per clip value.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd
import pyarrow as pa

from offeval_core.discounts import DiscountModel, parse_discount, survival_from_counts
from offeval_core.logs import LOGGING_POLICY, POLICY_PREFIX, Logs
from offeval_core.validation import check_choice, check_clips

DEFAULT_CLIPS: tuple[float, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, math.inf)
"""The clip grid of KDD'24 Sec. 6.2 (plus 1024), m = 1 (raw labels) … ∞ (unbiased)."""

GROUP_KEYS = ("experiment_id", "day", "arm", "segment")
METRICS = ("dcg", "ndcg")
NDCG_RULES = ("zero", "drop")
_INF = 1e300  # stands for m = ∞ inside queries: larger than any weight 1 / D0


@dataclass(frozen=True)
class Grid:
    """The variants a reduce computes: rewards × policies × (D, D0) × clip values."""

    rewards: tuple[str, ...]
    policies: tuple[str, ...]
    discounts: tuple[str, ...] = ("pbm",)
    exposures: tuple[str, ...] = ("pbm",)
    clips: tuple[float, ...] = DEFAULT_CLIPS
    ndcg_rule: str = "zero"

    def __post_init__(self):
        object.__setattr__(self, "clips", check_clips(self.clips))
        check_choice(self.ndcg_rule, NDCG_RULES, name="ndcg_rule")
        if not self.rewards:
            raise ValueError("rewards must name at least one reward column, got none")
        if not self.discounts or not self.exposures:
            raise ValueError("discounts and exposures must each list at least one discount model")


@dataclass(frozen=True, eq=False)
class Moments:
    """Per-group sufficient statistics of every variant: everything the analyses need.

    ``offline`` (long): one row per (group keys, reward, discount, exposure, clip, policy, metric) with
    ``n`` sessions, ``sum`` / ``sumsq`` of the per-session value x, the per-session denominator y of
    ratio estimators (for DCG rows y = iDCG, so pnDCG = Σx / Σy): ``den_sum`` / ``den_sumsq`` and
    ``sum_x_den`` = Σ x·y, and for target policies the paired difference d = target − logging on the
    same sessions: ``sum_diff``, ``sumsq_diff``, ``sum_diff_den`` = Σ d·y. The logging policy is named
    ``"logging"``. ``online``: per (group keys, reward) the per-session observed reward: ``n``, ``sum``,
    ``sumsq``.
    """

    offline: pd.DataFrame
    online: pd.DataFrame
    grid: Grid
    discount_labels: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k in GROUP_KEYS if k in self.online.columns)


# ------------------------------------------------------------------------------------------ ibis inputs


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
    else), and the group (experiment, day, arm, segment) of a session travels as one integer code.
    """
    backend = backend or connect()
    prep = _prepared(logs)
    rows = ibis.memtable(prep["rows"])
    sessions = ibis.memtable(prep["sessions"])
    groups, counts = prep["groups"], prep["counts"]
    return Source(rows=rows, sessions=sessions, backend=backend, max_rank=prep["max_rank"], name=logs.source,
                  keys=("g",), groups=groups, rewards=logs.rewards, policies=logs.policies, logs=logs,
                  counts=counts, n_rows=logs.n_rows)


_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _prepared(logs: Logs) -> dict:
    """The frames a source registers for ``logs``, computed once per Logs object (they are immutable)."""
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
    out = {
        "rows": pd.DataFrame(cols),
        "sessions": pd.DataFrame({"session": session_codes, "g": group_codes.astype(np.int64),
                                  "length": sess["length"].to_numpy()}),
        "groups": groups,
        "counts": pd.DataFrame({"g": groups["g"], "n": np.bincount(group_codes, minlength=len(groups))}),
        "pbm": {},
        "max_rank": logs.max_rank,
    }
    _PREPARED[logs] = out
    return out


def source_from_files(path, backend=None, *, columns: dict[str, str] | None = None,
                      rewards: Sequence[str] | None = None) -> Source:
    """Point the reduce at Parquet files (a file, a directory of day files or a glob) without loading them.

    The backend reads the files itself (DuckDB by default; Spark, or a warehouse table through any other
    Ibis backend: pass ``path`` as an Ibis table). One pass over the rows computes the session table's
    summaries (sessions per group, the session-length histogram for the learnt ``pbm``); only rows with a
    positive reward are cached for the heavy path. Cheap checks run in the same pass: required columns,
    ranks ≥ 1, rewards finite and ≥ 0.
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
    for c in ("session_id", "rank"):
        if c not in table.columns:
            raise ValueError(f"{name}: missing required column '{c}' (columns found: {', '.join(table.columns)}); "
                             f"if your logs call it differently, map it, e.g. --map {c}=<your column>")
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
    keys = {k: (table[k].cast("string") if k != "day" else table[k]) if k in table.columns else ibis.literal(v)
            for k, v in defaults.items()}
    if "day" in table.columns and not (schema["day"].is_date() or schema["day"].is_integer()):
        keys["day"] = table["day"].cast("string")
    rows = table.select(session=table["session_id"], rank=table["rank"].cast("int64"), **keys,
                        **{r: table[r].cast("float64") for r in rewards},
                        **{POLICY_PREFIX + p: table[POLICY_PREFIX + p].cast("int64") for p in policies})
    checks = {"n_rows": rows.count(), "min_rank": rows["rank"].min(),
              "max_rank": ibis.greatest(rows["rank"].max(), *[rows[POLICY_PREFIX + p].max() for p in policies])
              if policies else rows["rank"].max()}
    for i, r in enumerate(rewards):
        checks[f"bad_{i}"] = (rows[r].isnull() | rows[r].isnan() | rows[r].isinf() | (rows[r] < 0)).cast("int64").sum()
    stats = _fetch_table(backend, rows.aggregate(**checks)).iloc[0]
    if int(stats["n_rows"]) == 0:
        raise ValueError(f"{name}: no data rows: the logs are empty")
    problems = []
    if int(stats["min_rank"]) < 1:
        problems.append(f"column 'rank' must hold positive integers (1 = top position); the smallest is {int(stats['min_rank'])}")
    for i, r in enumerate(rewards):
        if int(stats[f"bad_{i}"]):
            problems.append(f"reward column '{r}' must be finite and ≥ 0; {int(stats[f'bad_{i}'])} rows are not")
    if problems:
        raise ValueError(f"{name}: " + "; ".join(problems))
    gk = list(GROUP_KEYS)
    # one pass over the rows: per session its length and its group (min = max when the logs are valid)
    per = rows.group_by("session").aggregate(length=rows["rank"].max(),
                                             **{k: rows[k].min() for k in gk}, **{f"{k}__hi": rows[k].max() for k in gk})
    mixed = functools.reduce(lambda a, b: a | b, [per[k] != per[f"{k}__hi"] for k in gk])
    sessions = per.select("session", "length", *gk)
    hist_arrow = backend.to_pyarrow(per.group_by(["length", *gk]).aggregate(n=per.count(),
                                                                            mixed=mixed.cast("int64").sum()))
    hist = hist_arrow.to_pandas()
    if int(hist["mixed"].sum()):
        raise ValueError(f"{name}: columns experiment_id, day, arm and segment must be the same on every row of a "
                         f"session; {int(hist['mixed'].sum())} session(s) have more than one value")
    # groups get a dense integer code g, joined onto the rewarded rows (small integer keys downstream)
    group_arrow = hist_arrow.group_by(gk).aggregate([("n", "sum")]).rename_columns([*gk, "n"])
    group_arrow = group_arrow.sort_by([(k, "ascending") for k in gk])
    group_arrow = group_arrow.append_column("g", pa.array(np.arange(group_arrow.num_rows, dtype=np.int64)))
    groups_all = group_arrow.to_pandas()
    counts = groups_all[["g", "n"]]
    groups = groups_all[["g", *gk]]
    lengths = (hist.assign(n_control=np.where(hist["arm"] == "control", hist["n"], 0))
               .groupby("length", sort=True)[["n", "n_control"]].sum().reset_index())
    anypos = functools.reduce(lambda a, b: a | b, [rows[r] > 0 for r in rewards])
    code = ibis.memtable(group_arrow.select([*gk, "g"]))
    backend.execute(code.count())  # registers the small table: some backends cache() without doing so
    pos = rows.filter(anypos).join(code, gk)
    positives = pos.select("session", "g", *[c for c in rows.columns if c not in ("session", *gk)]).cache()
    return Source(rows=positives, sessions=sessions, backend=backend, max_rank=int(stats["max_rank"]), name=name,
                  keys=("g",), groups=groups, rewards=rewards, policies=policies, lengths=lengths, counts=counts,
                  n_rows=int(stats["n_rows"]))


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


# ------------------------------------------------------------------------------------ discount models


def source_discount(spec: str, source: Source, *, floor: float | None = None) -> DiscountModel:
    """Parse a discount spec for a source: a learnt ``pbm`` comes from its logs or length histogram."""
    kwargs = {} if floor is None else {"floor": floor}
    if source.logs is not None:
        cache = _prepared(source.logs)["pbm"]
        key = (spec, floor)
        if key not in cache:
            cache[key] = parse_discount(spec, logs=source.logs, **kwargs)
        return cache[key]
    if source.lengths is None:
        return parse_discount(spec, **kwargs)
    model = parse_discount(spec, logs=_STUB_LOGS, **kwargs)
    if model.kind != "pbm":
        return model
    return dataclasses.replace(model, values=tuple(pbm_from_histogram(source.lengths, floor=model.param).tolist()))


class _StubLogs:
    sessions = pd.DataFrame({"arm": ["control"], "length": [1]})


_STUB_LOGS = _StubLogs()


def pbm_from_histogram(lengths: pd.DataFrame, *, floor: float) -> np.ndarray:
    """The learnt ``pbm`` curve of :func:`offeval_core.discounts.learn_pbm` from a length histogram.

    ``lengths`` has one row per session length with ``n`` sessions (``n_control`` of them in the control
    arm); the control arm is used when it has sessions, as in ``learn_pbm``.

    >>> h = pd.DataFrame({"length": [1, 2], "n": [3, 1], "n_control": [1, 1]})
    >>> pbm_from_histogram(h, floor=0.01).tolist()  # both control sessions reach rank 1, one of two rank 2
    [1.0, 0.5]
    """
    col = "n_control" if int(lengths["n_control"].sum()) > 0 else "n"
    length = lengths["length"].to_numpy(dtype=np.int64)
    counts = np.zeros(int(length.max()) + 1, dtype=np.int64)
    np.add.at(counts, length, lengths[col].to_numpy(dtype=np.int64))
    return survival_from_counts(counts[1:], floor=floor)


# -------------------------------------------------------------------------------------- the kernel


def _lookup1(model: DiscountModel, rank: ir.IntegerValue, max_rank: int) -> ir.FloatingValue:
    """D(rank) as an Ibis expression: an array literal indexed by rank (0 outside 1..max_rank)."""
    arr = ibis.literal([float(v) for v in model.table(max_rank)], type="array<float64>")
    return ibis.ifelse((rank >= 1) & (rank <= max_rank), arr[rank - 1], 0.0)


def _lookup(models: Sequence[DiscountModel], which: ir.IntegerValue, rank: ir.IntegerValue, max_rank: int):
    """D_which(rank) as an Ibis expression: one array literal per model, indexed by rank (0 outside 1..max)."""
    values = [_lookup1(m, rank, max_rank) for m in models]
    if len(values) == 1:
        return values[0]
    return ibis.cases(*[(which == k, v) for k, v in enumerate(values[:-1])], else_=values[-1])


def variant_table(grid: Grid) -> pd.DataFrame:
    """One row per (discount, exposure, clip) with integer ids used inside the queries."""
    rows = []
    for dm, d in enumerate(grid.discounts):
        for em, e in enumerate(grid.exposures):
            for m in grid.clips:
                rows.append({"v": len(rows), "dm": dm, "em": em, "clip": _INF if math.isinf(m) else float(m),
                             "discount": d, "exposure": e, "clip_value": float(m)})
    return pd.DataFrame(rows)


def _rank_table(discount: DiscountModel, exposure: DiscountModel, max_rank: int) -> pd.DataFrame:
    """Per rank 1..max_rank: the inverse exposure 1 / D0(r) (inf where D0 = 0) and the discount D(r)."""
    with np.errstate(divide="ignore"):
        inv = 1.0 / exposure.table(max_rank)
    return pd.DataFrame({"r": np.arange(1, max_rank + 1, dtype=np.int64), "w": inv, "d": discount.table(max_rank)})


def _per_session(source: Source, *, reward: str, policies: Sequence[str], discount: DiscountModel,
                 exposure: DiscountModel, clips: Sequence[float], keys: Sequence[str], binary: bool) -> ir.Table:
    """One row per session with a positive reward; for clip number k the columns ``idcg_k`` and
    ``dcg_k_<i>`` (i = 0 for the logging policy, i ≥ 1 for ``policies[i-1]``), plus ``session`` and ``keys``.

    Wide over the clip grid: the per-row lookups (1 / D0 of the logged rank, D of every policy's rank, by
    joins with a small rank table) are done once per row and one group-by per session serves every clip
    value. With one positive reward value (binary rewards) the descending order of c · min(m, 1/D0)
    within a session is that of 1/D0 for every m (equal labels may swap without changing iDCG), so one
    sort per session serves the whole clip grid; otherwise the labels are ranked per clip value.
    """
    lut = ibis.memtable(_rank_table(discount, exposure, source.max_rank))
    t = source.rows
    pos = t.filter(t[reward] > 0)
    pos = pos.select("session", *keys, "rank", c=pos[reward].cast("float64"),
                     **{f"t{i}": pos[POLICY_PREFIX + p].cast("int64") for i, p in enumerate(policies, 1)})
    pos = pos.join(lut.select(rank="r", w="w", p0="d"), "rank")
    for i in range(1, len(policies) + 1):
        look = lut.select(**{f"t{i}": "r", f"p{i}": "d"})
        pos = pos.left_join(look, f"t{i}").drop(f"t{i}_right")
        pos = pos.mutate(**{f"p{i}": pos[f"p{i}"].fill_null(0.0)})
    n_pol = len(policies) + 1
    pos = pos.mutate(**{f"l{k}": pos.c * pos.w if math.isinf(m) else pos.c * ibis.least(ibis.literal(float(m)), pos.w)
                        for k, m in enumerate(clips)})
    if binary:
        pos = pos.mutate(j=ibis.row_number().over(group_by=pos.session, order_by=[pos.w.desc(), pos["rank"]]) + 1)
        pos = pos.join(lut.select(j="r", dj="d"), "j")
        ideal = ["dj"] * len(clips)
    else:
        for k in range(len(clips)):
            pos = pos.mutate(**{f"j{k}": ibis.row_number().over(
                group_by=pos.session, order_by=[pos[f"l{k}"].desc(), pos["rank"]]) + 1})
            pos = pos.join(lut.select(**{f"j{k}": "r", f"dj{k}": "d"}), f"j{k}")
        ideal = [f"dj{k}" for k in range(len(clips))]
    sums = {}
    for k in range(len(clips)):
        lab = pos[f"l{k}"]
        sums[f"idcg_{k}"] = (lab * pos[ideal[k]]).sum()
        for i in range(n_pol):
            sums[f"dcg_{k}_{i}"] = (lab * pos[f"p{i}"]).sum()
    return pos.group_by(["session", *keys]).aggregate(**sums)


def _binary_rewards(source: Source, rewards: Sequence[str]) -> dict[str, bool]:
    """Whether each reward takes a single positive value (then one sort per session serves every clip)."""
    t = source.rows
    aggs = {}
    for i, r in enumerate(rewards):
        aggs[f"lo{i}"] = t[r].cast("float64").min(where=t[r] > 0)
        aggs[f"hi{i}"] = t[r].cast("float64").max(where=t[r] > 0)
    res = _fetch(source, t.aggregate(**aggs)).iloc[0]
    out = {}
    for i, r in enumerate(rewards):
        lo, hi = res[f"lo{i}"], res[f"hi{i}"]
        out[r] = bool(pd.isna(lo) or float(lo) == float(hi))
    return out


def session_kernel(
    source: Source, *, reward: str, policies: Sequence[str], discounts: Sequence[DiscountModel],
    exposures: Sequence[DiscountModel], variants: pd.DataFrame,
) -> ir.Table:
    """Per (variant, session with a reward): DCG of the logging and target policies and iDCG.

    Columns ``v``, ``session``, ``dcg__logging``, ``dcg__<policy>``…, ``idcg``. Sessions without a
    positive reward are absent (all their values are 0).
    """
    binary = _binary_rewards(source, [reward])[reward]
    names = [LOGGING_POLICY, *policies]
    parts = []
    for (dm, em), block in variants.groupby(["dm", "em"], sort=True):
        clips = [math.inf if c >= _INF else float(c) for c in block["clip"]]
        per = _per_session(source, reward=reward, policies=policies, discount=discounts[dm],
                           exposure=exposures[em], clips=clips, keys=(), binary=binary)
        for k, v in enumerate(block["v"]):
            parts.append(per.select(v=ibis.literal(int(v), type="int64"), session=per.session,
                                    idcg=per[f"idcg_{k}"],
                                    **{f"dcg__{p}": per[f"dcg_{k}_{i}"] for i, p in enumerate(names)}))
    return ibis.union(*parts) if len(parts) > 1 else parts[0]


def _group_moments(source: Source, *, reward: str, policies: Sequence[str], discount: DiscountModel,
                   exposure: DiscountModel, block: pd.DataFrame, keys: list[str], binary: bool) -> pd.DataFrame:
    """Per (variant, group): the moments of every clip value of one (D, D0) pair.

    The per-session table is wide over the clip grid; a cross join with the clip index turns it long
    (one row per session and clip value) so one low-cardinality group-by computes every moment.
    """
    names = [LOGGING_POLICY, *policies]
    clips = [math.inf if c >= _INF else float(c) for c in block["clip"]]
    per = _per_session(source, reward=reward, policies=policies, discount=discount, exposure=exposure,
                       clips=clips, keys=keys, binary=binary)
    index = ibis.memtable(pd.DataFrame({"k": np.arange(len(clips), dtype=np.int64)}))
    x = per.cross_join(index)

    def pick(fmt: str):
        if len(clips) == 1:
            return x[fmt.format(0)]
        return ibis.cases(*[(x.k == k, x[fmt.format(k)]) for k in range(len(clips) - 1)],
                          else_=x[fmt.format(len(clips) - 1)])

    x = x.select("k", *keys, idcg=pick("idcg_{}"), **{f"d{i}": pick(f"dcg_{{}}_{i}") for i in range(len(names))})
    x = x.mutate(**{f"n{i}": ibis.ifelse(x.idcg > 0, x[f"d{i}"] / x.idcg, 0.0) for i in range(len(names))})
    idcg = x.idcg
    aggs = {"den_sum": idcg.sum(), "den_sumsq": (idcg * idcg).sum(), "n_pos": (idcg > 0).cast("int64").sum()}
    for metric, pre in (("dcg", "d"), ("ndcg", "n")):
        for i, p in enumerate(names):
            v = x[f"{pre}{i}"]
            aggs |= {f"{metric}__{p}__sum": v.sum(), f"{metric}__{p}__sumsq": (v * v).sum(),
                     f"{metric}__{p}__sum_x_den": (v * idcg).sum()}
        for i, p in enumerate(policies, 1):
            dd = x[f"{pre}{i}"] - x[f"{pre}0"]
            aggs |= {f"{metric}__{p}__sum_diff": dd.sum(), f"{metric}__{p}__sumsq_diff": (dd * dd).sum(),
                     f"{metric}__{p}__sum_diff_den": (dd * idcg).sum()}
    wide = _fetch(source, x.group_by(["k", *keys]).aggregate(**aggs))
    v_of_k = block["v"].to_numpy()
    wide.insert(0, "v", v_of_k[wide.pop("k").to_numpy(dtype=np.int64)])
    return wide


def _fetch(source: Source, expr: ir.Table) -> pd.DataFrame:
    """Run a query and return a pandas frame (through Arrow: cheaper than per-column conversion)."""
    return _fetch_table(source.backend, expr)


def _fetch_table(backend, expr: ir.Table) -> pd.DataFrame:
    return backend.to_pyarrow(expr).to_pandas()


def reduce(logs: Logs | Source, grid: Grid, *, backend=None, pbm_floor: float | None = None) -> Moments:
    """Compute per-group moments of every variant in ``grid`` (the heavy step; everything else is cheap).

    Groups are (experiment_id, day, arm, segment); analyses sum moments over whichever keys they ignore.
    """
    if isinstance(logs, Logs):
        for r in grid.rewards:
            logs.check_reward(r)
        for p in grid.policies:
            logs.check_policy(p)
        source = source_from_logs(logs, backend)
    else:
        source = logs
        _check_source_names(source, grid)
    discounts = [source_discount(d, source, floor=pbm_floor) for d in grid.discounts]
    exposures = [source_discount(e, source, floor=pbm_floor) for e in grid.exposures]
    _check_exposures(exposures, grid)
    variants = variant_table(grid)
    keys = list(source.keys)
    counts = source.counts
    if counts is None:
        sessions = source.sessions
        counts = _fetch(source, sessions.group_by(keys).aggregate(n=sessions.count()))
    names = [LOGGING_POLICY, *grid.policies]
    binary = _binary_rewards(source, grid.rewards)

    offline_parts = []
    for reward in grid.rewards:
        wides = []
        for (dm, em), block in variants.groupby(["dm", "em"], sort=True):
            wides.append(_group_moments(source, reward=reward, policies=grid.policies, discount=discounts[dm],
                                        exposure=exposures[em], block=block, keys=keys, binary=binary[reward]))
        wide = pd.concat(wides, ignore_index=True)
        offline_parts.append(_to_long(wide, counts, variants, names, grid, reward, keys))

    online = _online(source, grid.rewards, counts, keys)
    offline = pd.concat(offline_parts, ignore_index=True)
    if source.groups is not None:
        offline = _expand_groups(offline, source.groups)
        online = _expand_groups(online, source.groups)
    labels = {m.spec if m.kind != "pbm" else "pbm": m.label for m in [*discounts, *exposures]}
    out_keys = list(GROUP_KEYS)
    return Moments(offline=_tidy(offline, out_keys), online=_tidy(online, out_keys), grid=grid,
                   discount_labels=labels, source=source.name)


def _online(source: Source, rewards: Sequence[str], counts: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group and reward: sessions, Σ and Σ² of the per-session observed reward (one pass, all rewards)."""
    t = source.rows
    anypos = functools.reduce(lambda a, b: a | b, [t[r] > 0 for r in rewards])
    pos = t.filter(anypos)
    per = pos.group_by(["session", *keys]).aggregate(**{f"r{i}": pos[r].cast("float64").sum()
                                                        for i, r in enumerate(rewards)})
    aggs = {}
    for i in range(len(rewards)):
        aggs |= {f"sum{i}": per[f"r{i}"].sum(), f"sumsq{i}": (per[f"r{i}"] * per[f"r{i}"]).sum()}
    wide = _fetch(source, per.group_by(keys).aggregate(**aggs))
    parts = []
    for i, r in enumerate(rewards):
        part = wide[[*keys, f"sum{i}", f"sumsq{i}"]].rename(columns={f"sum{i}": "sum", f"sumsq{i}": "sumsq"})
        part = counts.merge(part, on=keys, how="left").fillna({"sum": 0.0, "sumsq": 0.0})
        part.insert(len(keys), "reward", r)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _expand_groups(df: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    out = groups.merge(df, on="g", how="right").drop(columns="g")
    return out


def _check_source_names(source: Source, grid: Grid) -> None:
    cols = set(source.rows.columns)
    for r in grid.rewards:
        if r not in cols:
            known = ", ".join(source.rewards) or ", ".join(c for c in source.rows.columns)
            raise ValueError(f"unknown reward {r!r}; the logs {source.name} have reward columns: {known}")
    for p in grid.policies:
        if POLICY_PREFIX + p not in cols:
            known = ", ".join(source.policies) or "none"
            raise ValueError(f"unknown policy {p!r}: the logs {source.name} have no column "
                             f"'{POLICY_PREFIX}{p}' (policies found: {known})")


def _check_exposures(exposures: Sequence[DiscountModel], grid: Grid) -> None:
    for e in exposures:
        if e.kind == "table" and (e.cutoff is not None or min(e.values) <= 0) and math.inf in grid.clips:
            raise ValueError(
                f"exposure model {e.spec!r} gives probability 0 to some ranks, so 1 / D0 is infinite there; "
                "logged items were viewed, so an exposure model must be > 0 at every logged rank "
                "(drop the cut-off or use a finite clip grid)"
            )
        if e.kind != "table" and e.cutoff is not None:
            raise ValueError(
                f"exposure model {e.spec!r} has a cut-off; a cut-off belongs to the target discount D, "
                "not to the exposure model D0 of logged (viewed) ranks"
            )


def _to_long(wide, counts, variants, names, grid, reward, keys) -> pd.DataFrame:
    wide = wide.merge(variants[["v", "discount", "exposure", "clip_value"]], on="v")
    # groups with sessions but no reward in this variant still need rows: complete the grid
    full = counts.merge(variants[["v", "discount", "exposure", "clip_value"]], how="cross")
    wide = full.merge(wide.drop(columns=["discount", "exposure", "clip_value"]), on=["v", *keys], how="left")
    wide = wide.fillna({c: 0 for c in wide.columns if c.startswith(("dcg__", "ndcg__", "den_", "n_pos"))})
    parts = []
    for metric in METRICS:
        for p in names:
            pre = f"{metric}__{p}__"
            part = wide[[*keys, "discount", "exposure", "clip_value", "n", "n_pos", "den_sum", "den_sumsq"]].copy()
            part["reward"] = reward
            part["policy"] = p
            part["metric"] = metric
            for stat in ("sum", "sumsq", "sum_x_den", "sum_diff", "sumsq_diff", "sum_diff_den"):
                part[stat] = wide[pre + stat].to_numpy(dtype=float) if pre + stat in wide else np.nan
            if metric == "ndcg" and grid.ndcg_rule == "drop":
                part["n"] = part["n_pos"]
            parts.append(part)
    out = pd.concat(parts, ignore_index=True).rename(columns={"clip_value": "clip"})
    out["n"] = out["n"].astype(np.int64)
    return out.drop(columns=["n_pos"])


def _tidy(df: pd.DataFrame, keys) -> pd.DataFrame:
    front = [*keys, "reward"] + [c for c in ("discount", "exposure", "clip", "policy", "metric") if c in df.columns]
    rest = [c for c in df.columns if c not in front]
    df = df[front + rest].sort_values(front, kind="stable").reset_index(drop=True)
    for k in ("experiment_id", "arm", "segment"):
        df[k] = df[k].astype(str)
    return df
