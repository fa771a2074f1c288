"""Engine time of a new (reward like, D, D0 = pbm) on the demo world against a candidate world, seed 0, measured in
one run, alternating (as bench/bench_reduce.py's demo_worker: the compiled query reused, 14 clips, every policy).

    python -m tools.world_engine_time '{"fresh_drift": 1.0}'
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from offeval_core.engine import Grid, compiled_moments, logs_source, prepare, source_discount
from offeval_core.engine.kernel import binary_rewards
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate


def setup(overrides: dict):
    w = simulate(preset_config("demo", **overrides), seed=0)
    logs = read_logs(w.logs)
    n_like = int(w.logs["like"].sum())
    del w
    prepare(logs)
    source = logs_source(logs)
    binary = binary_rewards(source, ["like"])["like"]
    query = compiled_moments(source, rewards=("like",), policies=logs.policies, n_clips=14, binary=binary)
    return logs, source, query, n_like


def main() -> None:
    cand = json.loads(sys.argv[1])
    worlds = {"demo": setup({}), "candidate": setup(cand)}
    clips = Grid(rewards=("like",), policies=()).clips
    times = {k: [] for k in worlds}
    for _ in range(3):
        for d in ("exponential:0.8", "exponential:0.7", "exponential:0.6", "exponential:0.5", "reciprocal"):
            for k, (_, source, query, _) in worlds.items():
                disc, expo = source_discount(d, source), source_discount("pbm", source)
                t = time.perf_counter()
                query.run(reward="like", discount=disc, exposure=expo, clips=clips)
                times[k].append(time.perf_counter() - t)
    for k, (logs, _, _, n_like) in worlds.items():
        print(k, f"rows {logs.n_rows:,} likes {n_like:,} engine median {statistics.median(times[k]):.3f} s")
    print("ratio candidate/demo", round(statistics.median(times["candidate"]) / statistics.median(times["demo"]), 3))


if __name__ == "__main__":
    main()
