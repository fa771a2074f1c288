"""The log reduce: per-group moments of every variant of a :class:`~offeval_core.engine.Grid`.

Written once as backend-neutral Ibis expressions (DuckDB embedded by default, reading Parquet itself and
spilling beyond its memory limit; Spark through Ibis's pyspark backend; any Ibis backend with window
functions runs the same code) and compiled once per query shape (:mod:`offeval_core.engine.kernel`). Only
rewarded rows are read on the heavy path: DCG, iDCG and every IPS-type sum take contributions only from rows
with a non-zero reward (DESIGN.md "Only rewarded rows matter"); sessions without a reward contribute zeros
to the sums and are counted from the session table.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from offeval_core.discounts import DiscountModel, check_exposure_cutoff, parse_discount
from offeval_core.engine.grid import DEFAULT_CLIPS, GROUP_KEYS, INF_CLIP, METRICS, Grid, Moments
from offeval_core.engine.kernel import _state, binary_rewards, compiled_moments
from offeval_core.engine.lookups import source_discount, variant_table
from offeval_core.engine.sources import Source, _fetch_table, logs_source, source_from_logs
from offeval_core.errors import NonFiniteMoments, SpecError, UnknownName
from offeval_core.logs import LOGGING_POLICY, POLICY_PREFIX, Logs
from offeval_core.moment_columns import (
    OFFLINE_ROLES,
    ONLINE_ROLES,
    OWN_COLUMNS,
    Layout,
    add_zeros,
    remove_zeros,
)
from offeval_core.stats import OVERFLOW_HINT
from offeval_core.validation import format_clip

__all__ = ["check_finite_moments", "prepare", "reduce"]


def reduce(logs: Logs | Source, grid: Grid, *, backend=None, pbm_floor: float | None = None,
           cache="env") -> Moments:
    """Compute per-group moments of every variant in ``grid`` (the heavy step; everything else is cheap).

    Groups are (experiment_id, day, arm, segment); analyses sum moments over whichever keys they ignore.
    In-memory ``logs`` without a ``backend`` use their one cached source (:func:`logs_source`), so a second
    reduce of the same logs reuses the registered tables and the compiled queries of the first, and are
    first looked up in the persistent moments cache (:mod:`offeval_core.moments_cache`; ``cache``: ``"env"``
    for the one the environment names, a :class:`~offeval_core.moments_cache.MomentsCache`, or None), where
    the result is stored.
    """
    for spec in dict.fromkeys((*grid.discounts, *grid.exposures)):  # a bad spec or table fails here, before
        if not str(spec).startswith("pbm"):                          # any engine work (the learnt pbm needs logs)
            parse_discount(spec)
    if isinstance(logs, Logs):
        for r in grid.rewards:
            logs.check_reward(r)
        for p in grid.policies:
            logs.check_policy(p)
        if backend is None and cache is not None:
            from offeval_core import moments_cache

            store = moments_cache.resolve(cache)
            if store is not None:
                key = moments_cache.logs_key(logs, grid, pbm_floor=pbm_floor)
                hit = store.get(key, grid, source=logs.source)
                if hit is not None:
                    return hit
                out = reduce(logs, grid, pbm_floor=pbm_floor, cache=None)
                store.put(key, out)
                return out
        source = logs_source(logs) if backend is None else source_from_logs(logs, backend)
    else:
        source = logs
        _check_source_names(source, grid)
    with _state(source)["lock"]:  # one query at a time on a source's connection (the dashboard has threads)
        return _reduce(source, grid, pbm_floor=pbm_floor)


def _reduce(source: Source, grid: Grid, *, pbm_floor: float | None) -> Moments:
    discounts = [source_discount(d, source, floor=pbm_floor) for d in grid.discounts]
    exposures = [source_discount(e, source, floor=pbm_floor) for e in grid.exposures]
    _check_exposures(exposures, grid, source.max_rank)
    variants = variant_table(grid)
    keys = list(source.keys)
    counts = source.counts
    if counts is None:
        counts = _session_counts(source, keys)
    names = [LOGGING_POLICY, *grid.policies]
    binary = binary_rewards(source, grid.rewards)

    offline_parts = []
    for reward in grid.rewards:
        query = compiled_moments(source, rewards=grid.rewards, policies=grid.policies, n_clips=len(grid.clips),
                                 binary=binary[reward])
        wides = []
        for (dm, em), block in variants.groupby(["dm", "em"], sort=True):
            wide = query.run(reward=reward, discount=discounts[dm], exposure=exposures[em], clips=grid.clips)
            wide.insert(0, "v", block["v"].to_numpy()[wide.pop("k").to_numpy(dtype=np.int64)])
            wides.append(wide)
        wide = pd.concat(wides, ignore_index=True)
        offline_parts.append(_to_long(wide, counts, variants, names, grid, reward, keys))

    online = _online(source, grid.rewards, counts, keys)
    offline = pd.concat(offline_parts, ignore_index=True)
    del offline_parts  # (the peak memory of the reduce is the frames held at once)
    if source.groups is not None:
        offline = _expand_groups(offline, source.groups)
        online = _expand_groups(online, source.groups)
    labels = {spec: m.label for spec, m in zip([*grid.discounts, *grid.exposures], [*discounts, *exposures], strict=True)}
    out_keys = list(GROUP_KEYS)
    return Moments(offline=_tidy(offline, out_keys), online=_tidy(online, out_keys), grid=grid,
                   discount_labels=labels, source=source.name)


def prepare(logs: Logs | Source, *, policies: Sequence[str] | None = None, n_clips: int = len(DEFAULT_CLIPS)) -> Source:
    """Do once what every reduce of these logs shares: register them (in-memory logs: their cached
    :func:`logs_source`), find which rewards are binary, compile the moments query of each shape (binary /
    graded reward, every policy, ``n_clips`` clip values) and compute the online moments of every reward.

    Afterwards a reduce of any (reward, D, D0) over all policies and that many clip values only runs the
    compiled query. Returns the source.
    """
    source = logs_source(logs) if isinstance(logs, Logs) else logs
    with _state(source)["lock"]:
        return _prepare(source, policies=policies, n_clips=n_clips)


def _prepare(source: Source, *, policies: Sequence[str] | None, n_clips: int) -> Source:
    policies = tuple(source.policies if policies is None else policies)
    rewards = tuple(source.rewards)
    binary = binary_rewards(source, rewards)
    for flag in sorted(set(binary.values())):
        compiled_moments(source, rewards=rewards, policies=policies, n_clips=n_clips, binary=flag)
    keys = list(source.keys)
    counts = source.counts if source.counts is not None else _session_counts(source, keys)
    _online(source, rewards, counts, keys)
    return source


def _session_counts(source: Source, keys: list[str]) -> pd.DataFrame:
    """Sessions per group (once per source)."""
    state = _state(source)
    if "counts" not in state:
        s = source.sessions
        state["counts"] = _fetch_table(source.backend, s.group_by(keys).aggregate(n=s.count()))
    return state["counts"]


def _online(source: Source, rewards: Sequence[str], counts: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group and reward: sessions ``n``, Σ and centred second moment ``m2`` of the per-session observed
    reward (one pass over every reward of the source, once per source): the sessions with a positive reward
    of any kind, merged with the group's other sessions (reward 0)."""
    state = _state(source)
    everything = tuple(dict.fromkeys([*source.rewards, *rewards]))
    cached = state["online"].get(everything)
    if cached is None:
        t = source.rows
        anypos = functools.reduce(lambda a, b: a | b, [t[r] > 0 for r in everything])
        pos = t.filter(anypos)
        per = pos.group_by(["session", *keys]).aggregate(**{f"r{i}": pos[r].cast("float64").sum()
                                                            for i, r in enumerate(everything)})
        k = per.count()
        aggs = {"k": k}
        for i in range(len(everything)):
            aggs |= {f"sum{i}": per[f"r{i}"].sum(), f"m2{i}": per[f"r{i}"].var(how="pop") * k}
        cached = state["online"][everything] = _fetch_table(source.backend, per.group_by(keys).aggregate(**aggs))
    parts = []
    for r in rewards:
        i = everything.index(r)
        part = cached[[*keys, "k", f"sum{i}", f"m2{i}"]].rename(columns={f"sum{i}": "sum", f"m2{i}": "m2"})
        part = counts.merge(part, on=keys, how="left").fillna({"k": 0, "sum": 0.0, "m2": 0.0})
        k = part.pop("k").to_numpy(dtype=float)
        n = part["n"].to_numpy(dtype=float)
        rewarded = np.column_stack([k, part["sum"].to_numpy(dtype=float), part["m2"].to_numpy(dtype=float)])
        merged = add_zeros(rewarded, n - k, _ONLINE_LAYOUT)
        part["sum"], part["m2"] = merged[:, 1], merged[:, 2]
        part.insert(len(keys), "reward", r)
        check_finite_moments(part, what=f"the observed reward {r!r}", roles=ONLINE_ROLES)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _expand_groups(df: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its group code ``g`` replaced by the group's keys (the columns of ``groups`` but ``g``, first):
    the keys' rows taken by position, one copy (a merge hashed and copied every column)."""
    at = pd.Index(groups["g"]).get_indexer(df["g"])
    if (at < 0).any():  # the reduce takes every code from ``groups``: missing keys would be rows of no group
        raise RuntimeError(f"internal error: group code {df['g'].to_numpy()[np.flatnonzero(at < 0)[0]]} has no group")
    keys = groups.drop(columns="g").take(at).reset_index(drop=True)
    return pd.concat([keys, df.drop(columns="g").reset_index(drop=True)], axis=1)


def _check_source_names(source: Source, grid: Grid) -> None:
    cols = set(source.rows.columns)
    for r in grid.rewards:
        if r not in cols:
            known = ", ".join(source.rewards) or ", ".join(c for c in source.rows.columns)
            raise UnknownName(f"unknown reward {r!r}; the logs {source.name} have reward columns: {known}")
    for p in grid.policies:
        if POLICY_PREFIX + p not in cols:
            known = ", ".join(source.policies) or "none"
            raise UnknownName(f"unknown policy {p!r}: the logs {source.name} have no column "
                             f"'{POLICY_PREFIX}{p}' (policies found: {known})")


def _check_exposures(exposures: Sequence[DiscountModel], grid: Grid, max_rank: int) -> None:
    for e in exposures:
        with np.errstate(divide="ignore", over="ignore"):
            w = 1.0 / e.table(max_rank)
        beyond = np.flatnonzero(~(w < INF_CLIP))  # 1 / D0 infinite, or past what stands for m = ∞
        if len(beyond) and e.kind != "table" and math.inf in grid.clips:
            r = int(beyond[0]) + 1
            raise NonFiniteMoments(
                f"exposure model {e.spec!r} gives rank {r} a probability of {e.table(max_rank)[r - 1]:.3g}, so the "
                f"unclipped (m = ∞) weight 1 / D0 there is beyond double precision; use a finite clip grid or an "
                "exposure model that stays above 1e-300 at every logged rank")
        if e.kind == "table" and (e.cutoff is not None or min(e.values) <= 0) and math.inf in grid.clips:
            raise SpecError(
                f"exposure model {e.spec!r} gives probability 0 to some ranks, so 1 / D0 is infinite there; "
                "logged items were viewed, so an exposure model must be > 0 at every logged rank "
                "(drop the cut-off or use a finite clip grid)"
            )
        check_exposure_cutoff(e)


LONG_COLUMNS = ("n", "sum", "m2", "den_sum", "den_m2", "co_den", "sum_diff", "m2_diff", "co_diff_den")
"""The moment columns of a DCG-family row of ``Moments.offline`` (roles: :data:`~offeval_core.moment_columns.OFFLINE_ROLES`)."""
_LONG_LAYOUT = Layout(LONG_COLUMNS, OFFLINE_ROLES)
_ONLINE_LAYOUT = Layout(("n", "sum", "m2"), ONLINE_ROLES)


def _to_long(wide, counts, variants, names, grid, reward, keys) -> pd.DataFrame:
    """One row per (group, variant, metric, policy): the rewarded sessions' moments of ``wide`` merged with
    the group's sessions without a reward (every value 0): all of them for DCG and for nDCG with the
    ``zero`` rule; with the ``drop`` rule nDCG keeps only the sessions with iDCG > 0."""
    wide = wide.merge(variants[["v", "discount", "exposure", "clip_value"]], on="v")
    # groups with sessions but no reward in this variant still need rows: complete the grid
    full = counts.merge(variants[["v", "discount", "exposure", "clip_value"]], how="cross")
    wide = full.merge(wide.drop(columns=["discount", "exposure", "clip_value"]), on=["v", *keys], how="left")
    # one block of rows per (metric, policy), built column by column (no per-block frames)
    blocks = [(metric, p) for metric in METRICS for p in names]
    n_rows, n_blocks = len(wide), len(blocks)

    # groups without a rewarded session in a variant have no row in ``wide``: zeros (any other NaN stays)
    missing = wide["n_r"].isna().to_numpy()

    @functools.cache
    def filled(c):
        x = wide[c].to_numpy(dtype=float)
        return np.where(np.isnan(x) & missing, 0.0, x)

    n_all = wide["n"].to_numpy(dtype=float)
    n_r, n_pos = filled("n_r"), filled("n_pos")
    nan = np.full(n_rows, np.nan)
    blocks_of = {metric: [] for metric in METRICS}  # (rows of the metric's blocks, column)
    for metric, p in blocks:
        pre = f"{metric}__{p}__"
        diff = [filled(pre + c) if pre + c in wide else nan for c in ("sum_diff", "m2_diff", "co_diff_den")]
        blocks_of[metric].append(np.column_stack([n_r, filled(pre + "sum"), filled(pre + "m2"), filled("den_sum"),
                                                  filled("den_m2"), filled(pre + "co_den"), *diff]))
    layout = _LONG_LAYOUT
    parts = []
    for metric in METRICS:
        block = np.concatenate(blocks_of[metric])
        k = len(blocks_of[metric])
        if metric == "ndcg" and grid.ndcg_rule == "drop":  # only the sessions with iDCG > 0
            block = remove_zeros(block, np.tile(n_r - n_pos, k), layout)
            block[:, LONG_COLUMNS.index("den_m2")] = np.tile(filled("pden_m2"), k)
        else:  # the sessions without a reward (every value 0)
            block = add_zeros(block, np.tile(n_all - n_r, k), layout)
        parts.append(block)
    values = np.concatenate(parts)
    # the text columns taken from their few values (building them from Python strings was most of this function)
    tiled = np.tile(np.arange(n_rows), n_blocks)
    cols = {c: wide[c].array.take(tiled) for c in [*keys, "discount", "exposure", "clip_value"]}
    cols["reward"] = _text([reward], np.zeros(n_rows * n_blocks, dtype=np.intp))
    cols["policy"] = _text([p for _, p in blocks], np.repeat(np.arange(n_blocks), n_rows))
    cols["metric"] = _text([m for m, _ in blocks], np.repeat(np.arange(n_blocks), n_rows))
    cols |= {c: values[:, j] for j, c in enumerate(LONG_COLUMNS)}
    out = pd.DataFrame(cols).rename(columns={"clip_value": "clip"})
    out["n"] = out["n"].round().astype(np.int64)
    logging_rows = np.repeat(np.array([p == LOGGING_POLICY for _, p in blocks]), n_rows)
    paired = np.array([c not in OWN_COLUMNS for c in LONG_COLUMNS])
    ok = np.isfinite(values) | (np.isnan(values) & logging_rows[:, None] & paired[None, :])
    if not ok.all():  # (the logging policy's paired columns are empty by design)
        check_finite_moments(out, what=f"reward {reward!r}")
    return out


_VARIANT = ("experiment_id", "day", "arm", "segment", "discount", "exposure", "clip", "policy", "metric")


def check_finite_moments(frame: pd.DataFrame, *, what: str, roles=OFFLINE_ROLES) -> None:
    """Raise :class:`NonFiniteMoments` naming the first row of ``frame`` with an infinite or undefined moment
    (the paired columns of the logging policy's rows are empty by design). The importance rows' weight
    diagnostics (``add`` / ``max`` columns, e.g. Σw² of the uncapped weights) may overflow without stopping
    the estimates of capped weights: their summaries (ESS…) show it."""
    cols = [c for c in roles if c in frame.columns and roles[c].kind not in ("add", "max")]
    values = frame[cols].to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(values)
    if "policy" in frame.columns:  # the logging policy's rows leave the paired columns empty
        paired = np.array([c not in OWN_COLUMNS for c in cols])
        bad &= ~(np.isnan(values) & paired & (frame["policy"] == LOGGING_POLICY).to_numpy()[:, None])
    rows = np.flatnonzero(bad.any(axis=1))
    if not len(rows):
        return
    row = frame.iloc[rows[0]]
    where = ", ".join(f"{k} {format_clip(row[k]) if k == 'clip' else row[k]}" for k in _VARIANT if k in frame.columns)
    column = cols[int(np.flatnonzero(bad[rows[0]])[0])]
    at = f" at {where}" if where else ""  # (per-group rows of coded groups name no variant)
    raise NonFiniteMoments(f"the moments of {what} are not finite{at} (column '{column}'; {len(rows):,} "
                           f"row(s) in all): {OVERFLOW_HINT}", column=column)


def _tidy(df: pd.DataFrame, keys) -> pd.DataFrame:
    """The variant columns first, rows sorted by them (stable; missing values last), group keys as text. The order
    is a lexsort of each column's sorted codes and the rows are taken once: ``sort_values`` over the object
    columns held several copies of the frame at once, the reduce's peak memory."""
    front = [*keys, "reward"] + [c for c in ("discount", "exposure", "clip", "policy", "metric") if c in df.columns]
    rest = [c for c in df.columns if c not in front]
    codes = []
    for c in front:
        code, uniques = pd.factorize(df[c], sort=True)
        codes.append(np.where(code < 0, len(uniques), code))  # missing last, as sort_values puts them
    order = np.lexsort(codes[::-1])  # (an empty frame: empty codes, an empty order)
    df = df[front + rest].take(order).reset_index(drop=True)
    for k in ("experiment_id", "arm", "segment"):
        col = df[k]
        if isinstance(col.dtype, pd.CategoricalDtype) and (col.cat.codes >= 0).all():  # the categories' text, taken
            df[k] = _text(col.cat.categories.astype(str), col.cat.codes.to_numpy())
        else:
            df[k] = col.astype(str)
    return df


def _text(values, codes: np.ndarray):
    """A text column (pandas' ``str`` dtype) of ``values[codes]``, taken from the few values (not built from a
    Python string per row).

    >>> _text(["a", "b"], np.array([1, 0, 1])).tolist()
    ['b', 'a', 'b']
    """
    return pd.array(list(values), dtype="str").take(codes)
