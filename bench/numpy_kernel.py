"""A hand-written numpy kernel of the reduce's benchmark workload: the baseline the engine must keep up with.

Same workload as ``offeval reduce LOGS --rewards like --policies treatment --discounts pbm --exposures pbm``
on the benchmark logs (binary reward, one target policy, 14 clip values, DCG and nDCG of the logging and
target policies, per-group moments), positives-only like the engine:

- the learnt PBM from the rank histogram of control rows (with only viewed items logged, the sessions that
  reach rank r are the rows at rank r), floored at 1e-4;
- sessions per group from the rank-1 rows;
- everything else from the rewarded rows only: labels c · min(m, 1 / D0(r)), one sort per session (binary
  reward: the order of 1 / D0 serves every m), per-session sums with ``np.bincount``, moments per
  (clip, group).

    python bench/numpy_kernel.py LOGS.parquet --out moments.parquet    # prints one JSON line of timings
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

CLIPS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, math.inf)
GROUPS = ("experiment_id", "day", "arm", "segment")
FLOOR = 1e-4


def _codes(col: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Integer codes and their labels (as text) of a group column."""
    col = col.combine_chunks()
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    return col.indices.to_numpy(zero_copy_only=False).astype(np.int64), [str(v) for v in col.dictionary.to_pylist()]


def load(path: str, reward: str = "like", policy: str = "treatment"):
    """Read the columns the kernel needs; keep the rank histogram, rank-1 rows and rewarded rows only."""
    t = pq.read_table(path, columns=["session_id", "rank", reward, f"rank__{policy}", *GROUPS])
    rank = t["rank"].to_numpy()
    codes, labels = zip(*(_codes(t[k]) for k in GROUPS), strict=True)
    sizes = [len(lab) for lab in labels]
    group = np.ravel_multi_index(codes, sizes)
    arm_labels = labels[GROUPS.index("arm")]
    control = codes[GROUPS.index("arm")] == arm_labels.index("control") if "control" in arm_labels else None
    hist = np.bincount(rank[control] if control is not None and control.any() else rank)
    first = rank == 1
    n_groups = np.bincount(group[first], minlength=int(np.prod(sizes)))
    pos = pc.greater(t[reward], 0).to_numpy(zero_copy_only=False)
    rows = {"session": t["session_id"].to_numpy()[pos], "rank": rank[pos].astype(np.int64),
            "target": t[f"rank__{policy}"].to_numpy()[pos].astype(np.int64), "group": group[pos],
            "c": t[reward].to_numpy()[pos].astype(np.float64)}
    return {"hist": hist, "n_groups": n_groups, "sizes": sizes, "labels": labels, "rows": rows}


def moments(data, clips=CLIPS) -> dict[str, np.ndarray]:
    """Per (clip, group): n and Σ, Σ(x − x̄)² of DCG / nDCG of the logging and target policies, Σ of the
    paired difference and its centred second moment, Σ iDCG — the statistics the engine's moments file holds
    (second moments in two passes: the group means, then the squared deviations; a session without a reward
    is 0, so it adds x̄²)."""
    hist = data["hist"][1:].astype(np.float64)
    pbm = np.maximum(hist / hist[0], FLOOR)  # share of (control) sessions reaching rank r
    rows = data["rows"]
    n_max = len(pbm)

    def d(r):
        return np.where((r >= 1) & (r <= n_max), pbm[np.clip(r, 1, n_max) - 1], 0.0)

    session, rank, c = rows["session"], rows["rank"], rows["c"]
    w = 1.0 / d(rank)
    # one sort per session: by session, then 1 / D0 descending (rank as the tie-break)
    order = np.lexsort((rank, -w, session))
    session, rank, c, w = session[order], rank[order], c[order], w[order]
    d_log, d_tgt, group = d(rank), d(rows["target"][order]), rows["group"][order]
    starts = np.flatnonzero(np.r_[True, session[1:] != session[:-1]])
    sid = np.cumsum(np.r_[False, session[1:] != session[:-1]])
    j = np.arange(len(session)) - starts[sid] + 1
    d_ideal = d(j)
    g_sess = group[starts]
    n_groups, n_s = data["n_groups"], len(starts)
    out = {k: [] for k in ("n", "den_sum", "dcg_logging", "dcg_target", "ndcg_logging", "ndcg_target",
                           "dcg_logging_m2", "ndcg_target_m2", "dcg_diff", "ndcg_diff_m2")}
    rewarded = np.bincount(g_sess, minlength=len(n_groups)).astype(np.float64)
    size = np.where(n_groups > 0, n_groups, 1).astype(np.float64)
    for m in clips:
        lab = c * np.minimum(m, w)
        ideal = np.bincount(sid, lab * d_ideal, minlength=n_s)
        dl = np.bincount(sid, lab * d_log, minlength=n_s)
        dt = np.bincount(sid, lab * d_tgt, minlength=n_s)
        safe = np.where(ideal > 0, ideal, 1.0)
        nl, nt = np.where(ideal > 0, dl / safe, 0.0), np.where(ideal > 0, dt / safe, 0.0)

        def per_group(v):
            return np.bincount(g_sess, v, minlength=len(n_groups))

        def m2(v):
            mean = per_group(v) / size
            return per_group((v - mean[g_sess]) ** 2) + (n_groups - rewarded) * mean * mean

        out["n"].append(n_groups.astype(np.float64))
        out["den_sum"].append(per_group(ideal))
        out["dcg_logging"].append(per_group(dl))
        out["dcg_target"].append(per_group(dt))
        out["ndcg_logging"].append(per_group(nl))
        out["ndcg_target"].append(per_group(nt))
        out["dcg_logging_m2"].append(m2(dl))
        out["ndcg_target_m2"].append(m2(nt))
        out["dcg_diff"].append(per_group(dt - dl))
        out["ndcg_diff_m2"].append(m2(nt - nl))
    return {k: np.stack(v) for k, v in out.items()}


def to_table(data, res, clips=CLIPS) -> pa.Table:
    """The per-(clip, group) statistics as a table with the group labels (groups with sessions only)."""
    n_groups = data["n_groups"]
    keep = np.flatnonzero(n_groups > 0)
    codes = np.unravel_index(keep, data["sizes"])
    cols = {k: np.tile(np.array(data["labels"][i], dtype=object)[codes[i]], len(clips)) for i, k in enumerate(GROUPS)}
    cols["clip"] = np.repeat(np.array(clips, dtype=np.float64), len(keep))
    for k, v in res.items():
        cols[k] = v[:, keep].ravel()
    return pa.table(cols)


def max_relative_difference(engine_file: str, reference_file: str, columns: dict[tuple[str, str, str], str]) -> float:
    """Largest relative difference between the engine's moments (long: metric, policy, one column per stat) and
    a baseline's (wide: one column per (metric, policy, stat) as named by ``columns``), per group and clip;
    ``inf`` when a group or clip is missing on either side. Both benchmarks check their baseline with it."""
    import pandas as pd

    e = pd.read_parquet(engine_file)
    p = pd.read_parquet(reference_file)
    for k in GROUPS:
        e[k], p[k] = e[k].astype(str), p[k].astype(str)
    worst = 0.0
    for (metric, policy, stat), col in columns.items():
        a = e[(e["metric"] == metric) & (e["policy"] == policy)][[*GROUPS, "clip", stat]]
        b = p[[*GROUPS, "clip", col]].rename(columns={col: "ref"})
        j = a.merge(b, on=[*GROUPS, "clip"], how="outer")
        x, y = j[stat].to_numpy(float), j["ref"].to_numpy(float)
        if np.isnan(x).any() or np.isnan(y).any():
            return math.inf
        rel = np.abs(x - y) / np.maximum(np.abs(y), 1e-300)
        rel[x == y] = 0.0
        worst = max(worst, float(rel.max()))
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = load(args.logs)
    t1 = time.perf_counter()
    res = moments(data)
    t2 = time.perf_counter()
    pq.write_table(to_table(data, res), args.out)
    print(json.dumps({"load_s": t1 - t0, "estimate_s": t2 - t1, "rows_rewarded": len(data["rows"]["c"]),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
