"""Argument validation for the public API: one place, specific messages naming the argument."""

from __future__ import annotations

import math
from collections.abc import Iterable


def check_level(level: float) -> float:
    """Check a confidence level is a number strictly between 0 and 1."""
    if isinstance(level, bool) or not isinstance(level, int | float):
        raise TypeError(f"level must be a number between 0 and 1, got {type(level).__name__} {level!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be strictly between 0 and 1 (e.g. 0.99), got {level!r}")
    return float(level)


def check_clip(clip: float, *, name: str = "clip") -> float:
    """Check a clip value m ≥ 1 (``math.inf`` allowed; m = 1 means raw labels)."""
    if isinstance(clip, bool) or not isinstance(clip, int | float):
        raise TypeError(f"{name} must be a number ≥ 1 or inf, got {type(clip).__name__} {clip!r}")
    if math.isnan(clip) or clip < 1:
        raise ValueError(f"{name} must be ≥ 1 (1 = raw labels, inf = unclipped), got {clip!r}")
    return float(clip)


def check_clips(clips: Iterable[float]) -> tuple[float, ...]:
    values = tuple(check_clip(c, name="clips") for c in clips)
    if not values:
        raise ValueError("clips must contain at least one clip value, got an empty sequence")
    return tuple(sorted(set(values)))


def parse_clip(text: str) -> float:
    """Parse a clip value from text: a number ≥ 1, or ``inf``."""
    t = str(text).strip().lower()
    if t in {"inf", "infinity", "∞"}:
        return math.inf
    try:
        value = float(t)
    except ValueError:
        raise ValueError(f"clip must be a number ≥ 1 or 'inf', got {text!r}") from None
    return check_clip(value)


def check_choice(value: str, choices: Iterable[str], *, name: str) -> str:
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value
