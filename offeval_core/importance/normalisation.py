"""How the normalised importance estimators (NCIS, PieceNCIS, plug-in PointNCIS) share a normaliser: the groups
whose sessions share it and the group's ratio, defined once. The Ibis reduce
(:mod:`~offeval_core.importance.reduce`) reads them on window sums to build each session's linearised value;
the session bootstrap (:mod:`~offeval_core.importance.bootstrap`) reads them on the resampled sums. Both take
columns that support ``*``, ``/`` and comparisons (Ibis expressions or numpy arrays) and the backend's
``where(condition, value, otherwise)``. Which sessions' PointNCIS contexts are pooled, and the warning that says
how many, read the per-session sums the bootstrap reads (:func:`pooled_sessions`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from offeval_core.arms import OFFLINE_ARM, offline_rows
from offeval_core.errors import WrongType, warn_estimator

__all__ = ["CELL_KEYS", "MIN_CONTEXT_ROWS", "POOLED_CONTEXT", "group_ratio", "pooled_context", "pooled_contexts",
           "pooled_sessions", "warn_pooled_contexts"]

CELL_KEYS = ("experiment_id", "day", "arm")
"""A normaliser never crosses an (experiment, day, arm) cell: NCIS normalises per cell (exposure weights),
PieceNCIS per cell and stratum, plug-in PointNCIS per cell and context."""

POOLED_CONTEXT = "\x00pooled"
"""Context label of the PointNCIS contexts with a single logged row, pooled per cell (see :data:`MIN_CONTEXT_ROWS`)."""
MIN_CONTEXT_ROWS = 2
"""A PointNCIS plug-in context needs at least this many rows: with one row the plug-in normaliser is the
row's own capped weight and the estimate collapses to the logging value (propensity weights) or to IS
(exposure weights); such contexts share one normaliser per (experiment, day, arm) cell instead."""


def pooled_context(context_rows, exact):
    """Whether a session's PointNCIS context is pooled into its cell's shared context: fewer than
    :data:`MIN_CONTEXT_ROWS` logged rows and no exact ν (``exact`` is 0 / 1 or False / True).

    >>> import numpy as np
    >>> pooled_context(np.array([1, 2, 1]), np.array([0, 0, 1])).tolist()  # 2 rows, or an exact ν: kept
    [True, False, False]
    """
    return (context_rows < MIN_CONTEXT_ROWS) & (exact == 0)


def pooled_sessions(per: pd.DataFrame) -> np.ndarray:
    """Per session of a per-session table (:func:`~offeval_core.importance.bootstrap.session_sums`: ``m`` rows,
    ``exact``, the cell keys and ``context``): whether its PointNCIS context is pooled, counting the rows of its
    (cell, context, exactness) group as the reduce does (:func:`pooled_context`).

    Three sessions of one cell and context, one row each, the second with an exact ν: the two plug-in sessions
    hold 2 rows together (kept); alone, the first would be pooled.

    >>> per = pd.DataFrame({"experiment_id": "e", "day": 1, "arm": "control", "context": "x",
    ...                     "m": [1, 1, 1], "exact": [0, 1, 0]})
    >>> pooled_sessions(per).tolist(), pooled_sessions(per.iloc[:2]).tolist()
    ([False, False, False], [True, False])
    """
    need = ["m", "exact", *CELL_KEYS, "context"]
    if not isinstance(per, pd.DataFrame) or any(c not in per.columns for c in need):
        raise WrongType("per must be a per-session table of importance.session_sums (columns "
                        f"{', '.join(need)}), got {type(per).__name__}")
    exact = per["exact"].to_numpy() == 1
    groups = [per[k].to_numpy() for k in (*CELL_KEYS, "context")] + [exact]
    rows = pd.Series(per["m"].to_numpy(dtype=float)).groupby(groups, dropna=False).transform("sum").to_numpy()
    return pooled_context(rows, exact)


def pooled_contexts(per: pd.DataFrame, *, arm: str | None = OFFLINE_ARM) -> tuple[int, int]:
    """(sessions whose PointNCIS context is pooled, sessions) among the ``arm`` sessions of a per-session table
    (:func:`pooled_sessions`): those contexts share their (experiment, day, arm) cell's normaliser."""
    pooled = pd.Series(pooled_sessions(per), index=per.index)
    kept = offline_rows(per, arm).index
    return int(pooled.loc[kept].sum()), len(kept)


def warn_pooled_contexts(per: pd.DataFrame, *, arm: str | None = OFFLINE_ARM) -> None:
    """Warn (:class:`~offeval_core.errors.EstimatorWarning`) when some ``arm`` sessions' PointNCIS contexts are
    pooled (:func:`pooled_contexts`)."""
    pooled, total = pooled_contexts(per, arm=arm)
    if pooled:
        warn_estimator(f"PointNCIS: {pooled} of {total} sessions are in contexts with a single logged row, where "
                       "the plug-in normaliser would be the row's own capped weight (the estimate would collapse "
                       "to the logging value); they share the normaliser of their (experiment, day, arm) cell "
                       "instead, i.e. NCIS. Pass a context column that groups sessions (e.g. context='segment'; "
                       "on the command line --context segment).")


def group_ratio(big_a, big_y, big_u, big_s, big_w, *, exposure_session: bool, where):
    """R_g, the normalised value of a group of sessions from its sums: A = Σ w̄ r, Y = Σ u · s / m, U = Σ u,
    S = Σ w̄, W = Σ w (u = 1 per session or m per impression; Gilotte et al. 2018, Sec. 5.1 NCIS, 5.3
    PieceNCIS, 5.4 PointNCIS). Propensity weights, or the impression scale: R_g = A_g / Y_g. Exposure weights at the
    session scale: R_g = (A_g / U_g) / (S_g / W_g), the capped share of the weight mass S / W as normaliser
    (docs/importance.md). A group without weight (Y = 0, or S = 0) contributes 0.

    >>> import numpy as np
    >>> float(group_ratio(3.0, 4.0, 2.0, 0.0, 0.0, exposure_session=False, where=np.where))  # 3 / 4
    0.75
    >>> float(group_ratio(3.0, 0.0, 2.0, 1.5, 6.0, exposure_session=True, where=np.where))  # (3 / 2) / (1.5 / 6)
    6.0
    """
    if exposure_session:
        return where(big_s > 0, big_a * big_w / (big_u * big_s), 0.0)
    return where(big_y > 0, big_a / big_y, 0.0)
