"""Detection rates of the assumption checks on the simulator's switches (docs/diagnose.md).

For each switch of :class:`offeval_core.simulate.SimulationConfig` (``cascade``, ``reward_interactions``,
``contextual_position_bias``, ``support_depth``) and for the world with every switch off, simulate several
seeds, run :func:`offeval_core.diagnose.diagnose` and count how often each check fires.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from offeval_core import simulate as sim
from offeval_core.diagnose import CHECKS, diagnose
from offeval_core.logs import read_logs

__all__ = [
    "SMALL", "SWITCHES", "detection_rates", "item_topics", "run_world",
]


SWITCHES = {"none": {}, "cascade": {"cascade": True}, "reward interaction": {"reward_interactions": True},
            "context-dependent position bias": {"contextual_position_bias": True}, "support": {"support_depth": 8}}
SMALL = {"sessions_per_arm_day": 1000}


def item_topics(config: sim.SimulationConfig, seed: int) -> pd.Series:
    """The simulated items' topics (the category table a platform would have), indexed by item id."""
    world = sim._build_world(config, seed)   # the topics the reward interactions act through
    return pd.Series(world.topic, index=range(len(world.topic)))


def run_world(switch: str, seed: int, *, reward: str = "watch_complete", preset: str = "small",
              overrides: dict | None = None, alpha: float = 0.05) -> dict[str, bool]:
    """Which checks fire on one simulated world."""
    cfg = sim.preset_config(preset, **{**SMALL, **(overrides or {}), **SWITCHES[switch]})
    world = sim.simulate(cfg, seed=seed)
    logs = read_logs(world.logs, name=f"{switch} seed {seed}")
    d = diagnose(logs, reward=reward, policy="treatment", categories=item_topics(cfg, seed), alpha=alpha)
    return {c.name: bool(c.fires) for c in d.checks}


def detection_rates(seeds, *, switches=tuple(SWITCHES), progress: Callable[[str, int], None] | None = None,
                    **kwargs) -> pd.DataFrame:
    """Share of seeds on which each check fires, one row per switch (``none`` = every switch off)."""
    rows = []
    for switch in switches:
        fired = []
        for seed in seeds:
            fired.append(run_world(switch, seed, **kwargs))
            if progress is not None:
                progress(switch, seed)
        frame = pd.DataFrame(fired)
        rows.append({"switch": switch, "seeds": len(fired), **{c: float(frame[c].mean()) for c in CHECKS}})
    return pd.DataFrame(rows)
