"""Files shaped like real exports, each with the schema-named frame it means (the "correctly mapped" data):

- :func:`team_export`: a team's feed export (visit, pos, an item-id column, clicked, completed, date, test, the
  arm under its own name with A/B or 0/1 labels, user_type, ``pos_<policy>`` per candidate; no policy named
  ``treatment``: the logging ranker is ``current``, the tested one ``ranker_v2``), cut from the bundled demo;
- :func:`open_bandit_like`: a propensity log in the Open Bandit Dataset's layout (an unnamed row-number
  column, timestamp, item_id, position, click, propensity_score, user_feature_0..3 as hashes,
  user-item_affinity_*), one round per row, a uniform-random logging policy and a Bernoulli-TS-like target
  with known click rates; with ``both=True`` the two campaigns in one file under a ``policy`` column
  (random / bts) and the target's propensity on every row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
POLICY_NAMES = {"production": "current", "treatment": "ranker_v2", "cand_01": "ranker_v3"}
ARM_LABELS = {"ab": {"control": "A", "treatment": "B"}, "01": {"control": 0, "treatment": 1}}


def demo_sample(every: int = 40) -> pd.DataFrame:
    """Every ``every``-th session of the bundled demo: all arms, tests and days."""
    raw = pd.read_parquet(ROOT / "data" / "logs.parquet")
    return raw[raw["session_id"] % every == 0].reset_index(drop=True)


def team_export(demo: pd.DataFrame, *, arm_column: str = "bucket", labels: str = "ab",
                item_column: str = "video") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the team's file, the same logs in the schema's names). The item ids start at 0; the arm column holds
    ``labels`` (``ab``: A / B, ``01``: 0 / 1)."""
    items = pd.factorize(demo["item_id"], sort=True)[0]
    export = pd.DataFrame({
        "visit": demo["session_id"].to_numpy(), "pos": demo["rank"].to_numpy(), item_column: items,
        "clicked": demo["like"].to_numpy(), "completed": demo["watch_complete"].to_numpy(),
        "date": demo["day"].astype(str).to_numpy(), "test": demo["experiment_id"].to_numpy(),
        arm_column: demo["arm"].map(ARM_LABELS[labels]).to_numpy(), "user_type": demo["segment"].to_numpy()})
    schema = pd.DataFrame({
        "session_id": demo["session_id"].to_numpy(), "rank": demo["rank"].to_numpy(), "item_id": items,
        "clicked": demo["like"].to_numpy(), "completed": demo["watch_complete"].to_numpy(),
        "day": demo["day"].astype(str).to_numpy(), "experiment_id": demo["experiment_id"].to_numpy(),
        "arm": demo["arm"].to_numpy(), "segment": demo["segment"].to_numpy()})
    for old, new in POLICY_NAMES.items():
        export["pos_" + new] = demo["rank__" + old].to_numpy()
        schema["rank__" + new] = demo["rank__" + old].to_numpy()
    return export, schema


OBD_ITEMS, OBD_POSITIONS, OBD_AFFINITIES = 80, 3, 8


def _hashes(rng: np.random.Generator, n_values: int, size: int, p=None) -> np.ndarray:
    values = np.array(["".join(rng.choice(list("0123456789abcdef"), 32)) for _ in range(n_values)])
    return values[rng.choice(n_values, size=size, p=p)]


def open_bandit_like(n: int = 3000, *, seed: int = 0, both: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the export, the schema-named logs it means). Rows are rounds: the logging policy draws the item at a
    position uniformly (propensity 1/80, like the Open Bandit random campaign); the ``bts`` target draws it
    from a fixed skewed distribution per position. With ``both``, ``n`` more rounds logged by ``bts`` follow
    and a ``policy`` column says which campaign logged each row."""
    rng = np.random.default_rng(seed)
    ctr = rng.beta(0.6, 120, size=OBD_ITEMS) * 2  # per-item click rates, mean ≈ 0.01
    weights = rng.dirichlet(np.full(OBD_ITEMS, 0.3), size=OBD_POSITIONS)  # the target's item distribution
    parts = []
    for policy in ("random", "bts") if both else ("random",):
        position = rng.integers(1, OBD_POSITIONS + 1, size=n)
        if policy == "random":
            item = rng.integers(0, OBD_ITEMS, size=n)
        else:
            item = np.array([rng.choice(OBD_ITEMS, p=weights[p - 1]) for p in position])
        logging = np.full(n, 1 / OBD_ITEMS) if policy == "random" else weights[position - 1, item]
        click = (rng.random(n) < ctr[item] * (1.0 - 0.15 * (position - 1))).astype(int)
        t0 = pd.Timestamp("2019-11-24", tz="UTC")
        stamps = t0 + pd.to_timedelta(np.sort(rng.uniform(0, 7 * 86400, size=n)), unit="s")
        part = pd.DataFrame({"timestamp": stamps.astype(str), "item_id": item, "position": position,
                             "click": click, "propensity_score": logging})
        for k, (values, p) in enumerate(((3, [0.82, 0.17, 0.01]), (5, [0.83, 0.09, 0.07, 0.008, 0.002]),
                                          (8, None), (8, None))):
            part[f"user_feature_{k}"] = _hashes(rng, values, n, p)
        for k in range(OBD_AFFINITIES):
            part[f"user-item_affinity_{k}"] = np.where(rng.random(n) < 0.01, rng.integers(1, 3, size=n), 0.0)
        if both:
            part["policy"] = policy
            part["target_propensity__bts"] = weights[position - 1, item]
        parts.append(part)
    export = pd.concat(parts, ignore_index=True)
    export.insert(0, "", np.arange(len(export)))  # the unnamed row number of a pandas CSV export
    schema = pd.DataFrame({"session_id": np.arange(1, len(export) + 1), "rank": export["position"],
                           "item_id": export["item_id"], "click": export["click"],
                           "logging_propensity": export["propensity_score"],
                           "day": pd.to_datetime(export["timestamp"], format="ISO8601").dt.date})
    if both:
        schema["arm"] = export["policy"].map({"random": "control", "bts": "treatment"})
        schema["target_propensity__bts"] = export["target_propensity__bts"]
    return export, schema
