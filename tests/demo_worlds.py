"""The ``demo`` preset on the bundled data (seed 0, data/) and on five seeds it does not use, simulated and
reduced once per seed and test process: the findings and decision tests of one seed share an xdist group, so
they run in one worker and read the same cached world."""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd
import pytest

from offeval_core.analyses.world_findings import world_findings, world_moments
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate

DATA = Path(__file__).resolve().parents[1] / "data"
SEEDS = (0, 1, 2, 3, 4, 5)
REWARDS = ("like", "watch_complete", "watch_time")   # the Sensitivity page pools every reward, as Fig. 1 does


def grouped(seeds=SEEDS):
    """``seeds`` as parameters, each in the xdist group of its world."""
    return [pytest.param(s, marks=pytest.mark.xdist_group(f"demo_world_{s}")) for s in seeds]


@functools.cache
def world(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(logs, ground truth) of the demo world with ``seed``; seed 0 is the bundled data."""
    if seed == 0:  # offeval simulate --out data --preset demo --seed 0
        return pd.read_parquet(DATA / "logs.parquet"), pd.read_parquet(DATA / "ground_truth.parquet")
    w = simulate(preset_config("demo"), seed=seed)
    return w.logs, w.ground_truth


@functools.cache
def logs(seed: int):
    return read_logs(world(seed)[0])


@functools.cache
def moments(seed: int):
    """Every reward with D = D0 = learnt pbm on the default clip grid, and D = D0 = log2 at m = 1 and ∞ (the
    Table 2 columns): ``analyses.world_findings.world_moments``."""
    return world_moments(logs(seed), rewards=REWARDS)


@functools.cache
def findings(seed: int):
    """Fig. 1, Table 2 and the coverage of the exact effect on the demo world of ``seed``."""
    return world_findings(moments(seed), world(seed)[1], rewards=REWARDS)
