"""Small immutable result types shared by every estimator and analysis."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "ConfidenceInterval", "Effect", "Estimate", "json_number",
]



@dataclass(frozen=True, slots=True)
class ConfidenceInterval:
    """A two-sided confidence interval ``[low, high]`` at confidence ``level`` (e.g. 0.99)."""

    low: float
    high: float
    level: float

    @property
    def width(self) -> float:
        return self.high - self.low

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def strictly_positive(self) -> bool:
        return self.low > 0

    @property
    def strictly_negative(self) -> bool:
        return self.high < 0

    def as_list(self) -> list[float]:
        return [self.low, self.high]


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over ``n`` units (sessions, users, impressions) with its standard error and CI."""

    value: float
    stderr: float
    n: int
    ci: ConfidenceInterval

    def to_dict(self) -> dict:
        return {"value": json_number(self.value), "stderr": json_number(self.stderr), "ci": [json_number(x) for x in self.ci.as_list()],
                "n": int(self.n)}


@dataclass(frozen=True, slots=True)
class Effect:
    """A treatment effect (difference of means) with its CI and the one-sided p-value of H0: effect ≤ 0."""

    value: float
    stderr: float
    n: int
    ci: ConfidenceInterval
    p_value: float

    def to_dict(self) -> dict:
        return {"value": json_number(self.value), "stderr": json_number(self.stderr), "ci": [json_number(x) for x in self.ci.as_list()],
                "n": int(self.n), "p_value": json_number(self.p_value)}


def json_number(x: float | None) -> float | None:
    """A float for JSON output: NaN, ±inf and None become None (JSON has no NaN or infinity)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x
