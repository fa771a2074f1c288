"""Strata for PieceNCIS (Gilotte Sec. 5.3): value-model strata fitted on a separate split of sessions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from offeval_core.errors import InputError
from offeval_core.importance.weights import session_labels
from offeval_core.logs import Logs
from offeval_core.validation import check_rng

__all__ = ["subset_sessions", "value_strata"]


def value_strata(logs: Logs, *, reward: str, features: Sequence[str], fit_share: float = 0.5, base: float = 2.0,
                 rng=None) -> tuple[Logs, pd.Series]:
    """Value-model strata of Gilotte Sec. 5.3 from a separate split.

    Sessions are split at random: on the fit part a value model V(x) = mean per-session reward of the
    sessions with the same ``features`` (session-level columns; unseen combinations get the overall mean)
    is fitted; the evaluation part is returned with its strata {V⁻¹([b^k, b^(k+1)))} (V = 0 is its own
    stratum). Estimate PieceNCIS on the returned logs only, so the partition is independent of them.
    """
    if not 0 < fit_share < 1:
        raise InputError(f"fit_share must be strictly between 0 and 1, got {fit_share!r}")
    if not base > 1:
        raise InputError(f"base must be > 1, got {base!r}")
    logs.check_reward(reward)
    rng = check_rng(rng)
    sess = logs.sessions[["session", "session_id"]].copy()
    for f in features:
        sess[f] = session_labels(logs, f, name="features")
    total = logs.frame.groupby("session")[reward].sum()
    sess["value"] = total.reindex(sess["session"]).to_numpy()
    fit = rng.uniform(size=len(sess)) < fit_share
    if fit.all() or not fit.any():
        raise InputError("value_strata: the random split left one side empty; use more sessions")
    feats = list(features)
    model = sess[fit].groupby(feats, observed=True)["value"].mean() if feats else None
    ev = sess[~fit].copy()
    overall = float(sess.loc[fit, "value"].mean())
    if feats:
        pred = ev.merge(model.rename("pred").reset_index(), on=feats, how="left")["pred"].fillna(overall)
    else:
        pred = pd.Series(np.full(len(ev), overall))
    v = pred.to_numpy(dtype=float)
    with np.errstate(divide="ignore"):
        k = np.where(v > 0, np.floor(np.log(np.where(v > 0, v, 1.0)) / math.log(base)), np.nan)
    labels = [("V=0" if np.isnan(kk) else f"[{base:g}^{int(kk)}, {base:g}^{int(kk) + 1})") for kk in k]
    strata = pd.Series(labels, index=ev["session_id"].to_numpy(), name="value_stratum")
    return subset_sessions(logs, ev["session"].to_numpy()), strata


def subset_sessions(logs: Logs, sessions: np.ndarray) -> Logs:
    """The logs restricted to the given session codes (codes renumbered densely)."""
    keep = np.isin(logs.frame["session"].to_numpy(), sessions)
    frame = logs.frame[keep].reset_index(drop=True)
    sess = logs.sessions[np.isin(logs.sessions["session"].to_numpy(), sessions)].reset_index(drop=True)
    codes = {old: new for new, old in enumerate(sess["session"].to_numpy())}
    frame["session"] = frame["session"].map(codes).astype(np.int64)
    sess["session"] = np.arange(len(sess), dtype=np.int64)
    return replace(logs, frame=frame, sessions=sess)

