"""The target policies of some data, their kind, the ones that are the logging policy, and the one rule for the
default target policy.

A target policy is given either by ranks (a ``rank__<policy>`` column: a deterministic ranking, evaluated by the
DCG family and by importance weights D(R(i)) / D0(i)) or by propensities (a ``target_propensity__<policy>``
column next to ``logging_propensity``: a stochastic policy, evaluated by importance weights π_t / π_p, Gilotte
et al. Sec. 3-5); ranks win when a policy has both. A target policy *is* the logging policy when it is named
like it (``production``) or shows every offline row exactly as the logging policy did (its ranks equal the
logged ranks, or its propensities the logging propensities, on every offline session): its effect over the
logging policy is 0 by construction, so it is never the default target while another policy exists.
:func:`target_policies` reads logs, moments or policy names; the command line, the "what offeval understood"
summary and the dashboard all use it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from offeval_core.arms import offline_mask, offline_rows
from offeval_core.errors import UnknownName
from offeval_core.log_schema import LOGGING_POLICY, POLICY_PREFIX, TARGET_PROPENSITY_PREFIX, Logs

__all__ = ["KINDS", "LOGGING_NAMES", "PREFERRED_TARGET", "TargetPolicies", "choose_target_policy",
           "default_target_policy", "policy_kind", "target_policies"]

KINDS = ("rank", "propensity")
LOGGING_NAMES = ("production",)
"""Policy names that mean the logging policy whatever their columns hold."""
PREFERRED_TARGET = "treatment"
"""The name of the policy that served the treatment arm by convention (the schema's ``arm`` values)."""
PROPENSITY_RTOL = 1e-9
"""Target propensities within this relative tolerance of the logging propensities copy the logging policy."""


def choose_target_policy(policies: Sequence[str], *, logging: Collection[str] = ()) -> str | None:
    """The default target policy among ``policies`` (rank and propensity policies, in file order) given the ones
    that are the logging policy: ``treatment`` when it is not the logging policy, else the first policy that is
    not, else (only logging-equivalent policies) the first policy; None without policies.

    >>> choose_target_policy(["production", "ranker_v2", "ranker_v3"], logging=["production"])
    'ranker_v2'
    >>> choose_target_policy(["production", "cand", "treatment"], logging=["production"])
    'treatment'
    >>> choose_target_policy(["production"], logging=["production"]), choose_target_policy([])
    ('production', None)
    """
    names = list(dict.fromkeys(policies))
    others = [p for p in names if p not in set(logging) and p != LOGGING_POLICY]
    if PREFERRED_TARGET in others:
        return PREFERRED_TARGET
    if others:
        return others[0]
    return names[0] if names else None


def _kind(policy: str | None, rank: Collection[str], propensity: Collection[str]) -> str | None:
    if policy is None:
        return None
    if policy in rank:
        return "rank"
    if policy in propensity:
        return "propensity"
    known = ", ".join(dict.fromkeys((*rank, *propensity))) or "none"
    raise UnknownName(f"unknown target policy {policy!r}; the data have {known}")


@dataclass(frozen=True)
class TargetPolicies:
    """The target policies of some data: ``rank`` and ``propensity`` policies (file order), those that are the
    ``logging`` policy, the ``default`` target (:func:`choose_target_policy`) and the ``reason`` for it in words."""

    rank: tuple[str, ...]
    propensity: tuple[str, ...]
    logging: tuple[str, ...]
    default: str | None
    reason: str

    @property
    def all(self) -> tuple[str, ...]:
        """Every target policy: the rank policies, then the propensity policies without ranks."""
        return tuple(dict.fromkeys((*self.rank, *self.propensity)))

    def kind(self, policy: str | None) -> str | None:
        """``rank`` or ``propensity`` (ranks win when a policy has both), the way the pages evaluate it; None
        without a policy; an UnknownName (a KeyError) naming the policies for an unknown one."""
        return _kind(policy, self.rank, self.propensity)


def _propensity_policies(logs: Logs) -> tuple[str, ...]:
    """The ``target_propensity__`` policies of logs with a ``logging_propensity`` column (their weights need it)."""
    return logs.propensity_policies if "logging_propensity" in logs.frame.columns else ()


def policy_kind(logs: Logs, policy: str | None) -> str | None:
    """The kind of one policy of ``logs`` (:meth:`TargetPolicies.kind`) without looking for the logging policy.

    >>> import pandas as pd
    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 2], "rank": [1, 1], "click": [1, 0],
    ...     "logging_propensity": [0.5, 0.5], "target_propensity__bts": [0.9, 0.1]}))
    >>> policy_kind(logs, "bts")
    'propensity'
    """
    return _kind(policy, logs.policies, _propensity_policies(logs))


def _logs_logging(logs: Logs) -> tuple[str, ...]:
    """The target policies of logs that are the logging policy: named like it, or equal to it on every offline row
    (control arm, or every session without arms): ranks equal to the logged ranks, or propensities equal to the
    logging propensities (relative tolerance :data:`PROPENSITY_RTOL`)."""
    f, sess = logs.frame, logs.sessions
    keep = np.zeros(len(sess), dtype=bool)  # by session code
    keep[sess["session"].to_numpy()] = offline_mask(sess["arm"])
    rows = keep[f["session"].to_numpy()]
    out = []
    for p in dict.fromkeys((*logs.policies, *_propensity_policies(logs))):
        if p in LOGGING_NAMES:
            same = True
        elif p in logs.policies:
            same = np.array_equal(f[POLICY_PREFIX + p].to_numpy()[rows], f["rank"].to_numpy()[rows])
        else:
            same = np.allclose(f[TARGET_PROPENSITY_PREFIX + p].to_numpy(dtype=float)[rows],
                               f["logging_propensity"].to_numpy(dtype=float)[rows], rtol=PROPENSITY_RTOL, atol=0)
        if same:
            out.append(p)
    return tuple(out)


def _moments_logging(moments) -> tuple[str, ...]:
    """The policies of moments that are the logging policy: named like it, or with a paired difference of 0 from
    the logging policy in every offline group of every metric (sums and sums of squares; groups without a
    difference do not count)."""
    off = offline_rows(moments.offline)  # the logging policy's sessions (the control arm)
    out = []
    for p in moments.grid.policies:
        rows = off[off["policy"] == p] if {"policy", "sum_diff", "m2_diff"} <= set(off.columns) else off.iloc[:0]
        diff = (rows["sum_diff"].abs() + rows["m2_diff"].abs()).dropna()
        if p in LOGGING_NAMES or (len(diff) > 0 and bool((diff == 0).all())):
            out.append(p)
    return tuple(out)


def _reason(default: str | None, logging: Sequence[str]) -> str:
    if default is None:
        return "no target policy in these data"
    if default in logging:
        return f"{default} is the logging policy, and the data hold no other target policy"
    if default == PREFERRED_TARGET:
        return f"the policy named {PREFERRED_TARGET}"
    if logging:
        return (f"no policy named {PREFERRED_TARGET}; the first policy that is not the logging policy "
                f"({', '.join(logging)} {'is' if len(logging) == 1 else 'are'})")
    return f"no policy named {PREFERRED_TARGET}; the first target policy"


def target_policies(data) -> TargetPolicies:
    """The target policies of ``data`` (:class:`~offeval_core.log_schema.Logs`, a
    :class:`~offeval_core.engine.Moments`, or a sequence of policy names, read as rank policies) with the default
    target chosen by :func:`choose_target_policy` and its reason.

    >>> t = target_policies(["production", "cand_01", "treatment"])
    >>> t.logging, t.default, t.reason
    (('production',), 'treatment', 'the policy named treatment')
    """
    if isinstance(data, Logs):
        rank, propensity, logging = tuple(data.policies), _propensity_policies(data), _logs_logging(data)
    elif hasattr(data, "grid") and hasattr(data, "offline"):
        rank, propensity, logging = tuple(data.grid.policies), (), _moments_logging(data)
    else:
        rank, propensity = tuple(dict.fromkeys(data)), ()
        logging = tuple(p for p in rank if p in LOGGING_NAMES)
    default = choose_target_policy((*rank, *propensity), logging=logging)
    return TargetPolicies(rank, propensity, logging, default, _reason(default, logging))


def default_target_policy(data) -> str | None:
    """The default target policy of logs, moments or policy names (:func:`target_policies`).

    >>> default_target_policy(["production", "ranker_v2"])
    'ranker_v2'
    """
    return target_policies(data).default
