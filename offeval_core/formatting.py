"""Numbers as people read them: p-values, counts, rates and means by reward kind, clip values in text and in
file names. Pure functions (no Streamlit); the dashboard, the report and the CLI share them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from offeval_core.validation import format_clip

P_FLOOR = 1e-3
SIG_DIGITS = 4
"""Numbers are shown with at most this many significant digits (counts excepted), as A/B-testing tools do."""
HOVER_NUMBER = ":.4~g"
"""The d3 format of a number in a chart's hover text (``%{y:.4~g}``): the same ≤ 4 significant digits."""
#: the symbol of each correlation coefficient, as KDD'24 Table 2 prints Pearson's r
CORRELATION_SYMBOLS = {"pearson": "r", "kendall": "τ", "spearman": "ρ"}


def clip_text(m: float) -> str:
    """``"∞"`` for m = ∞, else the number without trailing zeros (``"64"``): the display form of
    :func:`offeval_core.validation.format_clip`."""
    return format_clip(m, symbol=True)


def needs_raw_logs(what: str) -> str:
    """Why a section is missing on a moments file (each interface adds how to get the logs there).

    >>> needs_raw_logs("Clip tuning")
    'Clip tuning needs the raw logs: the input is a moments file, which holds only per-group sums.'
    """
    return f"{what} needs the raw logs: the input is a moments file, which holds only per-group sums."


def format_p(p: float | None, *, floor: float = P_FLOOR) -> str:
    """A p-value as A/B-testing tools print it: 3 significant digits, ``< 0.001`` below the floor, ``n/a`` for
    NaN / None (no variance, no data).

    >>> format_p(0.0432), format_p(0.5531), format_p(3.2e-12), format_p(float("nan"))
    ('0.0432', '0.553', '< 0.001', 'n/a')
    """
    if p is None or not isinstance(p, int | float | np.floating) or math.isnan(p):
        return "n/a"
    if p < floor:
        return f"< {floor:g}"
    return f"{p:.3g}"


def format_number(x, digits: int = SIG_DIGITS, *, signed: bool = False) -> str:
    """A measured number with at most ``digits`` significant digits: thousands separators from 10 000 on,
    scientific notation below 0.001 (a bias of 1e-17 is ``1e-17``, never seventeen zeros), ``∞`` for
    infinity, ``n/a`` for NaN / None; ``signed`` puts ``+`` before positive values.

    >>> format_number(333620.1527), format_number(0.24468), format_number(1e-17), format_number(12.0)
    ('333,600', '0.2447', '1e-17', '12')
    >>> format_number(0.0681912, signed=True), format_number(float("nan")), format_number(-float("inf"))
    ('+0.06819', 'n/a', '−∞')
    """
    if x is None or isinstance(x, bool):
        return "n/a" if x is None else str(x)
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return ("+∞" if signed else "∞") if v > 0 else "−∞"
    sign = "+" if signed and v > 0 else ""
    if v == 0:
        return "0"
    rounded = float(f"{v:.{digits}g}")
    if abs(rounded) >= 1e4:
        return f"{sign}{rounded:,.0f}"
    if abs(rounded) < 1e-3:
        return sign + f"{rounded:.{digits}g}".replace("e-0", "e-")
    return sign + f"{rounded:.{digits}g}"


def format_share(x, digits: int = 3) -> str:
    """A share in [0, 1] as a percentage with at most ``digits`` significant digits; ``n/a`` for NaN.

    >>> format_share(0.06383), format_share(1.0), format_share(0.0), format_share(float("nan"))
    ('6.38 %', '100 %', '0 %', 'n/a')
    """
    text = format_number(None if x is None else 100 * float(x), digits)
    return text if text == "n/a" else f"{text} %"


def format_coefficient(r, digits: int = 2) -> str:
    """A correlation coefficient (Pearson r, Kendall τ) with ``digits`` decimals; ``n/a`` when undefined (fewer
    than 3 points, or no spread).

    >>> format_coefficient(0.8812), format_coefficient(float("nan"))
    ('0.88', 'n/a')
    """
    if r is None or not isinstance(r, int | float | np.floating) or math.isnan(r):
        return "n/a"
    return f"{r:.{digits}f}"


def not_available(reason: str = "") -> str:
    """A value that cannot be computed, with why: ``n/a — <reason>``.

    >>> not_available("one policy only")
    'n/a — one policy only'
    """
    return f"n/a — {reason}" if reason else "n/a"


def format_count(n: float | int) -> str:
    """A count with thousands separators: ``151,188``.

    >>> format_count(75594), format_count(1e6)
    ('75,594', '1,000,000')
    """
    return f"{round(n):,}"


def reward_kind(values) -> str:
    """``binary`` for a reward that is only 0 / 1, else ``real`` (counts, watch time…).

    >>> reward_kind([0, 1, 1, 0]), reward_kind([0.0, 12.5, 3.0])
    ('binary', 'real')
    """
    v = np.unique(np.asarray(values, dtype=float))
    return "binary" if np.isin(v, (0.0, 1.0)).all() else "real"


def reward_unit(kind: str) -> str:
    """The name of a per-impression average by reward kind: a rate for 0/1 rewards, a mean otherwise."""
    return "rate per impression" if kind == "binary" else "mean per impression"


def format_reward_value(x: float, kind: str) -> str:
    """A per-impression average: a percentage for a binary reward (a rate), a number for a real one.

    >>> format_reward_value(0.0453, "binary"), format_reward_value(96.4512, "real")
    ('4.53 %', '96.45')
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format_share(x) if kind == "binary" else format_number(x)


def ascii_clip(m: float) -> str:
    """A clip value for a file name: ``m_inf`` for m = ∞, ``m_64`` otherwise.

    >>> ascii_clip(float("inf")), ascii_clip(64.0)
    ('m_inf', 'm_64')
    """
    return "m_inf" if math.isinf(m) else f"m_{m:g}"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_stem(name: str, settings: Mapping[str, object] | None = None) -> str:
    """An ASCII file name (without extension) carrying the settings, so exports never overwrite each other.

    >>> file_stem("clip_tuning", {"reward": "like", "policy": "cand 01", "D": "pbm", "m": float("inf"),
    ...                           "level": 0.99})
    'clip_tuning_like_cand_01_D-pbm_m_inf_level-0.99'
    """
    parts = [name]
    for k, v in (settings or {}).items():
        if v is None or v == "":
            continue
        if k == "m":
            parts.append(ascii_clip(float(v)))
        elif k in ("reward", "policy", "experiment"):
            parts.append(str(v))
        else:
            parts.append(f"{k}-{v:g}" if isinstance(v, float) else f"{k}-{v}")
    text = "_".join(parts).replace("∞", "inf")
    return _UNSAFE.sub("_", text).strip("_")[:150]


def undefined_reason(kind: str) -> str:
    """Why a cell has no value, said in the cell: ``undefined: …``."""
    reasons = {"variance": "undefined: no variance (every value equal)",
               "single": "undefined: one value only",
               "empty": "undefined: no sessions in this group",
               "arms": "undefined: no treatment arm"}
    return reasons.get(kind, f"undefined: {kind}")


MAX_NAMES_SHOWN = 30


def name_list(names, *, limit: int = MAX_NAMES_SHOWN, sep: str = ", ") -> str:
    """The names joined by ``sep``, the first ``limit`` of them and how many more (a message stays readable
    when a file has 10 000 columns).

    >>> name_list(["a", "b", "c"], limit=2)
    'a, b and 1 more'
    >>> name_list(["a", "b"], limit=2)  # exactly the limit: nothing is counted as more
    'a, b'
    """
    names = [str(n) for n in names]
    more = f" and {len(names) - limit:,} more" if len(names) > limit else ""
    return sep.join(names[:limit]) + more


__all__ = ["CORRELATION_SYMBOLS", "HOVER_NUMBER", "MAX_NAMES_SHOWN", "P_FLOOR", "SIG_DIGITS", "ascii_clip", "clip_text", "file_stem",
           "format_coefficient", "format_count", "format_number", "format_p", "format_reward_value", "format_share", "name_list", "not_available",
           "reward_kind", "reward_unit", "undefined_reason"]
