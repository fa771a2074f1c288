"""Seeded simulator of a short-video feed with known ground truth.

The world follows the problem setting of Jeunen et al. (KDD'24, Sec. 3): a trajectory τ has a context x
(a user of segment "registered" or "guest"), a candidate set of K items, a deterministic ranker that orders
them, and a user who scrolls and stops; only viewed items are logged (ranks 1..L). With every switch off,
the five assumptions of Sec. 4 hold exactly:

- Asm. 1: sessions are independent draws;
- Asm. 2 (position-based model): the session length L is drawn independently of the items from a survival
  curve S(r) = P(L ≥ r) = P(V = 1 | R = r) (the same for all sessions of a day; with ``depth_drift``, as in
  the ``demo`` preset, its scale changes from day to day, so a curve learnt over all days is exact only
  on average);
- Asm. 3: the reward of an item depends on the context and that item only;
- Asm. 4 (examination hypothesis, Eq. 4): C = Q · V with P(Q = 1 | x, a) = q(x, a);
- Asm. 5 (full support, Eq. 7): S(K) > 0, so every candidate has non-zero exposure under the logger.

The ground truth is exact, not sampled: for policy π and session τ the expected reward is
E[Σ_i c_i | x_τ, π] = Σ_r P(V_r = 1) · q(x_τ, π_r) (Eq. 5 with the true q and the true viewing model),
averaged over the realised sessions of each (experiment, day, arm). Switches break Asm. 2-5 one at a time
(``cascade``, ``reward_interactions``, ``contextual_position_bias``, ``support_depth``); the ground truth
stays exact under each of them (cascade: product of continuation probabilities).

Generation is block-wise — one block per (day, experiment, arm, chunk) with its own seed derived from
``(seed, day, experiment, arm, chunk)`` — so a large data set is written day by day without holding it
in memory, and the content does not depend on how it is written.

The configuration (rankers, presets, switches, the true survival curve) is :mod:`offeval_core.simulate_config`;
its names are re-exported here. Slightly over 400 lines on purpose: one block's sampled rows and its exact
ground truth are computed side by side in ``_block`` from the same draws, and splitting them apart would let
the truth drift from what the rows were sampled from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from offeval_core.errors import InputError, MissingInput, OutputExists, UnwritableOutput
from offeval_core.safe_io import check_output, output_mode
from offeval_core.simulate_config import (
    ARMS,
    CANDIDATES,
    EFFECTS,
    PRESETS,
    PRODUCTION,
    SEGMENTS,
    START_DAY,
    SURVIVALS,
    TREATMENTS,
    RankerSpec,
    SimulationConfig,
    _hazard,
    preset_config,
    true_survival,
    with_overrides,
)

__all__ = [
    "ARMS",
    "CANDIDATES",
    "EFFECTS",
    "PRESETS",
    "PRODUCTION",
    "SEGMENTS",
    "START_DAY",
    "SURVIVALS",
    "TREATMENTS",
    "RankerSpec",
    "SimulatedWorld",
    "SimulationConfig",
    "day_drift",
    "iter_blocks",
    "preset_config",
    "read_world_logs",
    "simulate",
    "true_survival",
    "with_overrides",
    "write_world",
]

# ----------------------------------------------------------------------------------------------------------
# the world: items, users, day-level drift
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _World:
    quality: np.ndarray  # z_a
    embed: np.ndarray  # e_a (n_items, dim)
    short: np.ndarray  # −log(duration / median)
    duration: np.ndarray  # seconds
    topic: np.ndarray  # int topic per item
    fresh: np.ndarray  # 1.0 for new items, else 0.0
    user_embed: np.ndarray  # (n_users, dim)
    user_registered: np.ndarray  # bool per user
    share: np.ndarray  # registered share per day
    engagement: np.ndarray  # logit shift per day
    traffic: np.ndarray  # traffic factor per day
    depth: np.ndarray  # scroll-depth factor per day (multiplies the survival scale)
    fresh_appeal: np.ndarray  # logit shift of fresh items' reward rates per day


def _standardised(rng: np.random.Generator, n: int) -> np.ndarray:
    z = rng.standard_normal(n)
    if n > 1:
        z = (z - z.mean()) / z.std()
    return z


def _build_world(config: SimulationConfig, seed: int) -> _World:
    rng = np.random.default_rng([seed, 0])
    n, d = config.n_items, config.dim
    quality = rng.standard_normal(n)
    embed = rng.standard_normal((n, d)) / math.sqrt(d)
    log_dur = rng.normal(0.0, 0.6, n)
    duration = 20.0 * np.exp(log_dur)
    topic = rng.integers(0, config.n_topics, n)
    fresh = (rng.random(n) < config.fresh_share).astype(np.float64)
    user_embed = rng.standard_normal((config.n_users, d))
    user_registered = np.zeros(config.n_users, dtype=bool)
    user_registered[: config.n_users // 2] = True
    share = np.clip(config.registered_share + config.share_drift * _standardised(rng, config.n_days), 0.02, 0.98)
    engagement = config.engagement_drift * _standardised(rng, config.n_days)
    traffic = np.clip(1.0 + config.traffic_drift * _standardised(rng, config.n_days), 0.3, 3.0)
    # drawn last so that worlds without depth drift are unchanged
    depth_z = _standardised(rng, config.n_days) if config.depth_drift or config.depth_engagement \
        else np.zeros(config.n_days)
    depth = np.exp(config.depth_drift * depth_z)
    engagement = engagement - config.depth_engagement * depth_z
    fresh_appeal = config.fresh_boost + (config.fresh_drift * _standardised(rng, config.n_days)
                                         if config.fresh_drift else np.zeros(config.n_days))
    return _World(quality, embed, -log_dur, duration, topic, fresh, user_embed, user_registered, share, engagement,
                  traffic, depth, fresh_appeal)


def day_drift(config: SimulationConfig, *, seed: int) -> pd.DataFrame:
    """The per-day drift of the world simulated with ``seed``: one row per day with ``registered_share``,
    ``engagement`` (logit shift of every reward rate), ``traffic`` (factor on the sessions per arm) and
    ``depth`` (factor on the survival scale: S_d(r) = exp(−((r−1)/(scale·depth_d))^shape)).

    With ``depth_drift`` = δ and ``depth_engagement`` = κ, depth_d = exp(δ·w_d) and engagement_d gets
    −κ·w_d for a standardised day effect w_d: deeper-scrolling days are a little less engaged per item.

    >>> day_drift(preset_config("small"), seed=0)["depth"].tolist()   # no depth drift in 'small'
    [1.0, 1.0, 1.0]
    """
    w = _build_world(config, _check_seed(seed))
    return pd.DataFrame({"day": config.days, "registered_share": w.share, "engagement": w.engagement,
                         "traffic": w.traffic, "depth": w.depth, "fresh_appeal": w.fresh_appeal})


def _sessions_per_group(config: SimulationConfig, world: _World) -> np.ndarray:
    """Number of sessions per (day, experiment, arm); deterministic from the config and the world."""
    per_day = np.maximum(1, np.round(config.sessions_per_arm_day * world.traffic)).astype(np.int64)
    return np.broadcast_to(per_day[:, None, None], (config.n_days, config.n_experiments, 2)).copy()


def _rankers(config: SimulationConfig, experiment: int) -> list[RankerSpec]:
    """Production, this experiment's treatment, the candidates; production and the treatments that copy
    its fresh-item penalty (all but ``positive``) use ``config.fresh_penalty``."""
    treatment = TREATMENTS[config.effects[experiment]]
    if treatment.w_fresh == PRODUCTION.w_fresh:
        treatment = dataclasses.replace(treatment, w_fresh=config.fresh_penalty)
    if treatment.shared == PRODUCTION.shared:
        treatment = dataclasses.replace(treatment, shared=config.production_error)
    production = dataclasses.replace(PRODUCTION, w_fresh=config.fresh_penalty, shared=config.production_error)
    return [production, treatment, *CANDIDATES[: config.n_cand_policies]]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _same_topic_above(topics_in_order: np.ndarray, n_topics: int) -> np.ndarray:
    """For each rank, how many items of the same topic are ranked above it (in the given order)."""
    onehot = topics_in_order[:, :, None] == np.arange(n_topics)[None, None, :]
    before = np.cumsum(onehot, axis=1, dtype=np.int32) - onehot
    return np.take_along_axis(before, topics_in_order[:, :, None], axis=2)[:, :, 0]


def _view_probs(config: SimulationConfig, s_rows: np.ndarray, h_rows: np.ndarray,
                trig: np.ndarray | None) -> np.ndarray:
    """P(V_r = 1) per session and rank: S(r) under the PBM, Π_{j<r} h_j (1 − κ·P(trigger_j)) in cascade."""
    if trig is None:
        return s_rows
    cont = h_rows * (1.0 - config.cascade_strength * trig)
    pv = np.ones_like(cont)
    pv[:, 1:] = np.cumprod(cont[:, :-1], axis=1)
    return pv


# ----------------------------------------------------------------------------------------------------------
# one block of sessions
# ----------------------------------------------------------------------------------------------------------
def _block(config: SimulationConfig, world: _World, seed: int, day: int, experiment: int, arm: int,
           chunk: int, n: int, first_session_id: int) -> tuple[pa.Table, list[dict]]:
    rng = np.random.default_rng([seed, 1, day, experiment, arm, chunk])
    k = config.n_candidates
    rows_k = np.arange(k)

    # contexts: segment drifts by day; users drawn from the segment's pool
    registered = rng.random(n) < world.share[day]
    half = config.n_users // 2
    user = np.where(registered, rng.integers(0, max(half, 1), n),
                    half + rng.integers(0, max(config.n_users - half, 1), n))
    # candidate sets: K distinct items (arithmetic progression modulo the prime-like catalogue size)
    start = rng.integers(0, config.n_items, n)
    stride = rng.integers(1, config.n_items, n)
    bad = np.gcd(stride, config.n_items) != 1
    stride[bad] = 1
    items = (start[:, None] + rows_k[None, :] * stride[:, None]) % config.n_items  # (n, K)

    z = world.quality[items]
    aff = np.einsum("nd,nkd->nk", world.user_embed[user], world.embed[items])
    short = world.short[items]
    fresh = world.fresh[items]
    eng = world.engagement[day] + world.fresh_appeal[day] * fresh
    like_base = np.where(registered, config.like_base_registered, config.like_base_guest)[:, None]
    watch_base = np.where(registered, config.watch_base_registered, config.watch_base_guest)[:, None]
    q_like = _sigmoid(like_base + eng + config.like_w_quality * z + config.like_w_affinity * aff)
    q_watch = _sigmoid(watch_base + eng + config.watch_w_quality * z + config.watch_w_affinity * aff
                       + config.watch_w_short * short)

    # rankers: order (item positions by rank) and rank of every candidate, per policy
    specs = _rankers(config, experiment)
    shared = rng.standard_normal((n, k))
    orders, ranks = [], []
    for spec in specs:
        def per_segment(guest: float, reg: float | None) -> np.ndarray:
            return np.where(registered, guest if reg is None else reg, guest)[:, None]

        sigma = per_segment(spec.noise, spec.noise_registered)
        eta = per_segment(spec.shared, spec.shared_registered)
        score = spec.w_quality * z + spec.w_affinity * aff + spec.w_short * short - spec.w_fresh * fresh \
            + eta * shared + sigma * rng.standard_normal((n, k))
        order = np.argsort(-score, axis=1)
        rk = np.empty((n, k), dtype=np.int32)
        np.put_along_axis(rk, order, np.broadcast_to(rows_k.astype(np.int32) + 1, (n, k)), axis=1)
        orders.append(order)
        ranks.append(rk)

    # viewing curves per session (segment-dependent only with the contextual switch)
    s_guest = true_survival(config, segment="guest", depth=float(world.depth[day]))
    s_reg = true_survival(config, segment="registered", depth=float(world.depth[day]))
    s_rows = np.where(registered[:, None], s_reg[None, :], s_guest[None, :])
    h_rows = np.where(registered[:, None], _hazard(s_reg)[None, :], _hazard(s_guest)[None, :])

    def in_order(values: np.ndarray, order: np.ndarray) -> np.ndarray:
        return np.take_along_axis(values, order, axis=1)

    def effective(order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ql, qw = in_order(q_like, order), in_order(q_watch, order)
        if config.reward_interactions:
            damp = config.interaction_decay ** _same_topic_above(world.topic[in_order(items, order)],
                                                                 config.n_topics)
            ql, qw = ql * damp, qw * damp
        return ql, qw

    # ground truth: exact expected reward per session under every policy
    dur_rows = world.duration[items]
    gt: list[dict] = []
    served = 0 if arm == 0 else 1
    served_q = None
    for p, (name, order) in enumerate(zip(config.policies, orders, strict=True)):
        ql, qw = effective(order)
        trig = 1.0 - (1.0 - ql) * (1.0 - qw) if config.cascade else None
        pv = _view_probs(config, s_rows, h_rows, trig)
        values = {"like": (pv * ql).sum(axis=1), "watch_complete": (pv * qw).sum(axis=1)}
        if config.watch_time:
            dur = in_order(dur_rows, order)
            values["watch_time"] = (pv * dur * (qw + (1.0 - qw) * 0.3)).sum(axis=1)
        for reward in config.rewards:
            gt.append({"policy": name, "reward": reward, "sum": float(values[reward].sum()), "n": n})
        if p == served:
            served_q = (ql, qw)

    # the served session: rewards for all K positions, then the viewing process decides what is logged
    order = orders[served]
    ql, qw = served_q
    like = rng.random((n, k)) < ql
    watch = rng.random((n, k)) < qw
    cont_u = rng.random((n, k))
    cont_p = h_rows * (1.0 - config.cascade_strength * (like | watch)) if config.cascade else h_rows
    alive = np.cumprod(cont_u < cont_p, axis=1)
    length = 1 + alive[:, :-1].sum(axis=1)
    mask = rows_k[None, :] < length[:, None]

    sess_rows = np.broadcast_to(np.arange(n)[:, None], (n, k))[mask]
    pos = np.broadcast_to(rows_k[None, :], (n, k))[mask]
    item_pos = order[mask]  # candidate index of the item at each logged position
    cols: dict[str, pa.Array] = {
        "session_id": pa.array(first_session_id + sess_rows, pa.int64()),
        "rank": pa.array((pos + 1).astype(np.int32), pa.int32()),
        "item_id": pa.array(items[sess_rows, item_pos].astype(np.int64), pa.int64()),
        "like": pa.array(like[mask].astype(np.int8), pa.int8()),
        "watch_complete": pa.array(watch[mask].astype(np.int8), pa.int8()),
    }
    if config.watch_time:
        frac = np.where(watch, 1.0, 0.6 * rng.random((n, k)))
        wt = np.round(in_order(dur_rows, order) * frac)
        cols["watch_time"] = pa.array(wt[mask].astype(np.float32), pa.float32())
    m = int(mask.sum())
    day_value = config.days[day]
    cols["day"] = pa.array([day_value], pa.date32()).take(pa.array(np.zeros(m, dtype=np.int64)))
    cols["experiment_id"] = pa.array(np.full(m, f"exp{experiment + 1:02d}", dtype=object), pa.string())
    cols["arm"] = pa.array(np.full(m, ARMS[arm], dtype=object), pa.string())
    seg = np.where(registered, SEGMENTS[0], SEGMENTS[1]).astype(object)
    cols["segment"] = pa.array(seg[sess_rows], pa.string())
    for name, rk in zip(config.policies, ranks, strict=True):
        cols[f"rank__{name}"] = pa.array(rk[sess_rows, item_pos], pa.int32())
    return pa.table(cols), gt


def log_schema(config: SimulationConfig) -> pa.Schema:
    """The Arrow schema of the logs table."""
    fields = [("session_id", pa.int64()), ("rank", pa.int32()), ("item_id", pa.int64()), ("like", pa.int8()),
              ("watch_complete", pa.int8())]
    if config.watch_time:
        fields.append(("watch_time", pa.float32()))
    fields += [("day", pa.date32()), ("experiment_id", pa.string()), ("arm", pa.string()),
               ("segment", pa.string())]
    fields += [(f"rank__{p}", pa.int32()) for p in config.policies]
    return pa.schema(fields)


GT_SCHEMA = pa.schema([("experiment_id", pa.string()), ("day", pa.date32()), ("arm", pa.string()),
                       ("reward", pa.string()), ("policy", pa.string()), ("true_value", pa.float64()),
                       ("n_sessions", pa.int64())])


def iter_blocks(config: SimulationConfig, *, seed: int) -> Iterator[tuple[int, pa.Table, list[dict]]]:
    """Yield ``(day_index, logs_block, ground_truth_rows)`` block by block, in (day, experiment, arm) order.

    Each block holds at most ``config.chunk_sessions`` sessions, so memory stays bounded for any size.
    Ground-truth rows carry the sum of expected rewards and the session count of the block.
    """
    seed = _check_seed(seed)
    world = _build_world(config, seed)
    counts = _sessions_per_group(config, world)
    next_id = 0
    for d in range(config.n_days):
        for e in range(config.n_experiments):
            for a in range(2):
                total = int(counts[d, e, a])
                for c, lo in enumerate(range(0, total, config.chunk_sessions)):
                    n = min(config.chunk_sessions, total - lo)
                    table, gt = _block(config, world, seed, d, e, a, c, n, next_id)
                    next_id += n
                    for row in gt:
                        row.update(experiment_id=f"exp{e + 1:02d}", day=config.days[d], arm=ARMS[a])
                    yield d, table, gt


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _ground_truth_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    keys = ["experiment_id", "day", "arm", "reward", "policy"]
    agg = df.groupby(keys, sort=False, as_index=False).agg(total=("sum", "sum"), n_sessions=("n", "sum"))
    agg["true_value"] = agg["total"] / agg["n_sessions"]
    agg = agg[["experiment_id", "day", "arm", "reward", "policy", "true_value", "n_sessions"]]
    table = pa.Table.from_pandas(agg, schema=GT_SCHEMA, preserve_index=False)
    return table.to_pandas()


@dataclass(frozen=True)
class SimulatedWorld:
    """A simulated data set: the logged impressions and the exact ground truth (see module docstring)."""

    config: SimulationConfig
    seed: int
    logs: pd.DataFrame = field(repr=False)
    ground_truth: pd.DataFrame = field(repr=False)


def simulate(config: SimulationConfig, *, seed: int) -> SimulatedWorld:
    """Simulate the whole world in memory (use :func:`write_world` for data larger than memory).

    >>> w = simulate(preset_config("small"), seed=0)
    >>> bool((w.logs.groupby("session_id")["rank"].min() == 1).all())   # every session starts at rank 1
    True
    """
    tables, gt = [], []
    for _, table, rows in iter_blocks(config, seed=seed):
        tables.append(table)
        gt.extend(rows)
    logs = pa.concat_tables(tables).to_pandas()
    return SimulatedWorld(config=config, seed=int(seed), logs=logs, ground_truth=_ground_truth_frame(gt))


def world_outputs(config: SimulationConfig, out: str | os.PathLike, *, partition_by_day: bool = False) -> list[Path]:
    """The files :func:`write_world` writes under ``out``: the logs (one file, or one per day) and the ground
    truth."""
    out = Path(out)
    logs = ([out / "logs" / f"day-{d.isoformat()}.parquet" for d in config.days] if partition_by_day
            else [out / "logs.parquet"])
    return [*logs, out / "ground_truth.parquet"]


def _check_world_outputs(config: SimulationConfig, out: Path, *, partition_by_day: bool, force: bool) -> list[Path]:
    """The day files of an earlier world that this one would not replace (removed once it is written), after
    refusing (without ``force``) to replace any existing output."""
    planned = world_outputs(config, out, partition_by_day=partition_by_day)
    stale = sorted(set((out / "logs").glob("day-*.parquet")) - set(planned)) if partition_by_day else []
    existing = [p for p in planned if p.exists() or p.is_symlink()] + stale
    for p in existing:
        if p.is_dir():
            raise OutputExists(f"{p.relative_to(out)} is a directory; the simulator writes a file there")
    if existing and not force:
        shown = ", ".join(str(p.relative_to(out)) for p in existing[:3]) + (" …" if len(existing) > 3 else "")
        raise OutputExists(f"{out.name or out}: {len(existing)} output file(s) already exist ({shown}); pass --force "
                           "to replace them, or choose another --out")
    for p in planned:
        check_output(p, force=force)
    return stale


def write_world(config: SimulationConfig, out: str | os.PathLike, *, seed: int, partition_by_day: bool = False,
                compression: str = "zstd", force: bool = False) -> dict:
    """Write ``logs.parquet`` (or ``logs/day-YYYY-MM-DD.parquet`` per day) and ``ground_truth.parquet``.

    Blocks are streamed to temporary files next to the outputs, which are renamed into place once every
    file is complete: an interrupted run leaves the previous files as they were. Existing outputs are
    replaced only with ``force`` (then the day files of an earlier, longer world are removed too, so the
    ``logs`` directory holds this world alone). Files get the permissions of the files they replace, else
    those of the umask. Returns a summary dict (rows, sessions, reward rates, paths and sizes in bytes,
    seconds).
    """
    t0 = time.perf_counter()
    out = Path(out)
    stale = _check_world_outputs(config, out, partition_by_day=partition_by_day, force=force)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if partition_by_day:
            (out / "logs").mkdir(exist_ok=True)
    except OSError as exc:
        raise UnwritableOutput(f"cannot create the output directory {out}: {(exc.strerror or '').lower()} (choose "
                               "another --out)", source=str(out)) from None
    schema = log_schema(config)
    gt_rows: list[dict] = []
    rows = 0
    sums = dict.fromkeys(config.rewards, 0.0)
    sessions = 0
    paths: list[Path] = []
    temps: dict[Path, Path] = {}  # final path → its temporary file
    writer: pq.ParquetWriter | None = None
    current_day = -1
    opts = {"compression": compression, "use_dictionary": ["experiment_id", "arm", "segment", "day"]}

    def temporary(path: Path) -> Path:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        temps[path] = Path(name)
        return temps[path]

    try:
        for d, table, gt in iter_blocks(config, seed=seed):
            if writer is None or (partition_by_day and d != current_day):
                if writer is not None:
                    writer.close()
                path = (out / "logs" / f"day-{config.days[d].isoformat()}.parquet") if partition_by_day \
                    else out / "logs.parquet"
                writer = pq.ParquetWriter(temporary(path), schema, **opts)
                paths.append(path)
                current_day = d
            writer.write_table(table, row_group_size=1_000_000)
            rows += table.num_rows
            sessions += gt[0]["n"]
            for r in config.rewards:
                sums[r] += float(pa.compute.sum(table[r]).as_py() or 0)
            gt_rows.extend(gt)
        writer.close()
        writer = None
        gt_df = _ground_truth_frame(gt_rows)
        gt_path = out / "ground_truth.parquet"
        pq.write_table(pa.Table.from_pandas(gt_df, schema=GT_SCHEMA, preserve_index=False), temporary(gt_path),
                       compression=compression)
        for final, tmp in temps.items():  # every file is complete: now into place
            os.chmod(tmp, output_mode(final))
            os.replace(tmp, final)
        temps.clear()
    finally:
        if writer is not None:
            writer.close()
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
    for old in stale:  # --force: the day files of an earlier world that this one did not replace
        with contextlib.suppress(FileNotFoundError):
            old.unlink()
    return {"rows": rows, "sessions": sessions, "experiments": config.n_experiments, "days": config.n_days,
            "reward_rates": {r: sums[r] / max(rows, 1) for r in config.rewards},
            "log_paths": [str(p) for p in paths], "log_bytes": sum(p.stat().st_size for p in paths),
            "ground_truth_path": str(gt_path), "ground_truth_bytes": gt_path.stat().st_size,
            "seconds": time.perf_counter() - t0}


def read_world_logs(out: str | os.PathLike) -> pd.DataFrame:
    """Read the logs written by :func:`write_world` (single file or day files), in written order."""
    out = Path(out)
    if (out / "logs.parquet").exists():
        return pd.read_parquet(out / "logs.parquet")
    files = sorted((out / "logs").glob("day-*.parquet"))
    if not files:
        raise MissingInput(f"no logs.parquet or logs/day-*.parquet under {str(out)!r}")
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
