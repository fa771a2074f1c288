"""Benchmark of the reduce against a hand-written numpy kernel of the same workload, measured in the same run.

Workload (``bench/numpy_kernel.py``): generated logs (3 % binary reward rate, one target policy, 6
experiments × 7 days × 2 arms × 2 segments), D = D0 = learnt pbm, 14 clip values, DCG and nDCG of the
logging and target policies, per-group moments. Prints, per size:

- in-process times after load: the engine's first reduce (which compiles the query), a reduce of a new
  combination (D = log2: the compiled query reused) and the numpy kernel — and their ratios;
- whole processes on the 10 M file: ``offeval reduce FILE --rewards like --policies treatment --discounts
  pbm --exposures pbm`` against ``python bench/numpy_kernel.py FILE`` (start-up, load, reduce, write), median
  of three alternating runs;
- the demo (``data/logs.parquet``: 12 policies × 14 clips): a new (reward, D, D0) combination with the
  compiled query reused against the same reduce built and compiled afresh;
- the demo's rewards through their warm compiled queries: the graded ``watch_time`` against the binary
  ``like`` (whole query and per rewarded row) and against its own rows through the binary shape (the cost of
  the graded iDCG alone);
- that the engine and the numpy kernel give the same moments (max relative difference).

The persistent moments cache is off in every worker and process (``OFFEVAL_CACHE=0``): the computation is
what is measured.

    python bench/bench_reduce.py                 # 1 M and 10 M impressions, the demo
    python bench/bench_reduce.py --large         # and 100 M out of core (DuckDB memory limit 2 GB)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
GROUPS = ["experiment_id", "day", "arm", "segment"]
OLD_DEMO_ENGINE_S = 0.232   # engine time of a new (reward, D, D0) on the earlier demo, quiet machine (issue 12)
# the persistent moments cache off: this benchmark measures the computation (a filled cache would answer the
# demo's reduces and every whole-process run after the first; bench/bench_dashboard.py measures the cache)
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OFFEVAL_CACHE": "0"}


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------------------------- workers


def engine_worker(path: str, out: str, memory_limit: str | None) -> dict:
    from offeval_core.engine import Grid, connect, reduce, source_from_files

    spill = str(Path(out).parent / "duckdb-spill")
    backend = connect(memory_limit=memory_limit, temp_directory=spill)
    t0, c0 = time.perf_counter(), cpu_s()
    source = source_from_files(path, backend, rewards=["like"])
    t1, c1 = time.perf_counter(), cpu_s()
    m = reduce(source, Grid(rewards=("like",), policies=("treatment",)))
    t2, c2 = time.perf_counter(), cpu_s()
    reduce(source, Grid(rewards=("like",), policies=("treatment",), discounts=("log2",)))
    t3, c3 = time.perf_counter(), cpu_s()
    m.offline.to_parquet(out)
    return {"rows": source.n_rows, "load_s": t1 - t0, "load_cpu": c1 - c0, "first_s": t2 - t1, "first_cpu": c2 - c1,
            "again_s": t3 - t2, "again_cpu": c3 - c2}


def numpy_worker(path: str, out: str) -> dict:
    import pyarrow.parquet as pq
    from numpy_kernel import load, moments, to_table

    t0, c0 = time.perf_counter(), cpu_s()
    data = load(path)
    t1, c1 = time.perf_counter(), cpu_s()
    res = moments(data)
    t2, c2 = time.perf_counter(), cpu_s()
    pq.write_table(to_table(data, res), out)
    return {"load_s": t1 - t0, "load_cpu": c1 - c0, "estimate_s": t2 - t1, "estimate_cpu": c2 - c1}


def demo_worker(path: str) -> dict:
    """New (reward, D, D0) combinations on the demo: the compiled query reused vs built afresh."""
    from offeval_core.engine import (
        Grid,
        compiled_moments,
        fresh_moments,
        logs_source,
        reduce,
        source_discount,
    )
    from offeval_core.engine.kernel import binary_rewards
    from offeval_core.logs import read_logs

    t0 = time.perf_counter()
    logs = read_logs(path)
    load_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), cpu_s()
    logs_source(logs)
    from offeval_core.engine import prepare

    prepare(logs)
    prep = (time.perf_counter() - t0, cpu_s() - c0)
    reused = []
    for d in ("pbm", "log2", "reciprocal", "exponential:0.9", "log2@10"):
        grid = Grid(rewards=("like",), policies=logs.policies, discounts=(d,), exposures=("pbm",))
        t, c = time.perf_counter(), cpu_s()
        reduce(logs, grid)
        reused.append((time.perf_counter() - t, cpu_s() - c))
    source = logs_source(logs)
    binary = binary_rewards(source, ["like"])["like"]
    query = compiled_moments(source, rewards=("like",), policies=logs.policies, n_clips=14, binary=binary)
    clips = Grid(rewards=("like",), policies=()).clips
    engine, fresh = [], []
    for d in ("exponential:0.8", "exponential:0.7", "exponential:0.6", "exponential:0.5", "reciprocal"):
        disc, expo = source_discount(d, source), source_discount("pbm", source)
        t, c = time.perf_counter(), cpu_s()
        query.run(reward="like", discount=disc, exposure=expo, clips=clips)
        engine.append((time.perf_counter() - t, cpu_s() - c))
        t, c = time.perf_counter(), cpu_s()
        fresh_moments(source, reward="like", policies=logs.policies, discount=disc, exposure=expo, clips=clips,
                      keys=source.keys, binary=binary)
        fresh.append((time.perf_counter() - t, cpu_s() - c))
    other = []
    for r in ("watch_complete", "watch_time"):
        grid = Grid(rewards=(r,), policies=logs.policies, discounts=("log2",), exposures=("pbm",))
        t, c = time.perf_counter(), cpu_s()
        reduce(logs, grid)
        other.append((r, time.perf_counter() - t, cpu_s() - c))
    graded = graded_worker(source, logs.policies, clips)
    return {"rows": logs.n_rows, "policies": len(logs.policies), "load_s": load_s, "prepare": prep,
            "reused": reused, "engine": engine, "fresh": fresh, "other": other, "graded": graded}


def graded_worker(source, policies, clips) -> dict:
    """The compiled query of each demo reward, warm, median over three new discounts (D0 = pbm), alternating:
    the binary ``like`` and ``watch_complete``, the graded ``watch_time``, and ``watch_time`` through the
    binary shape (the same rewarded rows, labels ranked once per session instead of per binding clip value:
    not its moments, only the cost of everything but the graded iDCG)."""
    from offeval_core.engine import compiled_moments, source_discount
    from offeval_core.engine.kernel import binary_rewards

    rewards = ("like", "watch_complete", "watch_time")
    flags = binary_rewards(source, rewards)
    cases = [(r, flags[r]) for r in rewards] + [("watch_time", True)]
    queries = {case: compiled_moments(source, rewards=rewards, policies=policies, n_clips=len(clips),
                                      binary=case[1]) for case in cases}
    times = {case: [] for case in cases}
    for d in ("exponential:0.85", "exponential:0.75", "exponential:0.65"):
        disc, expo = source_discount(d, source), source_discount("pbm", source)
        for case in cases:
            t = time.perf_counter()
            queries[case].run(reward=case[0], discount=disc, exposure=expo, clips=clips)
            times[case].append(time.perf_counter() - t)
    counts = _fetch_counts(source, rewards)
    return {"cases": [[r, b, med(times[(r, b)]), counts[r]] for r, b in cases], "load": os.getloadavg()[0]}


def _fetch_counts(source, rewards) -> dict:
    from offeval_core.engine.sources import _fetch_table

    t = source.rows
    row = _fetch_table(source.backend, t.aggregate(**{r: (t[r] > 0).sum() for r in rewards})).iloc[0]
    return {r: int(row[r]) for r in rewards}


# ------------------------------------------------------------------------------------------ orchestration


def spawn(*args: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True,
                          check=False, env=ENV)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"worker {args[0]} failed:\n{proc.stderr[-3000:]}")


def timed_process(cmd: list[str]) -> dict:
    """Wall and CPU seconds of a whole process (start-up included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=ENV)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def compare(engine_file: str, numpy_file: str) -> float:
    """Largest relative difference between the engine's moments and the numpy kernel's."""
    from numpy_kernel import max_relative_difference

    columns = {("dcg", "logging", "sum"): "dcg_logging", ("dcg", "treatment", "sum"): "dcg_target",
               ("ndcg", "logging", "sum"): "ndcg_logging", ("ndcg", "treatment", "sum"): "ndcg_target",
               ("dcg", "logging", "m2"): "dcg_logging_m2", ("ndcg", "treatment", "m2"): "ndcg_target_m2",
               ("dcg", "treatment", "sum_diff"): "dcg_diff", ("ndcg", "treatment", "m2_diff"): "ndcg_diff_m2",
               ("dcg", "logging", "den_sum"): "den_sum", ("dcg", "logging", "n"): "n"}
    return max_relative_difference(engine_file, numpy_file, columns)


def machine() -> str:
    cpu = "?"
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


def load() -> str:
    """The 1-minute load average now (the machine may be shared: read every time next to its numbers)."""
    return f"load {os.getloadavg()[0]:.1f}"


def med(xs) -> float:
    return statistics.median(xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--large", action="store_true",
                    help="also 100 M impressions (day files: one reward with DuckDB limited to 2 GB; the default grid "
                         "with a 2 GB process budget)")
    ap.add_argument("--processes", type=int, default=3, help="whole-process runs of each side at 10 M")
    ap.add_argument("--demo", default=str(REPO / "data" / "logs.parquet"))
    ap.add_argument("--old-demo", default="generate",
                    help="the earlier demo's logs (preset shallow, seed 0) to time beside the demo in the same run; "
                         "'generate' writes them into --dir (about a minute), '' skips")
    ap.add_argument("--dir", default=None, help="where to write the generated logs (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "engine":
            res = engine_worker(rest[0], rest[1], rest[2] if len(rest) > 2 else None)
        elif kind == "numpy":
            res = numpy_worker(*rest)
        else:
            res = demo_worker(*rest)
        res["peak_rss_mb"] = peak_rss_mb()
        print("RESULT " + json.dumps(res))
        return 0

    import pyarrow.parquet as pq
    from generate import generate, write_partitioned

    work = Path(args.dir or tempfile.mkdtemp(prefix="offeval-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}")
    print("workload: 1 binary reward, logging + 1 target policy, D = D0 = learnt pbm, 14 clip values, DCG and "
          "nDCG, per-group moments; seconds are wall time (cpu = CPU seconds of the process)\n")
    ok = True
    print("| size | engine load | engine 1st reduce (compiles) | engine new D (reused) | numpy load | numpy kernel "
          "| engine reused / numpy | same moments | load average |")
    print("|---|---|---|---|---|---|---|---|---|")
    files = {}
    for n in [int(s) for s in args.sizes.split(",") if s]:
        path = work / f"logs_{n}.parquet"
        if not path.exists():
            pq.write_table(generate(n, seed=args.seed), path, row_group_size=1_000_000)
        files[n] = path
        e = spawn("engine", str(path), str(work / f"m_engine_{n}.parquet"))
        p = spawn("numpy", str(path), str(work / f"m_numpy_{n}.parquet"))
        diff = compare(str(work / f"m_engine_{n}.parquet"), str(work / f"m_numpy_{n}.parquet"))
        ok &= diff <= 1e-9
        print(f"| {n / 1e6:g} M | {e['load_s']:.2f} s | {e['first_s']:.2f} s (cpu {e['first_cpu']:.2f}) "
              f"| {e['again_s']:.2f} s (cpu {e['again_cpu']:.2f}) | {p['load_s']:.2f} s | {p['estimate_s']:.2f} s "
              f"(cpu {p['estimate_cpu']:.2f}) | {e['again_s'] / p['estimate_s']:.2f}× (1st: "
              f"{e['first_s'] / p['estimate_s']:.2f}×) | max rel. diff {diff:.1e} | {load()[5:]} |")
    big = files.get(max(files)) if files else None
    if big is not None and args.processes > 0:
        out_e, out_n = str(work / "proc_engine.parquet"), str(work / "proc_numpy.parquet")
        eng, nk = [], []
        for _ in range(args.processes):
            eng.append(timed_process([sys.executable, "-m", "offeval_core.cli", "reduce", str(big), "--rewards",
                                      "like", "--policies", "treatment", "--discounts", "pbm", "--exposures",
                                      "pbm", "--out", out_e]))
            Path(out_e).unlink(missing_ok=True)
            nk.append(timed_process([sys.executable, str(HERE / "numpy_kernel.py"), str(big), "--out", out_n]))
        ew, nw = med([r["wall"] for r in eng]), med([r["wall"] for r in nk])
        ec, nc = med([r["cpu"] for r in eng]), med([r["cpu"] for r in nk])
        print(f"\nwhole process on {big.name} (median of {args.processes}): `offeval reduce` {ew:.2f} s "
              f"(cpu {ec:.2f}) vs numpy kernel {nw:.2f} s (cpu {nc:.2f}): ratio {ew / nw:.2f}× wall, "
              f"{ec / nc:.2f}× cpu (target ≤ 1); {load()}")
    if args.demo and Path(args.demo).exists():
        d = spawn("demo", args.demo)
        wall = [w for w, _ in d["reused"]]
        cpu = [c for _, c in d["reused"]]
        ew, ec = med([w for w, _ in d["engine"]]), med([c for _, c in d["engine"]])
        fw, fc = med([w for w, _ in d["fresh"]]), med([c for _, c in d["fresh"]])
        print(f"\ndemo ({d['rows']:,} rows, {d['policies']} policies × 14 clips, reward like): read + validate "
              f"{d['load_s']:.2f} s; prepare once (register, summarise, compile) {d['prepare'][0]:.2f} s "
              f"(cpu {d['prepare'][1]:.2f}); {load()}")
        print(f"  a new (reward, D, D0) combination, whole reduce: median {med(wall):.3f} s (cpu {med(cpu):.3f}), "
              f"max {max(wall):.3f} s over {len(wall)}")
        print(f"  of which the compiled query (engine time, target ≤ 0.25 s): median {ew:.3f} s (cpu {ec:.3f}), "
              f"min {min(w for w, _ in d['engine']):.3f} s over {len(d['engine'])}")
        print(f"  the same query built and compiled afresh: median {fw:.3f} s (cpu {fc:.3f}): reuse is "
              f"{fw / ew:.1f}× faster (cpu {fc / ec:.1f}×)")
        for r, w, c in d["other"]:
            print(f"  reward {r} (D = log2), whole reduce: {w:.2f} s (cpu {c:.2f})")
        cases = {(r, b): (s, n) for r, b, s, n in d["graded"]["cases"]}
        like_s, like_n = cases[("like", True)]
        print("  the compiled query per reward, warm (median of 3 new D, D0 = pbm; target: graded ≤ 2× binary):")
        for (r, b), (s, n) in cases.items():
            shape = "graded" if not b else "binary" if r != "watch_time" else "binary: its cost, not its moments"
            print(f"    {r} ({shape} shape, {n:,} rewarded rows): {s:.3f} s = {s / like_s:.2f}× like, "
                  f"{(s / n) / (like_s / like_n):.2f}× like per rewarded row")
        g, gb = cases[("watch_time", False)][0], cases[("watch_time", True)][0]
        print(f"    the graded iDCG alone: watch_time graded / the same rows through the binary shape = {g / gb:.2f}×; "
              f"load {d['graded']['load']:.1f}")
        print(f"  ({load()} at the end of the demo)")
        old = args.old_demo
        if old == "generate":
            from offeval_core.simulate import preset_config, write_world
            old_dir = work / "old_demo"
            if not (old_dir / "logs.parquet").exists():
                write_world(preset_config("shallow"), old_dir, seed=0)
            old = str(old_dir / "logs.parquet")
        if old and Path(old).exists():
            o = spawn("demo", old)
            ow, oc = med([w for w, _ in o["engine"]]), med([c for _, c in o["engine"]])
            print(f"  beside the earlier demo ({o['rows']:,} rows, preset shallow, seed 0) in this run: engine time "
                  f"median {ow:.3f} s (cpu {oc:.3f}); the demo / the earlier demo = {ew / ow:.2f}× wall, "
                  f"{ec / oc:.2f}× cpu (target ≤ 1; issue 12 measured the earlier demo at {OLD_DEMO_ENGINE_S} s "
                  f"on a quiet machine)")
    if args.large:
        n = 100_000_000
        ddir = work / "logs_100M"
        if not ddir.exists():
            t0 = time.perf_counter()
            info = write_partitioned(ddir, n, seed=args.seed)
            print(f"\n(generated {info['rows']:,} rows in 7 day files in {time.perf_counter() - t0:.0f} s)")
        r = spawn("engine", str(ddir), str(work / "m_engine_100M.parquet"), "2GB")
        print(f"\n100 M impressions, DuckDB memory limit 2 GB: load {r['load_s']:.1f} s (cpu {r['load_cpu']:.1f}), "
              f"first reduce {r['first_s']:.1f} s, new D {r['again_s']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB; "
              f"{load()}")
        if files:
            small = min(files)
            s = spawn("engine", str(files[small]), str(work / "m_engine_small.parquet"))
            per_small = (s["load_s"] + s["first_s"]) / s["rows"]
            per_big = (r["load_s"] + r["first_s"]) / r["rows"]
            print(f"cost per impression 100 M / {small / 1e6:g} M: {per_big / per_small:.2f}× (1.0 = linear)")
        # the default grid of `offeval reduce` (every reward × every policy × D ∈ {pbm, log2} × 14 clips) on 100 M
        # impressions of the demo's shape (3 rewards, 12 policies), as a whole process within a 2 GB budget
        # (`--memory-limit` is the process's: DuckDB gets its share, offeval_core.memory)
        wdir = work / "logs_100M_wide"
        if not wdir.exists():
            t0 = time.perf_counter()
            info = write_partitioned(wdir, n, seed=args.seed, wide=True)
            print(f"\n(generated {info['rows']:,} rows of the demo's shape in 7 day files in "
                  f"{time.perf_counter() - t0:.0f} s)")
        out = work / "m_default_grid_100M.parquet"
        cmd = [sys.executable, "-m", "offeval_core.cli", "reduce", str(wdir), "--out", str(out), "--force",
               "--memory-limit", "2GB", "--temp-dir", str(work / "duckdb-spill")]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=ENV)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        from offeval_core.moments_io import read_metadata

        settings = read_metadata(out)["settings"]
        print(f"default grid (3 rewards × 12 policies × pbm, log2 × 14 clips) on 100 M impressions, `offeval reduce "
              f"--memory-limit 2GB` as a whole process: {summary['seconds']:.0f} s, peak RSS "
              f"{summary['peak_rss_mb']:.0f} MiB against the budget's {2e9 / 2**20:.0f} MiB (DuckDB's share "
              f"{settings['duckdb_memory_limit']}), {summary['variants']:,} moment rows; {load()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
