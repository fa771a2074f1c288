"""The ``demo`` preset on the bundled data (seed 0, data/) and on five seeds it does not use, simulated and
reduced once per seed and test process: the findings and decision tests of one seed share an xdist group, so
they run in one worker and read the same cached moments.

A world is 1.5 M rows: it is simulated, read and reduced in a child process that returns only what the tests
read (the moments, the ground truth, the number of experiments), so a test process never holds a world (held in
the worker itself, six worlds took 7–9 GB per worker and made the machine swap)."""

from __future__ import annotations

import functools
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from offeval_core.engine import Moments

DATA = Path(__file__).resolve().parents[1] / "data"
SEEDS = (0, 1, 2, 3, 4, 5)
REWARDS = ("like", "watch_complete", "watch_time")   # the Sensitivity page pools every reward, as Fig. 1 does
DECISION_REWARDS = ("like", "watch_complete")
DECISION_CLIPS = (1.0, 16.0, math.inf)


@dataclass(frozen=True)
class DemoWorld:
    """What the tests read of the demo world of one seed. ``moments``: every reward with D = D0 = learnt pbm on
    the default clip grid and D = D0 = log2 at m = 1 and ∞ (``analyses.world_findings.world_moments``);
    ``decision_moments``: DCG and the importance family of ``treatment`` for the decision boxes."""

    n_experiments: int
    ground_truth: pd.DataFrame
    moments: Moments
    decision_moments: Moments


def grouped(seeds=SEEDS):
    """``seeds`` as parameters, each in the xdist group of its world."""
    return [pytest.param(s, marks=pytest.mark.xdist_group(f"demo_world_{s}")) for s in seeds]


def _build(seed: int) -> DemoWorld:
    """Simulate (seed 0: read the bundled data, ``offeval simulate --out data --preset demo --seed 0``), read
    and reduce the demo world of ``seed``; run in a child process."""
    from offeval_core.analyses import merge_moments
    from offeval_core.analyses.world_findings import world_moments
    from offeval_core.engine import Grid, reduce
    from offeval_core.importance import reduce_importance
    from offeval_core.logs import read_logs
    from offeval_core.simulate import preset_config, simulate

    if seed == 0:
        frame, truth = pd.read_parquet(DATA / "logs.parquet"), pd.read_parquet(DATA / "ground_truth.parquet")
    else:
        w = simulate(preset_config("demo"), seed=seed)
        frame, truth = w.logs, w.ground_truth
    n_experiments = int(frame["experiment_id"].nunique())
    lg = read_logs(frame)
    del frame
    dcg = reduce(lg, Grid(rewards=DECISION_REWARDS, policies=("treatment",), clips=DECISION_CLIPS))
    imp = reduce_importance(lg, rewards=DECISION_REWARDS, policies=("treatment",), clips=DECISION_CLIPS,
                            weights="exposure")
    return DemoWorld(n_experiments, truth, world_moments(lg, rewards=REWARDS), merge_moments(dcg, imp))


@functools.cache
def demo_world(seed: int) -> DemoWorld:
    """The demo world of ``seed``, built once per test process in a child process (spawned: it starts clean
    and returns its memory when it ends)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_build, seed).result()
