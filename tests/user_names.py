"""The demo logs under a user's own column names (visit, pos, clicked, …, pos_<policy>): the file a new user
brings, used by the mapping tests of the CLI, the AppTests and the browser tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

RENAME = {"session_id": "visit", "rank": "pos", "like": "clicked", "watch_complete": "completed", "day": "date",
          "experiment_id": "test", "arm": "variant", "segment": "user_type"}
MAP = "session_id=visit,rank=pos,rank__*=pos_*"
POLICIES = ("production", "treatment", *(f"cand_{i:02d}" for i in range(1, 11)))


def user_named(frame: pd.DataFrame) -> pd.DataFrame:
    """The schema-named logs renamed to the user's names; item_id and watch_time dropped."""
    out = frame.drop(columns=[c for c in ("item_id", "watch_time") if c in frame.columns]).rename(columns=RENAME)
    return out.rename(columns={c: "pos_" + c[len("rank__"):] for c in out.columns if c.startswith("rank__")})


def write_user_csv(frame: pd.DataFrame, path: Path) -> Path:
    user_named(frame).to_csv(path, index=False)
    return path
