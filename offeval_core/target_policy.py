"""The default target policy: never the logging policy when another policy exists.

A file's target policies are its ``rank__<p>`` columns (rank policies) and ``target_propensity__<p>`` columns
(propensity policies). One of them may be the logging policy itself: the one named ``production``, or the
one whose ranks equal the logged ranks (whose propensities equal the logging propensities) on every
offline row. Estimating it against the logging policy gives an effect of exactly 0, which is no default.
The rule (:func:`choose_target_policy`): ``treatment`` when it exists and is not the logging policy, else the
first policy that is not the logging policy, else (only logging-equivalent policies) the first policy.
:func:`target_policies` applies it to logs or moments; the command line and the dashboard both use it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from offeval_core.arms import offline_mask, offline_rows
from offeval_core.log_schema import LOGGING_POLICY, POLICY_PREFIX, TARGET_PROPENSITY_PREFIX, Logs

__all__ = ["LOGGING_NAMES", "TargetPolicies", "choose_target_policy", "default_target_policy", "target_policies"]

LOGGING_NAMES = ("production",)
"""Policy names that mean the logging policy whatever their columns hold."""

PREFERRED = "treatment"


def choose_target_policy(policies: Sequence[str], *, logging: Collection[str] = ()) -> str | None:
    """The default target policy among ``policies`` (rank and propensity policies, in file order), given the
    ones that are the logging policy.

    >>> choose_target_policy(["production", "ranker_v2", "treatment"], logging=["production"])
    'treatment'
    >>> choose_target_policy(["current", "ranker_v2"], logging=["current"])
    'ranker_v2'
    >>> choose_target_policy(["production"], logging=["production"]), choose_target_policy([])
    ('production', None)
    """
    names = list(dict.fromkeys(policies))
    others = [p for p in names if p not in set(logging) and p != LOGGING_POLICY]
    if PREFERRED in others:
        return PREFERRED
    if others:
        return others[0]
    return names[0] if names else None


@dataclass(frozen=True)
class TargetPolicies:
    """The target policies of some data: ``rank`` and ``propensity`` policies (file order), those that are the
    ``logging`` policy, the ``default`` target and the ``reason`` for it in words."""

    rank: tuple[str, ...]
    propensity: tuple[str, ...]
    logging: tuple[str, ...]
    default: str | None
    reason: str

    @property
    def all(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.rank, *self.propensity)))

    def kind(self, policy: str) -> str:
        """``rank``, ``propensity`` or ``rank and propensity``."""
        kinds = [k for k, names in (("rank", self.rank), ("propensity", self.propensity)) if policy in names]
        return " and ".join(kinds)


def _logging_equivalents(logs: Logs) -> list[str]:
    f = logs.frame
    offline = offline_mask(f["arm"]) if "arm" in f.columns else np.ones(len(f), dtype=bool)
    out = [p for p in logs.policies if p in LOGGING_NAMES]
    for p in logs.policies:
        if p not in out and np.array_equal(f[POLICY_PREFIX + p].to_numpy()[offline], f["rank"].to_numpy()[offline]):
            out.append(p)
    if "logging_propensity" in f.columns:
        lp = f["logging_propensity"].to_numpy()[offline]
        for p in logs.propensity_policies:
            tp = f[TARGET_PROPENSITY_PREFIX + p].to_numpy()[offline]
            if p not in out and (p in LOGGING_NAMES or np.allclose(tp, lp, rtol=1e-9, atol=0)):
                out.append(p)
    return out


def _moments_logging(moments) -> list[str]:
    """Policies of a moments file whose paired difference with the logging policy is 0 on every offline session
    (sum of squared differences 0 in every control group), or named like the logging policy."""
    off = offline_rows(moments.offline)  # the logging policy's sessions (the control arm)
    out = []
    for p in moments.grid.policies:
        rows = off[off["policy"] == p] if "policy" in off.columns else off.iloc[:0]
        zero = len(rows) > 0 and "sumsq_diff" in rows.columns and bool((rows["sumsq_diff"].fillna(0) == 0).all())
        if p in LOGGING_NAMES or zero:
            out.append(p)
    return out


def target_policies(data) -> TargetPolicies:
    """The target policies of ``data`` (:class:`~offeval_core.log_schema.Logs`, a
    :class:`~offeval_core.engine.Moments`, or a sequence of policy names) with the default target chosen by
    :func:`choose_target_policy`."""
    if isinstance(data, Logs):
        rank, propensity, logging = tuple(data.policies), tuple(data.propensity_policies), _logging_equivalents(data)
    elif hasattr(data, "grid") and hasattr(data, "offline"):
        rank, propensity, logging = tuple(data.grid.policies), (), _moments_logging(data)
    else:
        rank, propensity = tuple(data), ()
        logging = [p for p in rank if p in LOGGING_NAMES]
    names = tuple(dict.fromkeys((*rank, *propensity)))
    default = choose_target_policy(names, logging=logging)
    if default is None:
        reason = "no target policy in these data"
    elif default in logging:
        reason = f"{default} is the logging policy, and the data hold no other target policy"
    elif default == PREFERRED:
        reason = "the policy named treatment"
    elif logging:
        reason = (f"no policy named treatment; the first policy that is not the logging policy "
                  f"({', '.join(logging)} {'is' if len(logging) == 1 else 'are'})")
    else:
        reason = "no policy named treatment; the first target policy"
    return TargetPolicies(rank, propensity, tuple(logging), default, reason)


def default_target_policy(data) -> str | None:
    """The default target policy of logs, moments or policy names (:func:`target_policies`)."""
    return target_policies(data).default
