"""Fast vectorised generator of synthetic ranking logs for the benchmarks (not the simulator).

Sessions have geometric-like lengths (mean ≈ 10 impressions), a binary reward with a position-decaying
rate tuned to ``reward_rate`` per impression, one target policy that re-ranks every session at random,
and the group keys of the log schema (6 experiments × 7 days × 2 arms × 2 segments). Content depends only
on ``seed``; blocks can be written straight to day-partitioned Parquet without holding the whole log.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

MEAN_LENGTH = 10
MAX_RANK = 60
N_DAYS = 7
N_EXPERIMENTS = 6
START = dt.date(2026, 3, 2)


def generate(n_impressions: int, *, seed: int, reward_rate: float = 0.03, first_session: int = 0,
             day: int | None = None, wide: bool = False) -> pa.Table:
    """About ``n_impressions`` rows (whole sessions) of logs as an Arrow table. ``wide``: the demo's shape, three
    rewards (``like``; ``watch_complete``, binary, on half the liked rows; ``watch_time``, graded, positive on a
    fifth of the rows) and twelve target policies (``treatment`` and ``cand_01`` … ``cand_11``, each a random
    re-ranking of every session)."""
    rng = np.random.default_rng(seed)
    n_sessions = max(1, n_impressions // MEAN_LENGTH)
    # lengths: geometric (mean MEAN_LENGTH), capped at MAX_RANK
    lengths = np.minimum(rng.geometric(1.0 / MEAN_LENGTH, n_sessions), MAX_RANK).astype(np.int64)
    n = int(lengths.sum())
    starts = np.cumsum(lengths) - lengths
    session = np.repeat(np.arange(n_sessions, dtype=np.int64), lengths)
    rank = (np.arange(n, dtype=np.int64) - np.repeat(starts, lengths) + 1).astype(np.int32)
    # reward: P(c = 1 | r) ∝ 1 / sqrt(r), scaled so the mean rate is reward_rate
    shape = 1.0 / np.sqrt(rank)
    p = np.minimum(reward_rate * shape / shape.mean(), 1.0)
    like = (rng.random(n) < p).astype(np.int8)
    # target policy: a random permutation of each session's items
    key = rng.random(n) + session  # sort within session by a random key
    order = np.argsort(key, kind="stable")
    target = np.empty(n, dtype=np.int32)
    target[order] = rank  # rank is 1..len within each session, in session order
    # session attributes
    if day is None:
        s_day = rng.integers(0, N_DAYS, n_sessions)
    else:
        s_day = np.full(n_sessions, day)
    s_exp = rng.integers(0, N_EXPERIMENTS, n_sessions)
    s_arm = rng.integers(0, 2, n_sessions)
    s_seg = (rng.random(n_sessions) < 0.35).astype(np.int64)
    days = np.array([np.datetime64(START + dt.timedelta(days=d)) for d in range(N_DAYS)], dtype="datetime64[D]")
    exps = pa.array([f"exp{e + 1:02d}" for e in range(N_EXPERIMENTS)])
    arms = pa.array(["control", "treatment"])
    segs = pa.array(["guest", "registered"])
    columns = {
        "session_id": pa.array(session + first_session),
        "rank": pa.array(rank),
        "item_id": pa.array(rng.integers(0, 100_000, n)),
        "like": pa.array(like),
        "day": pa.array(days[s_day][session]),
        "experiment_id": pa.DictionaryArray.from_arrays(pa.array(s_exp[session].astype(np.int32)), exps),
        "arm": pa.DictionaryArray.from_arrays(pa.array(s_arm[session].astype(np.int32)), arms),
        "segment": pa.DictionaryArray.from_arrays(pa.array(s_seg[session].astype(np.int32)), segs),
        "rank__treatment": pa.array(target),
    }
    if wide:
        columns["watch_complete"] = pa.array((like.astype(bool) & (rng.random(n) < 0.5)).astype(np.int8))
        columns["watch_time"] = pa.array(np.where(rng.random(n) < 0.2, rng.gamma(2.0, 15.0, n), 0.0))
        for k in range(1, 12):
            order = np.argsort(rng.random(n) + session, kind="stable")
            other = np.empty(n, dtype=np.int32)
            other[order] = rank
            columns[f"rank__cand_{k:02d}"] = pa.array(other)
    return pa.table(columns)


def write_partitioned(out: str | Path, n_impressions: int, *, seed: int, block: int = 5_000_000,
                      reward_rate: float = 0.03, wide: bool = False) -> dict:
    """Write ``out/day-YYYY-MM-DD.parquet`` files block by block (memory bounded by one block)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    per_day = n_impressions // N_DAYS
    rows = 0
    sessions = 0
    for d in range(N_DAYS):
        path = out / f"day-{(START + dt.timedelta(days=d)).isoformat()}.parquet"
        writer = None
        done = 0
        b = 0
        while done < per_day:
            t = generate(min(block, per_day - done), seed=seed * 1_000_003 + d * 10_007 + b,
                         reward_rate=reward_rate, first_session=sessions, day=d, wide=wide)
            if writer is None:
                writer = pq.ParquetWriter(path, t.schema, compression="zstd")
            writer.write_table(t, row_group_size=1_000_000)
            done += t.num_rows
            sessions += int(t["session_id"][-1].as_py()) - sessions + 1
            b += 1
        writer.close()
        rows += done
    return {"rows": rows, "sessions": sessions, "path": str(out)}
