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

from offeval_core.discounts import DiscountModel, parse_discount
from offeval_core.engine.grid import DEFAULT_CLIPS, GROUP_KEYS, METRICS, Grid, Moments
from offeval_core.engine.kernel import _state, binary_rewards, compiled_moments
from offeval_core.engine.lookups import source_discount, variant_table
from offeval_core.engine.sources import Source, _fetch_table, logs_source, source_from_logs
from offeval_core.errors import UnknownName
from offeval_core.logs import LOGGING_POLICY, POLICY_PREFIX, Logs

__all__ = ["prepare", "reduce"]


def reduce(logs: Logs | Source, grid: Grid, *, backend=None, pbm_floor: float | None = None) -> Moments:
    """Compute per-group moments of every variant in ``grid`` (the heavy step; everything else is cheap).

    Groups are (experiment_id, day, arm, segment); analyses sum moments over whichever keys they ignore.
    In-memory ``logs`` without a ``backend`` use their one cached source (:func:`logs_source`), so a second
    reduce of the same logs reuses the registered tables and the compiled queries of the first.
    """
    for spec in dict.fromkeys((*grid.discounts, *grid.exposures)):  # a bad spec or table fails here, before
        if not str(spec).startswith("pbm"):                          # any engine work (the learnt pbm needs logs)
            parse_discount(spec)
    if isinstance(logs, Logs):
        for r in grid.rewards:
            logs.check_reward(r)
        for p in grid.policies:
            logs.check_policy(p)
        source = logs_source(logs) if backend is None else source_from_logs(logs, backend)
    else:
        source = logs
        _check_source_names(source, grid)
    with _state(source)["lock"]:  # one query at a time on a source's connection (the dashboard has threads)
        return _reduce(source, grid, pbm_floor=pbm_floor)


def _reduce(source: Source, grid: Grid, *, pbm_floor: float | None) -> Moments:
    discounts = [source_discount(d, source, floor=pbm_floor) for d in grid.discounts]
    exposures = [source_discount(e, source, floor=pbm_floor) for e in grid.exposures]
    _check_exposures(exposures, grid)
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
    if source.groups is not None:
        offline = _expand_groups(offline, source.groups)
        online = _expand_groups(online, source.groups)
    labels = {m.spec if m.kind != "pbm" else "pbm": m.label for m in [*discounts, *exposures]}
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
    """Per group and reward: sessions, Σ and Σ² of the per-session observed reward (one pass over every
    reward of the source, once per source)."""
    state = _state(source)
    everything = tuple(dict.fromkeys([*source.rewards, *rewards]))
    cached = state["online"].get(everything)
    if cached is None:
        t = source.rows
        anypos = functools.reduce(lambda a, b: a | b, [t[r] > 0 for r in everything])
        pos = t.filter(anypos)
        per = pos.group_by(["session", *keys]).aggregate(**{f"r{i}": pos[r].cast("float64").sum()
                                                            for i, r in enumerate(everything)})
        aggs = {}
        for i in range(len(everything)):
            aggs |= {f"sum{i}": per[f"r{i}"].sum(), f"sumsq{i}": (per[f"r{i}"] * per[f"r{i}"]).sum()}
        cached = state["online"][everything] = _fetch_table(source.backend, per.group_by(keys).aggregate(**aggs))
    parts = []
    for r in rewards:
        i = everything.index(r)
        part = cached[[*keys, f"sum{i}", f"sumsq{i}"]].rename(columns={f"sum{i}": "sum", f"sumsq{i}": "sumsq"})
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
            raise UnknownName(f"unknown policy {p!r}: the logs {source.name} have no column "
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
    # one block of rows per (metric, policy), built column by column (no per-block frames)
    blocks = [(metric, p) for metric in METRICS for p in names]
    n_rows, n_blocks = len(wide), len(blocks)
    def filled(c):  # groups without a rewarded session in a variant have no row in ``wide``: zeros
        return np.nan_to_num(wide[c].to_numpy(dtype=float), nan=0.0)

    cols = {c: np.tile(wide[c].to_numpy(), n_blocks) for c in [*keys, "discount", "exposure", "clip_value", "n"]}
    cols |= {c: np.tile(filled(c), n_blocks) for c in ("den_sum", "den_sumsq")}
    if grid.ndcg_rule == "drop":
        n_pos = filled("n_pos").astype(np.int64)
        cols["n"] = np.concatenate([n_pos if metric == "ndcg" else wide["n"].to_numpy() for metric, _ in blocks])
    cols["reward"] = np.full(n_rows * n_blocks, reward, dtype=object)
    cols["policy"] = np.repeat(np.array([p for _, p in blocks], dtype=object), n_rows)
    cols["metric"] = np.repeat(np.array([m for m, _ in blocks], dtype=object), n_rows)
    nan = np.full(n_rows, np.nan)
    for stat in ("sum", "sumsq", "sum_x_den", "sum_diff", "sumsq_diff", "sum_diff_den"):
        cols[stat] = np.concatenate([filled(f"{m}__{p}__{stat}") if f"{m}__{p}__{stat}" in wide else nan
                                     for m, p in blocks])
    out = pd.DataFrame(cols).rename(columns={"clip_value": "clip"})
    out["n"] = out["n"].astype(np.int64)
    return out


def _tidy(df: pd.DataFrame, keys) -> pd.DataFrame:
    front = [*keys, "reward"] + [c for c in ("discount", "exposure", "clip", "policy", "metric") if c in df.columns]
    rest = [c for c in df.columns if c not in front]
    df = df[front + rest].sort_values(front, kind="stable").reset_index(drop=True)
    for k in ("experiment_id", "arm", "segment"):
        df[k] = df[k].astype(str)
    return df
