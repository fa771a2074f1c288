"""Benchmark of the reduce behind ``offeval estimate``: the full clip grid (14 values), DCG and nDCG, the
logging policy and one target policy, one reward, on generated logs (3 % reward rate).

Prints, per size, impressions per second and peak memory (RSS, each run in its own process) for the
DuckDB engine (reading Parquet itself) and a straightforward pandas group-by of the same numbers, checks
that both give the same moments (1e-9 relative), and compares Spark local[2] with DuckDB.

    python bench/bench_estimate.py                  # 1 M and 10 M impressions, Spark at 1 M
    python bench/bench_estimate.py --large          # and 100 M, day-partitioned, DuckDB memory limit 2 GB
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CLIPS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, math.inf)
GROUPS = ["experiment_id", "day", "arm", "segment"]
FLOOR = 1e-4


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    """CPU seconds of this process, all threads (wall time is inflated when the machine is shared)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ------------------------------------------------------------------------------------------ the engines


def run_engine(path: str, engine: str, memory_limit: str | None, out: str) -> dict:
    from offeval_core.engine import Grid, connect, connect_spark, reduce, source_from_files

    spill = str(Path(out).parent / "duckdb-spill")  # not the working directory's .tmp
    backend = connect_spark("local[2]") if engine == "spark" else connect(memory_limit=memory_limit,
                                                                          temp_directory=spill)
    if engine == "spark":  # start-up and JVM warm-up are not part of the estimate
        backend.execute(backend.read_parquet(path).limit(1))
    grid = Grid(rewards=("like",), policies=("treatment",), clips=CLIPS)
    t0 = time.perf_counter()
    source = source_from_files(path, backend, rewards=["like"])
    t1, c1 = time.perf_counter(), cpu_s()
    moments = reduce(source, grid)
    t2, c2 = time.perf_counter(), cpu_s()
    moments.offline.to_parquet(out)
    return {"rows": source.n_rows, "load_s": t1 - t0, "estimate_s": t2 - t1, "estimate_cpu_s": c2 - c1}


def pandas_moments(df, clips=CLIPS):
    """The same moments by a straightforward pandas group-by over every row, one pass per clip value."""
    import pandas as pd

    lengths = df.groupby("session_id")["rank"].max()
    arm = df.groupby("session_id")["arm"].first()
    control = lengths[arm == "control"] if (arm == "control").any() else lengths
    reach = np.array([(control >= r).mean() for r in range(1, int(lengths.max()) + 1)])
    pbm = np.maximum(reach, FLOOR)

    def disc(r):
        r = np.asarray(r)
        return np.where((r >= 1) & (r <= len(pbm)), pbm[np.clip(r, 1, len(pbm)) - 1], 0.0)

    w = 1.0 / disc(df["rank"].to_numpy())
    c = df["like"].to_numpy(dtype=float)
    d_log, d_tgt = disc(df["rank"].to_numpy()), disc(df["rank__treatment"].to_numpy())
    out = []
    for m in clips:
        label = c * np.minimum(m, w)
        t = df[["session_id", *GROUPS]].assign(label=label, dl=label * d_log, dt=label * d_tgt)
        t = t.sort_values(["session_id", "label"], ascending=[True, False], kind="stable")
        t["ideal"] = t["label"] * disc(t.groupby("session_id").cumcount().to_numpy() + 1)
        s = t.groupby(["session_id", *GROUPS], observed=True)[["ideal", "dl", "dt"]].sum()
        nl = np.where(s["ideal"] > 0, s["dl"] / s["ideal"].where(s["ideal"] > 0, 1), 0.0)
        nt = np.where(s["ideal"] > 0, s["dt"] / s["ideal"].where(s["ideal"] > 0, 1), 0.0)
        v = pd.DataFrame({"dcg_logging": s["dl"], "dcg_treatment": s["dt"], "ndcg_logging": nl, "ndcg_treatment": nt,
                          "dcg_diff": s["dt"] - s["dl"], "ndcg_diff": nt - nl, "idcg": s["ideal"]},
                         index=s.index).reset_index()
        cols = [c for c in v.columns if c not in ("session_id", *GROUPS)]
        grouped = v[[*GROUPS, *cols]].groupby(GROUPS, observed=True)
        g = grouped[cols].sum()
        g["n"] = grouped.size()
        m2 = grouped[cols].var(ddof=0).mul(g["n"], axis=0)  # Σ(x − x̄)² per group
        g[[f"{c}_m2" for c in cols]] = m2.to_numpy()
        g["clip"] = m
        out.append(g.reset_index())
    return pd.concat(out, ignore_index=True)


def run_pandas(path: str, out: str) -> dict:
    import pandas as pd

    t0 = time.perf_counter()
    df = pd.read_parquet(path, columns=["session_id", "rank", "like", "rank__treatment", *GROUPS])
    t1, c1 = time.perf_counter(), cpu_s()
    res = pandas_moments(df)
    t2, c2 = time.perf_counter(), cpu_s()
    res.to_parquet(out)
    return {"rows": len(df), "load_s": t1 - t0, "estimate_s": t2 - t1, "estimate_cpu_s": c2 - c1}


def compare(engine_file: str, pandas_file: str) -> float:
    """Largest relative difference between the engine's moments and the pandas baseline's."""
    from numpy_kernel import max_relative_difference

    columns = {("dcg", "logging", "sum"): "dcg_logging", ("dcg", "treatment", "sum"): "dcg_treatment",
               ("ndcg", "logging", "sum"): "ndcg_logging", ("ndcg", "treatment", "sum"): "ndcg_treatment",
               ("dcg", "logging", "m2"): "dcg_logging_m2", ("ndcg", "treatment", "m2"): "ndcg_treatment_m2",
               ("dcg", "treatment", "sum_diff"): "dcg_diff", ("ndcg", "treatment", "m2_diff"): "ndcg_diff_m2",
               ("dcg", "logging", "den_sum"): "idcg", ("dcg", "logging", "n"): "n"}
    return max_relative_difference(engine_file, pandas_file, columns)


# ------------------------------------------------------------------------------------------ orchestration


def worker(args) -> None:
    if args.worker == "pandas":
        res = run_pandas(args.path, args.out)
    else:
        res = run_engine(args.path, args.worker, args.memory_limit, args.out)
    res["peak_rss_mb"] = peak_rss_mb()
    print("RESULT " + json.dumps(res))


def spawn(kind: str, path: str, out: str, memory_limit: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--worker", kind, "--path", path, "--out", out]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{kind} run failed:\n{proc.stderr[-3000:]}")


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal"))
        ram = f"{int(mem.split()[1]) / 1024 / 1024:.0f} GB RAM"
    except (OSError, StopIteration):
        ram = "? RAM"
    return f"{os.cpu_count()} cores ({cpu}), {ram}, load average {os.getloadavg()[0]:.1f} at start"


def fmt_row(name, size, r, base=None) -> str:
    rate = r["rows"] / r["estimate_s"]
    ratio = f"{base['estimate_s'] / r['estimate_s']:.1f}×" if base else ""
    return (f"| {name:<26} | {size:>5} | {r['load_s']:7.2f} | {r['estimate_s']:10.2f} | {r['estimate_cpu_s']:6.2f} "
            f"| {rate / 1e6:9.2f} M/s | {r['peak_rss_mb']:7.0f} | {ratio:>9} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true", help="also 100 M impressions (day files, DuckDB 2 GB limit)")
    ap.add_argument("--sizes", default="1000000,10000000", help="impression counts (default 1 M and 10 M)")
    ap.add_argument("--spark-sizes", default="1000000", help="sizes also run on Spark local[2] ('' for none)")
    ap.add_argument("--no-pandas-above", type=int, default=10_000_000, help="skip the pandas baseline above this")
    ap.add_argument("--dir", default=None, help="where to write the generated logs (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--path", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--memory-limit", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0

    import pyarrow.parquet as pq
    from generate import generate, write_partitioned

    work = Path(args.dir or tempfile.mkdtemp(prefix="offeval-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    spark_sizes = {int(s) for s in args.spark_sizes.split(",") if s}
    print(f"machine: {machine()}")
    print("grid: 14 clip values × {DCG, nDCG} × {logging, treatment} × 1 reward (like), D = D0 = learnt pbm\n")
    print("| engine                     |  size |  load s | estimate s |  cpu s | impressions/s | peak MB | vs pandas |")
    print("|----------------------------|-------|---------|------------|--------|---------------|---------|-----------|")
    ok = True
    for n in sizes:
        path = work / f"logs_{n}.parquet"
        if not path.exists():
            pq.write_table(generate(n, seed=args.seed), path, row_group_size=1_000_000)
        label = f"{n / 1e6:g}M"
        duck = spawn("duckdb", str(path), str(work / f"m_duck_{n}.parquet"))
        base = None
        if n <= args.no_pandas_above:
            base = spawn("pandas", str(path), str(work / f"m_pandas_{n}.parquet"))
        print(fmt_row("DuckDB (Ibis)", label, duck, base))
        if base:
            print(fmt_row("pandas group-by baseline", label, base))
            diff = compare(str(work / f"m_duck_{n}.parquet"), str(work / f"m_pandas_{n}.parquet"))
            ok &= diff <= 1e-9
            print(f"|   same moments as pandas: max relative difference {diff:.1e} {'OK' if diff <= 1e-9 else 'MISMATCH'} |")
        if n in spark_sizes:
            sp = spawn("spark", str(path), str(work / f"m_spark_{n}.parquet"))
            diff = compare(str(work / f"m_spark_{n}.parquet"), str(work / f"m_pandas_{n}.parquet")) if base else math.nan
            print(fmt_row("Spark local[2] (Ibis)", label, sp, base))
            print(f"|   Spark / DuckDB estimate time: {sp['estimate_s'] / duck['estimate_s']:.1f}× |")
            if base:
                ok &= diff <= 1e-9
                print(f"|   Spark same moments as pandas: max relative difference {diff:.1e} |")
    if args.large:
        n = 100_000_000
        ddir = work / "logs_100M"
        if not ddir.exists():
            t0 = time.perf_counter()
            info = write_partitioned(ddir, n, seed=args.seed)
            print(f"(generated {info['rows']:,} rows in 7 day files in {time.perf_counter() - t0:.0f} s)")
        r = spawn("duckdb", str(ddir), str(work / "m_duck_100M.parquet"), memory_limit="2GB")
        print(fmt_row("DuckDB, memory limit 2 GB", "100M", r))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
