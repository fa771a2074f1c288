"""The rule for offline rows: offline estimates use the logging policy's sessions, i.e. the control arm
when the data have one, else every session (logs without arms are all logged by the logging policy).

Defined once here and used by the estimators, the importance family, the analyses and the PBM learner.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from offeval_core.errors import UnknownName

__all__ = ["OFFLINE_ARM", "offline_mask", "offline_rows"]

OFFLINE_ARM = "control"


def offline_mask(arms, arm: str | None = OFFLINE_ARM) -> np.ndarray:
    """Boolean mask of the offline rows: ``arms == arm`` when any row is in ``arm``; all rows when ``arm`` is
    None, or when it is the control arm and no row is (logs without a control arm are all the logging
    policy's). Any other arm that no row is in is an :class:`~offeval_core.errors.UnknownName`: estimates
    asked of the treatment arm never silently come from the control arm. Labels compare as given (the number 1
    is not the arm ``"1"``); a missing label is in no arm, whatever the column's dtype.

    >>> offline_mask(["control", "treatment"]).tolist(), offline_mask(["a", "b"]).tolist()
    ([True, False], [True, True])
    """
    values = arms if isinstance(arms, pd.Series) else pd.Series(np.asarray(arms, dtype=object))
    if arm is None:
        return np.ones(len(values), dtype=bool)
    # (a missing label, pd.NA in a nullable column, is in no arm)
    mask = (values == arm).fillna(False).to_numpy(dtype=bool)
    if mask.any():
        return mask
    if arm != OFFLINE_ARM and len(values):
        raise UnknownName(f"no row is in the arm {arm!r}: the {len(values):,} rows are in other arms "
                          f"(arm={OFFLINE_ARM!r} reads the logging policy's rows, arm=None every row)")
    return np.ones(len(values), dtype=bool)


def offline_rows(frame: pd.DataFrame, arm: str | None = OFFLINE_ARM) -> pd.DataFrame:
    """The rows of ``frame`` (with an ``arm`` column, or none) that offline estimates use."""
    if arm is None or "arm" not in frame.columns:
        return frame
    mask = offline_mask(frame["arm"], arm)
    return frame if mask.all() else frame[mask]
