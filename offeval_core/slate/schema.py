"""Slate logs as flat, session-sorted numpy arrays: one row per (session, slot) of the logged slate.

The slate estimators read, per row, the reward and up to four propensities of the logged item at its slot:

* ``logging_propensity`` / ``target_propensity__<p>``: the item-position marginal π(a at slot k | x);
* ``logging_conditional_propensity`` / ``target_conditional_propensity__<p>``: the probability of the item
  at slot k given the items above it, π(a_k | x, a_1..a_{k-1}) (factorisable policies).

Rows are kept in (session, slot) order; ``starts`` indexes each session's first row. Slots must be
1, 2, …, L within a session for the estimators whose weight is a product over the slots above (RIPS,
SIPS, cascade-DR): a product over a slot that is not logged cannot be formed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.errors import InputError, UnknownName
from offeval_core.log_checks import first_problem
from offeval_core.log_rules import column_rules
from offeval_core.logs import TARGET_CONDITIONAL_PREFIX, TARGET_PROPENSITY_PREFIX, Logs

__all__ = [
    "LOGGING_CONDITIONAL", "LOGGING_MARGINAL", "SlateData", "from_arrays", "from_logs", "require",
]


LOGGING_MARGINAL = "logging_propensity"
LOGGING_CONDITIONAL = "logging_conditional_propensity"


@dataclass(frozen=True, eq=False)
class SlateData:
    """Slate logs of one reward and one target policy, rows sorted by (session, slot).

    ``session`` holds dense codes 0..n_sessions-1; propensity arrays are None when the logs lack them;
    ``item`` is an int64 code per row (or None); ``contexts`` is an optional per-session frame (e.g.
    ``segment``) used for grouping and by the adaptive estimator.
    """

    session: np.ndarray
    slot: np.ndarray
    reward: np.ndarray
    logging_marginal: np.ndarray | None = None
    target_marginal: np.ndarray | None = None
    logging_conditional: np.ndarray | None = None
    target_conditional: np.ndarray | None = None
    item: np.ndarray | None = None
    contexts: pd.DataFrame | None = None
    source: str = "<arrays>"

    @property
    def n_rows(self) -> int:
        return len(self.session)

    @property
    def n_sessions(self) -> int:
        return int(self.session[-1]) + 1 if len(self.session) else 0

    @property
    def starts(self) -> np.ndarray:
        """Index of each session's first row."""
        return np.flatnonzero(np.r_[True, self.session[1:] != self.session[:-1]])

    @property
    def position(self) -> np.ndarray:
        """0-based position of each row within its session."""
        starts = self.starts
        return np.arange(self.n_rows) - np.repeat(starts, np.diff(np.r_[starts, self.n_rows]))

    @property
    def n_slots(self) -> int:
        return int(self.slot.max()) if len(self.slot) else 0

    def subset(self, sessions: np.ndarray) -> SlateData:
        """The rows of the given session codes (boolean mask over sessions or an index array), re-coded."""
        keep_s = np.zeros(self.n_sessions, dtype=bool)
        keep_s[np.asarray(sessions)] = True
        rows = keep_s[self.session]
        new_code = np.cumsum(keep_s) - 1
        pick = (lambda a: None if a is None else a[rows])  # noqa: E731
        ctx = None if self.contexts is None else self.contexts.loc[keep_s].reset_index(drop=True)
        return SlateData(new_code[self.session[rows]], self.slot[rows], self.reward[rows],
                         pick(self.logging_marginal), pick(self.target_marginal), pick(self.logging_conditional),
                         pick(self.target_conditional), pick(self.item), ctx, self.source)


def from_arrays(session, slot, reward, *, logging_marginal=None, target_marginal=None, logging_conditional=None,
                target_conditional=None, item=None, contexts: pd.DataFrame | None = None,
                source: str = "<arrays>") -> SlateData:
    """Build :class:`SlateData` from per-row arrays (any order); sessions are re-coded densely."""
    session = np.asarray(session)
    given = {"reward": reward, "logging_marginal": logging_marginal, "target_marginal": target_marginal,
             "logging_conditional": logging_conditional, "target_conditional": target_conditional}
    _check_arrays(len(session), {"slot": slot, "item": item, **given}, source)
    codes, _ = pd.factorize(session, sort=True)
    slot = np.asarray(slot, dtype=np.int64)
    order = np.lexsort((slot, codes))
    take = (lambda a: None if a is None else np.asarray(a, dtype=np.float64)[order])  # noqa: E731
    data = SlateData(codes[order].astype(np.int64), slot[order], np.asarray(reward, dtype=np.float64)[order],
                     take(logging_marginal), take(target_marginal), take(logging_conditional),
                     take(target_conditional), None if item is None else np.asarray(item)[order], contexts, source)
    _check_rows(data)
    return data


def from_logs(logs: Logs, *, reward: str, policy: str, arm: str | None = "control") -> SlateData:
    """The slate arrays of validated logs for one reward and target policy (control-arm sessions by default).

    Raises :class:`UnknownName` when the logs have no propensity column for ``policy``.
    """
    logs.check_reward(reward)
    f = logs.frame
    cols = {"target_marginal": TARGET_PROPENSITY_PREFIX + policy,
            "target_conditional": TARGET_CONDITIONAL_PREFIX + policy}
    if not any(c in f.columns for c in cols.values()):
        have = sorted({c.split("__", 1)[1] for c in f.columns
                       if c.startswith((TARGET_PROPENSITY_PREFIX, TARGET_CONDITIONAL_PREFIX))})
        raise UnknownName(f"unknown policy {policy!r}: the logs {logs.source} have neither "
                          f"'{cols['target_marginal']}' nor '{cols['target_conditional']}' "
                          f"(policies with propensities: {', '.join(have) or 'none'})",
                          source=logs.source, column=cols["target_marginal"])
    if arm is not None:
        keep = (f["arm"] == arm).to_numpy()
        f = f.loc[keep]
        if not len(f):
            raise InputError(f"{logs.source}: no sessions in the {arm!r} arm to evaluate on", source=logs.source)
    get = (lambda c: f[c].to_numpy(dtype=np.float64) if c in f.columns else None)  # noqa: E731
    item = pd.factorize(f["item_id"], sort=True)[0] if "item_id" in f.columns else None
    sess = f["session"].to_numpy()
    ctx_cols = [c for c in ("experiment_id", "day", "segment") if c in f.columns]
    first = np.flatnonzero(np.r_[True, sess[1:] != sess[:-1]])
    contexts = f.iloc[first][ctx_cols].reset_index(drop=True) if ctx_cols else None
    return from_arrays(sess, f["rank"].to_numpy(), f[reward].to_numpy(),
                       logging_marginal=get(LOGGING_MARGINAL), target_marginal=get(cols["target_marginal"]),
                       logging_conditional=get(LOGGING_CONDITIONAL),
                       target_conditional=get(cols["target_conditional"]), item=item, contexts=contexts,
                       source=logs.source)


# the rule of each value array: the one read_logs applies to the column it comes from
_ROLES = {"reward": "reward", "logging_marginal": "logging_propensity", "logging_conditional": "logging_propensity",
          "target_marginal": "target_propensity", "target_conditional": "target_propensity"}


def _check_arrays(n: int, arrays: dict, source: str) -> None:
    """Every given array has one value per row, and the rewards and propensities pass the rules
    :func:`~offeval_core.logs.read_logs` checks their columns by (rewards finite and ≥ 0, logging
    propensities in (0, 1], target propensities in [0, 1]); raises :class:`InputError` naming the argument,
    the first offending values and rows."""
    for name, a in arrays.items():
        if a is not None and (np.ndim(a) != 1 or len(a) != n):
            raise InputError(f"{source}: '{name}' must hold one value per row ({n:,} rows, as 'session'), "
                             f"got {np.shape(a)}", source=source, column=name)
    for name, role in _ROLES.items():
        if arrays[name] is not None:
            problem = first_problem(column_rules(role, name, pd.Series(np.asarray(arrays[name]))))
            if problem is not None:
                raise InputError(f"{source}: {problem}", source=source, column=name)


def _check_rows(data: SlateData) -> None:
    if data.n_rows == 0:
        raise InputError(f"{data.source}: no rows to evaluate", source=data.source)
    dup = np.flatnonzero((data.session[1:] == data.session[:-1]) & (data.slot[1:] == data.slot[:-1]))
    if len(dup):
        raise InputError(f"{data.source}: slot {int(data.slot[dup[0]])} appears twice in one session",
                         source=data.source, column="rank")
    if (data.slot < 1).any():
        raise InputError(f"{data.source}: slots must be ≥ 1", source=data.source, column="rank")


def require(data: SlateData, *, marginal: bool = False, conditional: bool = False, contiguous: bool = False,
            estimator: str = "") -> None:
    """Check the columns and the slot layout an estimator needs (one validator for every estimator)."""
    need = []
    if marginal:
        need += [("logging_marginal", LOGGING_MARGINAL), ("target_marginal", TARGET_PROPENSITY_PREFIX + "<policy>")]
    if conditional:
        need += [("logging_conditional", LOGGING_CONDITIONAL),
                 ("target_conditional", TARGET_CONDITIONAL_PREFIX + "<policy>")]
    missing = [col for attr, col in need if getattr(data, attr) is None]
    if missing:
        raise UnknownName(f"{data.source}: estimator {estimator} needs the column(s) {', '.join(missing)}",
                          source=data.source, column=missing[0])
    if contiguous:
        bad = np.flatnonzero(data.slot != data.position + 1)
        if len(bad):
            s = int(data.session[bad[0]])
            raise InputError(f"{data.source}: estimator {estimator} multiplies the conditional ratios of the slots "
                             f"above each row, so every session must log slots 1, 2, …, L; session #{s + 1} "
                             f"lacks slot {int(data.position[bad[0]] + 1)}",
                             source=data.source, column="rank", expected="slots 1..L in every session")
