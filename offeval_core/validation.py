"""Argument validation for the public API: one place, specific messages naming the argument.

Value errors are :class:`offeval_core.errors.SpecError` (a ``ValueError``); wrong types are
:class:`offeval_core.errors.WrongType` (a ``TypeError``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from offeval_core.errors import SpecError, WrongType

__all__ = ["check_choice", "check_clip", "check_clips", "check_level", "check_rng", "clip_value", "format_clip",
           "parse_clip"]


def check_level(level: float) -> float:
    """Check a confidence level is a number strictly between 0 and 1."""
    if isinstance(level, bool) or not isinstance(level, int | float):
        raise WrongType(f"level must be a number between 0 and 1, got {type(level).__name__} {level!r}")
    if not 0 < level < 1:
        raise SpecError(f"level must be strictly between 0 and 1 (e.g. 0.99), got {level!r}")
    return float(level)


def check_clip(clip: float, *, name: str = "clip") -> float:
    """Check a clip value m ≥ 1 (``math.inf`` allowed; m = 1 means raw labels)."""
    if isinstance(clip, bool) or not isinstance(clip, int | float):
        raise WrongType(f"{name} must be a number ≥ 1 or inf, got {type(clip).__name__} {clip!r}")
    if math.isnan(clip) or clip < 1:
        raise SpecError(f"{name} must be ≥ 1 (1 = raw labels, inf = unclipped), got {clip!r}")
    return float(clip)


def check_clips(clips: Iterable[float]) -> tuple[float, ...]:
    values = tuple(check_clip(c, name="clips") for c in clips)
    if not values:
        raise SpecError("clips must contain at least one clip value, got an empty sequence")
    return tuple(sorted(set(values)))


# ------------------------------------------------------------------------- the clip codec (one place)

_INF_WORDS = frozenset({"inf", "+inf", "infinity", "∞"})


def format_clip(clip: float, *, symbol: bool = False) -> str:
    """Text of a clip value: ``"inf"`` (or ``"∞"`` with ``symbol=True``, for display) for m = ∞, else the
    number without trailing zeros. :func:`parse_clip` reads both forms back.

    >>> format_clip(64.0), format_clip(float("inf")), format_clip(float("inf"), symbol=True)
    ('64', 'inf', '∞')
    """
    if math.isinf(clip):
        return "∞" if symbol else "inf"
    return f"{float(clip):g}"


def parse_clip(text) -> float:
    """Parse a clip value from text (or a number): a number ≥ 1, or ``inf`` / ``infinity`` / ``∞``.

    >>> parse_clip("∞"), parse_clip(" 4 ")
    (inf, 4.0)
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        return check_clip(text)
    t = str(text).strip().lower()
    if t in _INF_WORDS:
        return math.inf
    try:
        value = float(t)
    except ValueError:
        raise SpecError(f"clip must be a number ≥ 1 or 'inf', got {text!r}", expected="a number ≥ 1 or inf") from None
    return check_clip(value)


def clip_value(clip: float) -> float | str:
    """A clip for JSON and metadata: the float, or the string ``"inf"`` (JSON has no infinity)."""
    return "inf" if math.isinf(clip) else float(clip)


def check_rng(rng=None) -> np.random.Generator:
    """The one randomness convention: ``rng`` is None (fresh entropy), an int seed, or a Generator.

    >>> float(check_rng(0).uniform()) == float(np.random.default_rng(0).uniform())
    True
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int | np.integer) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise WrongType(f"rng must be None, an int seed or a numpy.random.Generator, got {type(rng).__name__}")


def check_choice(value: str, choices: Iterable[str], *, name: str) -> str:
    choices = list(choices)
    if value not in choices:
        raise SpecError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value
