"""Discount (position-bias) models: rank → P(V = 1 | R = rank), vectorised over rank arrays.

KDD'24 Sec. 4 (Asm. 2, Eq. 6): the exposure of an item is the probability that the user views its rank.
A cut-off ``@n`` sets P = 0 beyond rank n, which replaces DCG@n (KDD'24 Sec. 4, after Eq. 6).

Specs (the same strings on the command line, in the dashboard and in the URL):
``log2`` · ``reciprocal`` · ``exponential:0.9`` · ``pbm`` (learnt from the logs) · ``table:FILE.csv`` —
each optionally followed by ``@n``, e.g. ``log2@10``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from offeval_core.arms import offline_rows

__all__ = [
    "KINDS", "PBM_FLOOR", "DiscountModel", "learn_pbm", "parse_discount", "read_discount_table",
    "survival_curve", "survival_from_counts",
]

PBM_FLOOR = 1e-4
"""Default floor of the learnt position-bias curve: 1 / P(V | R) is then at most 10 000."""

KINDS = ("log2", "reciprocal", "exponential", "pbm", "table")


@dataclass(frozen=True)
class DiscountModel:
    """A position-bias model. ``values`` holds the curve for ranks 1..len(values) of table-like models.

    For ``pbm`` ranks beyond the table get the floor; for ``table`` they get 0 (never viewed).
    """

    kind: str
    param: float | None = None
    cutoff: int | None = None
    values: tuple[float, ...] | None = None
    source: str | None = None

    @property
    def spec(self) -> str:
        base = {
            "exponential": f"exponential:{self.param:g}" if self.param is not None else "exponential",
            "table": f"table:{self.source}",
        }.get(self.kind, self.kind)
        return base + (f"@{self.cutoff}" if self.cutoff is not None else "")

    @property
    def label(self) -> str:
        """Human label for legends: e.g. ``1/log2(r+1)``."""
        base = {
            "log2": "1/log₂(r+1)",
            "reciprocal": "1/r",
            "exponential": f"{self.param:g}^(r−1)" if self.param is not None else "p^(r−1)",
            "pbm": "learnt PBM (session survival)",
            "table": f"table {Path(self.source or '').name}",
        }[self.kind]
        return base + (f", cut at {self.cutoff}" if self.cutoff is not None else "")

    def __call__(self, ranks) -> np.ndarray:
        """P(V = 1 | R = r) for an array of 1-based ranks (ranks < 1, e.g. -1 = not shown, give 0).

        >>> round(float(parse_discount("log2")(np.array([3]))[0]), 4)  # 1 / log2(4) = 0.5
        0.5
        """
        r = np.asarray(ranks, dtype=np.float64)
        valid = r >= 1
        rr = np.where(valid, r, 1.0)
        if self.kind == "log2":
            out = 1.0 / np.log2(rr + 1.0)
        elif self.kind == "reciprocal":
            out = 1.0 / rr
        elif self.kind == "exponential":
            out = np.power(self.param, rr - 1.0)
        else:
            table = np.asarray(self.values, dtype=np.float64)
            idx = rr.astype(np.int64) - 1
            inside = idx < len(table)
            beyond = self.param if self.kind == "pbm" else 0.0  # pbm: no session reaches it → floor
            out = np.where(inside, table[np.minimum(idx, len(table) - 1)], beyond)
        if self.cutoff is not None:
            out = np.where(rr <= self.cutoff, out, 0.0)
        return np.where(valid, out, 0.0)

    def table(self, max_rank: int) -> np.ndarray:
        """The curve for ranks 1..max_rank as an array (index 0 = rank 1)."""
        return self(np.arange(1, max_rank + 1))


def parse_discount(spec: str, *, logs=None, floor: float = PBM_FLOOR) -> DiscountModel:
    """Build a discount model from its spec string.

    ``pbm`` is learnt from ``logs`` (see :func:`learn_pbm`), so it needs them.

    >>> parse_discount("exponential:0.8@3")(np.array([1, 2, 3, 4])).round(2).tolist()
    [1.0, 0.8, 0.64, 0.0]
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(
            f"discount must be a spec like 'log2', 'reciprocal', 'exponential:0.9', 'pbm', "
            f"'table:FILE.csv' (optionally '@n'), got {spec!r}"
        )
    text = spec.strip()
    cutoff = None
    match = re.fullmatch(r"(.*)@([^@/]*)", text)
    if match:
        text, cut = match.group(1), match.group(2)
        if not cut.isdigit() or int(cut) < 1:
            raise ValueError(f"discount cut-off must be a positive integer after '@', got {spec!r}")
        cutoff = int(cut)
    kind, _, arg = text.partition(":")
    kind = kind.strip().lower()
    if kind == "log2" and not arg:
        return DiscountModel("log2", cutoff=cutoff)
    if kind == "reciprocal" and not arg:
        return DiscountModel("reciprocal", cutoff=cutoff)
    if kind == "exponential":
        try:
            p = float(arg)
        except ValueError:
            raise ValueError(f"exponential discount needs a parameter p in (0, 1], e.g. 'exponential:0.9', got {spec!r}") from None
        if not 0 < p <= 1:
            raise ValueError(f"exponential discount parameter must be in (0, 1], got {p!r} in {spec!r}")
        return DiscountModel("exponential", param=p, cutoff=cutoff)
    if kind == "pbm" and not arg:
        if logs is None:
            raise ValueError("discount 'pbm' is learnt from the logs, so logs must be given")
        curve = learn_pbm(logs, floor=floor)
        return DiscountModel("pbm", cutoff=cutoff, values=tuple(curve.tolist()), param=floor)
    if kind == "table" and arg:
        return DiscountModel("table", cutoff=cutoff, values=tuple(read_discount_table(arg).tolist()), source=arg)
    raise ValueError(
        f"unknown discount {spec!r}; expected one of 'log2', 'reciprocal', 'exponential:p', 'pbm', "
        "'table:FILE.csv', optionally followed by a cut-off '@n' (e.g. 'log2@10')"
    )


def learn_pbm(logs, *, floor: float = PBM_FLOOR, arm: str | None = "control") -> np.ndarray:
    """Learn P̂(V = 1 | R = r) as the survival curve of session lengths, floored.

    With only viewed items logged, a session that stops at rank t has rows for ranks 1..t, so the
    share of sessions reaching rank r estimates P(V | R = r) (DESIGN.md "Discount models"; KDD'24 Asm. 2).
    The curve is non-increasing by construction; values below ``floor`` are raised to it so importance
    weights 1 / P̂ stay finite (≤ 1 / floor). Estimated on the logging policy's sessions
    (``arm == "control"``) when the logs have a control arm, else on all sessions.

    >>> import pandas as pd
    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [0, 1, 0]}))
    >>> learn_pbm(logs, floor=0.01).tolist()  # both sessions reach rank 1, one of two reaches rank 2
    [1.0, 0.5]
    """
    if not 0 < floor <= 1:
        raise ValueError(f"floor must be in (0, 1], got {floor!r}")
    sessions = logs.sessions
    sessions = offline_rows(sessions, arm)
    lengths = sessions["length"].to_numpy()
    return survival_curve(lengths, floor=floor)


def survival_curve(lengths: np.ndarray, *, floor: float = PBM_FLOOR) -> np.ndarray:
    """Share of sessions with length ≥ r for r = 1..max(lengths), floored at ``floor``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        raise ValueError("cannot learn a position-bias curve from zero sessions")
    return survival_from_counts(np.bincount(lengths, minlength=int(lengths.max()) + 1)[1:], floor=floor)


def survival_from_counts(counts: np.ndarray, *, floor: float = PBM_FLOOR) -> np.ndarray:
    """The floored survival curve from ``counts[r - 1]`` = number of sessions of length r.

    >>> survival_from_counts(np.array([1, 1]), floor=0.01).tolist()  # lengths 1 and 2
    [1.0, 0.5]
    """
    counts = np.asarray(counts, dtype=np.int64)
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        raise ValueError("cannot learn a position-bias curve from zero sessions")
    counts = counts[: nonzero[-1] + 1]
    reach = counts[::-1].cumsum()[::-1] / counts.sum()
    return np.maximum(reach, floor)


def read_discount_table(path: str) -> np.ndarray:
    """Read a (rank, probability) CSV into an array for ranks 1..max; missing ranks are an error."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"discount table {path}: no such file")
    df = pd.read_csv(p)
    cols = [c.lower() for c in df.columns]
    if "rank" not in cols or "probability" not in cols:
        raise ValueError(
            f"discount table {path} must have columns 'rank' and 'probability', found {', '.join(df.columns)}"
        )
    df.columns = cols
    ranks = pd.to_numeric(df["rank"], errors="coerce").to_numpy()
    probs = pd.to_numeric(df["probability"], errors="coerce").to_numpy()
    n = len(df)
    if n == 0 or np.isnan(ranks).any() or (np.sort(ranks) != np.arange(1, n + 1)).any():
        raise ValueError(f"discount table {path}: column 'rank' must list every rank 1..n exactly once")
    bad = np.flatnonzero(~((probs >= 0) & (probs <= 1)))
    if len(bad):
        raise ValueError(
            f"discount table {path}: column 'probability' must be in [0, 1]; rows {', '.join(str(i + 1) for i in bad[:5])} are not"
        )
    out = np.empty(n)
    out[ranks.astype(int) - 1] = probs
    return out

