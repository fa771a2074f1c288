"""Shared small simulated world for the analyses tests (computed once per test session)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from offeval_core.analyses import merge_moments
from offeval_core.engine import Grid, reduce
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, simulate

CLIPS = (1.0, 4.0, 64.0, math.inf)
REWARDS = ("like", "watch_complete")


@functools.cache
def small_world():
    """The simulator's ``small`` preset (3 experiments × 3 days × 2 arms × ~200 sessions), seed 0."""
    world = simulate(preset_config("small"), seed=0)
    logs = read_logs(world.logs)
    main = reduce(logs, Grid(rewards=REWARDS, policies=("treatment",), discounts=("pbm",), exposures=("pbm",),
                             clips=CLIPS))
    extra = reduce(logs, Grid(rewards=REWARDS, policies=("treatment",), discounts=("log2",),
                              exposures=("log2",), clips=(1.0, math.inf)))
    return world, logs, merge_moments(main, extra)


def per_session_totals(logs, reward: str) -> pd.DataFrame:
    """Observed reward per session with its experiment, day and arm, straight from the raw frame."""
    f = logs.frame
    tot = np.bincount(f["session"].to_numpy(), weights=f[reward].to_numpy(float), minlength=logs.n_sessions)
    s = logs.sessions.sort_values("session").reset_index(drop=True)
    out = s[["session", "experiment_id", "day", "arm"]].copy()
    out["total"] = tot
    for k in ("experiment_id", "arm"):
        out[k] = out[k].astype(str)
    return out
