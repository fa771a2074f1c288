"""The ranking-log schema (DESIGN.md): column names and prefixes, and :class:`Logs`, the validated logs.

Reading and validation live in :mod:`offeval_core.logs` (the public entry point, which re-exports these
names) and :mod:`offeval_core.log_checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from offeval_core.errors import UnknownName

__all__ = [
    "ARMS", "KNOWN", "LOGGING_POLICY", "LOGGING_PROPENSITIES", "MAX_SHOWN", "OPTIONAL", "POLICY_PREFIX", "REQUIRED",
    "SESSION_KEYS", "TARGET_CONDITIONAL_PREFIX", "TARGET_PROPENSITY_PREFIX", "Logs",
]

POLICY_PREFIX = "rank__"
TARGET_PROPENSITY_PREFIX = "target_propensity__"
TARGET_CONDITIONAL_PREFIX = "target_conditional_propensity__"
LOGGING_PROPENSITIES = ("logging_propensity", "logging_conditional_propensity")
LOGGING_POLICY = "logging"
REQUIRED = ("session_id", "rank")
SESSION_KEYS = ("experiment_id", "day", "arm")
OPTIONAL = ("item_id", "day", "experiment_id", "arm", "segment", *LOGGING_PROPENSITIES)
KNOWN = REQUIRED + OPTIONAL
ARMS = ("control", "treatment")
MAX_SHOWN = 5


@dataclass(frozen=True, eq=False)
class Logs:
    """Validated ranking logs, sorted by session and rank.

    ``frame`` has the schema's column names; ``session`` is a dense int64 code (0..n_sessions-1) in
    the order of the original ``session_id`` values; rewards are float64; ``rank`` and ``rank__*`` are
    int32 (a missing target rank, i.e. the target would not show the item, is -1).
    """

    frame: pd.DataFrame
    rewards: tuple[str, ...]
    policies: tuple[str, ...]
    source: str = "<DataFrame>"
    notes: tuple[str, ...] = ()
    sessions: pd.DataFrame = field(repr=False, default=None)
    columns: Mapping[str, str] = field(repr=False, default_factory=dict)  # schema name → the user's column
    reading: object = field(repr=False, default=None)  # offeval_core.reading.Reading: how each column was read

    def user_name(self, name: str) -> str:
        """The user's name of a schema column (the name itself when it was not mapped)."""
        return self.columns.get(name, name)

    def schema_name(self, user: str) -> str:
        """The schema name of one of the user's columns (the name itself when it was not mapped)."""
        return next((k for k, v in self.columns.items() if v == user), user)

    @property
    def n_rows(self) -> int:
        return len(self.frame)

    @property
    def n_sessions(self) -> int:
        return len(self.sessions)

    @property
    def max_rank(self) -> int:
        """Largest rank in the logged ranks and every target policy's ranks."""
        cols = ["rank", *(POLICY_PREFIX + p for p in self.policies)]
        return int(max(self.frame[c].max() for c in cols))

    @property
    def has_arms(self) -> bool:
        return bool((self.sessions["arm"] == "treatment").any())

    @property
    def propensity_policies(self) -> tuple[str, ...]:
        return tuple(
            c[len(TARGET_PROPENSITY_PREFIX):] for c in self.frame.columns if c.startswith(TARGET_PROPENSITY_PREFIX)
        )

    def check_reward(self, reward: str) -> str:
        if reward not in self.rewards:
            raise UnknownName(
                f"unknown reward {reward!r}; the logs {self.source} have reward columns: {', '.join(self.rewards)}"
            )
        return reward

    def check_policy(self, policy: str | None) -> str | None:
        if policy is None or policy == LOGGING_POLICY:
            return None
        if policy not in self.policies:
            known = ", ".join(self.policies) or "none"
            raise UnknownName(
                f"unknown policy {policy!r}: the logs {self.source} have no column "
                f"'{POLICY_PREFIX}{policy}' (policies found: {known})"
            )
        return policy
