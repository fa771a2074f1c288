"""The moment columns: what each column of a moments frame holds, and how groups of rows combine.

A moments frame (``Moments.offline`` / ``Moments.online``, the engine's per-group parts, a moments file) holds,
per group of sessions, the count ``n`` and, for each per-session quantity x,

- its sum Σx (the mean is Σx / n),
- its centred second moment M2 = Σ(x − x̄)² (the sample variance is M2 / (n − 1)),
- for pairs of quantities x, y the centred co-moment C = Σ(x − x̄)(y − ȳ).

Centred moments keep their digits where raw ones cancel: for values 10⁸ + {0, 1} the variance from M2 is exact,
while Σx² − (Σx)²/n keeps none of them. Two groups a and b combine by the pairwise formulas of Chan, Golub &
LeVeque (1979; "Algorithms for computing the sample variance", Am. Stat. 1983, Eq. 2.1):

    n = n_a + n_b,    Σx = Σx_a + Σx_b,
    M2 = M2_a + M2_b + n_a n_b / n · (x̄_a − x̄_b)²,
    C  = C_a + C_b + n_a n_b / n · (x̄_a − x̄_b)(ȳ_a − ȳ_b).

:data:`OFFLINE_ROLES` and :data:`ONLINE_ROLES` give every column's :class:`Role`: the one place that says
which sum a second moment centres on and which count a sum is over (the moments-file checks and every
pooling read them from here). Other columns are plain sums (``add``) or maxima (``max``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["MOMENTS_VERSION", "OFFLINE_ROLES", "ONLINE_ROLES", "OWN_COLUMNS", "Layout", "Role", "add_zeros", "merge", "merge_running",
           "pool", "remove_zeros", "roles_of"]


MOMENTS_VERSION = 1
"""The version of the moments the code computes: raise it with any change that alters a moment's value (the
reduce, the reading of logs, a column's meaning). The persistent moments cache (:mod:`offeval_core.moments_cache`)
keys on it, with the moments file format and a digest of the sources, so an entry of another version is never
read."""


@dataclass(frozen=True)
class Role:
    """What a moment column holds: ``count`` (sessions), ``sum`` (Σx over the sessions counted by the column
    ``of[0]``), ``m2`` (Σ(x − x̄)² of the quantity whose sum is ``of[0]``), ``co`` (Σ(x − x̄)(y − ȳ) of the
    quantities whose sums are ``of[0]`` and ``of[1]``), ``add`` (a plain sum) or ``max`` (a maximum)."""

    kind: str
    of: tuple[str, ...] = ()


def _count() -> Role:
    return Role("count")


def _sum(count: str = "n") -> Role:
    return Role("sum", (count,))


def _m2(total: str) -> Role:
    return Role("m2", (total,))


def _co(x: str, y: str) -> Role:
    return Role("co", (x, y))


OFFLINE_ROLES: dict[str, Role] = {
    "n": _count(),
    # x: the estimator's per-session value (DCG, nDCG, or an importance estimator's numerator)
    "sum": _sum(), "m2": _m2("sum"),
    # y: its per-session denominator (iDCG for DCG rows, so pnDCG = Σx / Σy; the weights of SNIPS / NCIS)
    "den_sum": _sum(), "den_m2": _m2("den_sum"), "co_den": _co("sum", "den_sum"),
    # d = x_target − x_logging on the same sessions (paired effects; empty on the logging policy's rows)
    "sum_diff": _sum(), "m2_diff": _m2("sum_diff"), "co_diff_den": _co("sum_diff", "den_sum"),
    # importance rows: the logging policy's ratio c / u on the same sessions, and its co-moments with x, y
    "ref_sum": _sum(), "ref_m2": _m2("ref_sum"), "ref_den_sum": _sum(), "ref_den_m2": _m2("ref_den_sum"),
    "ref_co_den": _co("ref_sum", "ref_den_sum"),
    "co_ref": _co("sum", "ref_sum"), "co_ref_den": _co("sum", "ref_den_sum"),
    "den_co_ref": _co("den_sum", "ref_sum"), "den_co_ref_den": _co("den_sum", "ref_den_sum"),
    # weight diagnostics (sums over logged rows, not per-session moments)
    "w_rows": Role("add"), "w_sum": Role("add"), "w_sumsq": Role("add"), "wc_sum": Role("add"),
    "wc_sumsq": Role("add"), "n_exact": Role("add"), "w_max": Role("max"),
}
"""Roles of the columns of ``Moments.offline`` (and of a moments file's offline rows)."""

OWN_COLUMNS = ("n", "sum", "m2", "den_sum", "den_m2", "co_den")
"""The offline columns every row fills; the others (paired differences, the importance rows' logging
reference and weight diagnostics) are empty (NaN) on the logging policy's own rows."""

ONLINE_ROLES: dict[str, Role] = {"n": _count(), "sum": _sum(), "m2": _m2("sum")}
"""Roles of the columns of ``Moments.online``: the per-session observed reward of each group."""


def roles_of(columns: Sequence[str], roles: Mapping[str, Role] = OFFLINE_ROLES) -> dict[str, Role]:
    """The roles of those ``columns`` that have one, in ``roles``' order."""
    have = set(columns)
    return {c: r for c, r in roles.items() if c in have}


class Layout:
    """Where each role's columns sit in an array whose last axis holds ``columns`` (built once per column
    list; :func:`merge`, :func:`add_zeros` and :func:`remove_zeros` take it)."""

    def __init__(self, columns: Sequence[str], roles: Mapping[str, Role] = OFFLINE_ROLES):
        self.columns = tuple(columns)
        pos = {c: i for i, c in enumerate(self.columns)}
        for c in self.columns:
            if c not in roles:
                raise ValueError(f"column {c!r} has no moment role")
        kind = {c: roles[c].kind for c in self.columns}
        self.counts = np.array([pos[c] for c in self.columns if kind[c] == "count"], dtype=np.intp)
        self.maxed = np.array([pos[c] for c in self.columns if kind[c] == "max"], dtype=np.intp)
        sums = [c for c in self.columns if kind[c] == "sum"]
        self.sums = np.array([pos[c] for c in sums], dtype=np.intp)
        self.sum_counts = np.array([pos[roles[c].of[0]] for c in sums], dtype=np.intp)
        seconds = [c for c in self.columns if kind[c] in ("m2", "co")]
        for c in seconds:
            for total in roles[c].of:
                if total not in pos or kind[total] != "sum":
                    raise ValueError(f"moment column {c!r} needs the sum column {total!r}")
        self.second = np.array([pos[c] for c in seconds], dtype=np.intp)
        self.x = np.array([sums.index(roles[c].of[0]) for c in seconds], dtype=np.intp)  # within ``sums``
        self.y = np.array([sums.index(roles[c].of[-1]) for c in seconds], dtype=np.intp)
        self.count = np.array([pos[roles[roles[c].of[0]].of[0]] for c in seconds], dtype=np.intp)
        within = {int(c): i for i, c in enumerate(self.counts)}  # positions within ``counts``
        self.sum_count_at = np.array([within[int(c)] for c in self.sum_counts], dtype=np.intp)
        self.count_at = np.array([within[int(c)] for c in self.count], dtype=np.intp)

    def means(self, values: np.ndarray) -> np.ndarray:
        """Σx / n of every sum column (0 where n = 0: counts are whole numbers and an empty group's sums are 0,
        so dividing by max(n, 1) is exact)."""
        n = np.maximum(values[..., self.counts], 1.0)
        return values[..., self.sums] / n[..., self.sum_count_at]

    def between(self, na: np.ndarray, nb: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
        """n_a n_b / (n_a + n_b) · dx · dy for every second-moment column, from the counts ``na``, ``nb`` (the
        count columns, in ``counts`` order) and the mean differences of its x and y."""
        with np.errstate(over="ignore", invalid="ignore"):
            return _weight(na, nb)[..., self.count_at] * dx * dy


def _weight(na: np.ndarray, nb: np.ndarray) -> np.ndarray:
    """n_a n_b / (n_a + n_b), 0 when either is 0 (whole-number counts: the numerator is then 0)."""
    return na * nb / np.maximum(na + nb, 1.0)


def merge(a: np.ndarray, b: np.ndarray, layout: Layout) -> np.ndarray:
    """The moments of the union of two disjoint groups of sessions, row by row (Chan et al.'s pairwise update).

    ``a`` and ``b``: arrays of the same shape whose last axis holds ``layout.columns``.

    >>> cols = Layout(["n", "sum", "m2"], ONLINE_ROLES)   # values (1, 2) and (10, 11, 12): Σ(x − 7.2)² = 110.8
    >>> merge(np.array([2.0, 3.0, 0.5]), np.array([3.0, 33.0, 2.0]), cols).round(9).tolist()
    [5.0, 36.0, 110.8]
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = a + b
    if len(layout.maxed):
        out[..., layout.maxed] = np.fmax(a[..., layout.maxed], b[..., layout.maxed])
    if len(layout.second):
        d = layout.means(a) - layout.means(b)
        out[..., layout.second] += layout.between(a[..., layout.counts], b[..., layout.counts], d[..., layout.x],
                                                  d[..., layout.y])
    return out


def merge_running(parts: np.ndarray, layout: Layout) -> np.ndarray:
    """The running merge along the first axis: row b holds the moments of parts 0…b (what :func:`merge`
    applied b times gives, in one vectorised pass). The between term of step b needs only the running
    means before it, which come from running sums and counts.

    >>> cols = Layout(["n", "sum", "m2"], ONLINE_ROLES)   # (1, 2), (10, 11, 12), (4): M2 of all six 119 1/3
    >>> merge_running(np.array([[2.0, 3.0, 0.5], [3.0, 33.0, 2.0], [1.0, 4.0, 0.0]]), cols).round(6).tolist()
    [[2.0, 3.0, 0.5], [5.0, 36.0, 110.8], [6.0, 40.0, 119.333333]]
    """
    parts = np.asarray(parts, dtype=np.float64)
    out = np.cumsum(parts, axis=0)
    if len(layout.maxed):
        out[..., layout.maxed] = np.fmax.accumulate(parts[..., layout.maxed], axis=0)
    if len(layout.second) and len(parts) > 1:
        width = parts.shape[-1]
        before = out[:-1].reshape(-1, width)  # the running moments up to b − 1 (counts, sums: running sums)
        after = parts[1:].reshape(-1, width)
        live = np.flatnonzero((before[:, layout.counts] > 0).any(axis=1) & (after[:, layout.counts] > 0).any(axis=1))
        a, b = before[live], after[live]  # only cells where both sides hold sessions have a between term
        d = layout.means(a) - layout.means(b)
        between = np.zeros((len(before), len(layout.second)))
        between[live] = layout.between(a[:, layout.counts], b[:, layout.counts], d[:, layout.x], d[:, layout.y])
        between = between.reshape(len(parts) - 1, *parts.shape[1:-1], len(layout.second))  # explicit: 0 groups
        out[1:, ..., layout.second] += np.cumsum(between, axis=0)
    return out


def add_zeros(values: np.ndarray, zeros, layout: Layout) -> np.ndarray:
    """``values`` merged with ``zeros`` sessions (per row) whose every quantity is 0 (sessions without a
    reward): counts grow by ``zeros``, sums stay, second moments gain n z / (n + z) · x̄ ȳ.

    >>> add_zeros(np.array([2.0, 3.0, 0.5]), 2.0, Layout(["n", "sum", "m2"], ONLINE_ROLES)).tolist()
    [4.0, 3.0, 2.75]
    """
    values = np.asarray(values, dtype=np.float64)
    z = np.asarray(zeros, dtype=np.float64)[..., None]
    out = values.copy()
    out[..., layout.counts] += z
    if len(layout.second):
        m = layout.means(values)
        out[..., layout.second] += layout.between(values[..., layout.counts], z, m[..., layout.x], m[..., layout.y])
    return out


def remove_zeros(values: np.ndarray, zeros, layout: Layout) -> np.ndarray:
    """The inverse of :func:`add_zeros`: ``values`` (moments of sessions of which ``zeros`` have every
    quantity 0) without those sessions, row by row. Each second moment loses n_a z / n · x̄_a ȳ_a (the
    merge's between term): exact when ``zeros`` is 0, else exact up to a rounding of that term, which is
    small for bounded values (nDCG, in [0, 1]).

    >>> remove_zeros(np.array([4.0, 3.0, 2.75]), 2.0, Layout(["n", "sum", "m2"], ONLINE_ROLES)).tolist()
    [2.0, 3.0, 0.5]
    """
    values = np.asarray(values, dtype=np.float64)
    z = np.asarray(zeros, dtype=np.float64)[..., None]
    out = values.copy()
    out[..., layout.counts] -= z
    if len(layout.second):
        m = layout.means(out)
        out[..., layout.second] -= layout.between(out[..., layout.counts], z, m[..., layout.x], m[..., layout.y])
    return out


def _group_sum(values: np.ndarray, ids: np.ndarray, n_groups: int) -> np.ndarray:
    out = np.empty((n_groups, values.shape[1]), dtype=np.float64)
    for j in range(values.shape[1]):
        out[:, j] = np.bincount(ids, weights=values[:, j], minlength=n_groups)
    return out


def pool(frame: pd.DataFrame, by: Sequence[str] = (), roles: Mapping[str, Role] = OFFLINE_ROLES) -> pd.DataFrame:
    """One row per group of ``by`` (all rows when empty) with the pooled moments of the rows in it.

    Counts, sums and ``add`` columns add up; second moments add the within-row parts and the between-row
    spread Σ_g n_g (x̄_g − x̄)(ȳ_g − ȳ) (the many-group form of :func:`merge`). Empty cells (the paired
    columns of the logging policy's rows) count as 0, as in a plain sum.

    >>> df = pd.DataFrame({"g": ["a", "b"], "n": [2, 3], "sum": [3.0, 33.0], "m2": [0.5, 2.0]})
    >>> pool(df, roles=ONLINE_ROLES)[["n", "sum", "m2"]].iloc[0].tolist()   # values 1, 2, 10, 11, 12
    [5.0, 36.0, 110.8]
    """
    by = list(by)
    present = roles_of(frame.columns, roles)
    columns = list(present)
    layout = Layout(columns, present)
    raw = frame[columns].to_numpy(dtype=np.float64, na_value=np.nan)
    values = np.where(np.isnan(raw), 0.0, raw)  # empty cells count as 0; ±inf stays and spreads
    if by:
        grouped = frame.groupby(by, sort=True, observed=True)
        ids = grouped.ngroup().to_numpy()
        keys = grouped.size().index.to_frame(index=False)
        keep = ids >= 0
        values, ids, raw = values[keep], ids[keep], raw[keep]
    else:
        ids = np.zeros(len(values), dtype=np.intp)
        keys = pd.DataFrame(index=range(1))
    n_groups = len(keys)
    out = _group_sum(values, ids, n_groups)
    if len(layout.maxed):
        mx = np.full((n_groups, len(layout.maxed)), np.nan)
        np.fmax.at(mx, ids, raw[:, layout.maxed])
        out[:, layout.maxed] = mx
    if len(layout.second) and len(values):
        d = layout.means(values) - layout.means(out)[ids]
        with np.errstate(over="ignore", invalid="ignore"):
            spread = values[:, layout.counts][:, layout.count_at] * d[:, layout.x] * d[:, layout.y]
        out[:, layout.second] += _group_sum(spread, ids, n_groups)
    result = pd.DataFrame(out, columns=columns)
    for c in columns:
        if present[c].kind == "count" or pd.api.types.is_integer_dtype(frame[c].dtype):
            result[c] = result[c].round().astype(np.int64)
    return pd.concat([keys.reset_index(drop=True), result], axis=1)
