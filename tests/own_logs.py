"""Logs shaped like a team's own exports, built from the simulator's small world (tests/dashboard_support.py):

- **offline-only** (candidates evaluated before any A/B test): the control arm's sessions only, no arm and no test
  column, the candidates as ``pos_<name>`` columns — ``pos_production`` (the logging policy itself), ``pos_ranker_v2``
  (the world's cand_01, better), ``pos_ranker_v3`` (cand_02, slightly better), ``pos_ranker_v4`` (cand_10, worse);
- **a policy not named treatment**: both arms of the A/B tests, the policy that served the treatment arm as
  ``pos_ranker_v2`` and a second candidate ``pos_ranker_v3`` (the world's cand_01), after ``pos_production``.

Both use the user's names visit, pos, clicked, completed, date, user_type (and test, variant), mapped by ``MAP``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

MAP = "session_id=visit,rank=pos,rank__*=pos_*"
COLUMNS = {"session_id": "visit", "rank": "pos", "rank__*": "pos_*"}
REWARDS = "clicked,completed"
NAMES = {"session_id": "visit", "rank": "pos", "like": "clicked", "watch_complete": "completed", "day": "date",
         "experiment_id": "test", "arm": "variant", "segment": "user_type"}
OFFLINE_CANDIDATES = {"production": "production", "cand_01": "ranker_v2", "cand_02": "ranker_v3",
                      "cand_10": "ranker_v4"}
AB_CANDIDATES = {"production": "production", "treatment": "ranker_v2", "cand_01": "ranker_v3"}


def _renamed(frame: pd.DataFrame, candidates: dict[str, str]) -> pd.DataFrame:
    keep = [c for c in frame.columns if not c.startswith("rank__") and c not in ("item_id", "watch_time")]
    out = frame[keep + [f"rank__{p}" for p in candidates]].rename(columns=NAMES)
    return out.rename(columns={f"rank__{p}": f"pos_{name}" for p, name in candidates.items()})


def offline_only(frame: pd.DataFrame) -> pd.DataFrame:
    """The control arm's sessions without arm and test columns; candidates as ``pos_<name>``."""
    control = frame[frame["arm"] == "control"].drop(columns=["arm", "experiment_id"])
    return _renamed(control, OFFLINE_CANDIDATES)


def renamed_ab(frame: pd.DataFrame) -> pd.DataFrame:
    """Both arms; the treatment arm's policy is ``pos_ranker_v2``."""
    return _renamed(frame, AB_CANDIDATES)


def write(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path
