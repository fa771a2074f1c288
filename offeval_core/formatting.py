"""Numbers as people read them: p-values, counts, rates and means by reward kind, clip values in text and in
file names. Pure functions (no Streamlit); the dashboard, the report and the CLI share them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from offeval_core.validation import format_clip

P_FLOOR = 1e-6
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
    """A p-value: 3 significant digits, scientific below 0.001, ``< 1e-6`` below the floor; ``undefined``
    for NaN / None (no variance, no data).

    >>> format_p(0.0432), format_p(3.2e-12, floor=1e-15), format_p(2e-19), format_p(float("nan"))
    ('0.0432', '3.2e-12', '< 1e-6', 'undefined')
    """
    if p is None or not isinstance(p, int | float | np.floating) or math.isnan(p):
        return "undefined"
    if p < floor:
        return f"< {floor:.0e}".replace("e-0", "e-")
    if p < 1e-3:
        return f"{p:.2g}".replace("e-0", "e-")
    return f"{p:.3g}"


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
        return "undefined"
    return f"{x:.2%}".replace("%", " %") if kind == "binary" else f"{x:,.4g}" if abs(x) >= 1e4 else f"{x:.4g}"


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


__all__ = ["CORRELATION_SYMBOLS", "MAX_NAMES_SHOWN", "P_FLOOR", "ascii_clip", "clip_text", "file_stem", "format_count", "format_p", "format_reward_value", "name_list",
           "reward_kind", "reward_unit", "undefined_reason"]
