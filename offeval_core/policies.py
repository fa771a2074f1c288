"""The target policies of a log, their kind, the candidates that merely copy the logging policy, and the one
rule for the default target policy.

A target policy is given either by ranks (a ``rank__<policy>`` column: a deterministic ranking, evaluated by the
DCG family and by importance weights D(R(i)) / D0(i)) or by propensities (a ``target_propensity__<policy>``
column next to ``logging_propensity``: a stochastic policy, evaluated by importance weights π_t / π_p, Gilotte
et al. Sec. 3-5). A candidate that shows every offline row exactly as the logging policy did (its ranks equal the
logged ranks, or its propensities the logging propensities, on every offline session) *is* the logging policy:
its effect over the logging policy is 0 by construction, so it is never the default target.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from offeval_core.arms import offline_mask
from offeval_core.logs import POLICY_PREFIX, TARGET_PROPENSITY_PREFIX, Logs

__all__ = ["KINDS", "PREFERRED_TARGET", "default_target_policy", "logging_copies", "policy_kind", "target_policies"]

KINDS = ("rank", "propensity")
PREFERRED_TARGET = "treatment"
"""The name of the policy that served the treatment arm by convention (the schema's ``arm`` values)."""


def target_policies(logs: Logs) -> tuple[str, ...]:
    """Every target policy of the logs: the rank policies, then the propensity policies that have no rank column
    (a propensity column counts only with a ``logging_propensity`` column, which its weights need).

    >>> import pandas as pd
    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 2], "rank": [1, 1], "click": [1, 0],
    ...     "logging_propensity": [0.5, 0.5], "target_propensity__bts": [0.9, 0.1]}))
    >>> target_policies(logs)
    ('bts',)
    """
    props = logs.propensity_policies if "logging_propensity" in logs.frame.columns else ()
    return tuple(dict.fromkeys((*logs.policies, *props)))


def policy_kind(logs: Logs, policy: str) -> str:
    """``rank`` when the policy has a ``rank__`` column (ranks win when it has both), ``propensity`` when it has
    target propensities and the logs have logging propensities; a KeyError names the policies otherwise."""
    if policy in logs.policies:
        return "rank"
    if policy in target_policies(logs):
        return "propensity"
    raise KeyError(f"unknown target policy {policy!r}; the logs {logs.source} have "
                   f"{', '.join(target_policies(logs)) or 'none'}")


def logging_copies(logs: Logs) -> tuple[str, ...]:
    """The target policies that equal the logging policy on every offline row (control arm, or every session
    without arms): ranks equal to the logged ranks, or propensities equal to the logging propensities (within
    1e-12). Their offline effect over the logging policy is 0 by construction."""
    f = logs.frame
    sess = logs.sessions
    keep = np.zeros(len(sess), dtype=bool)  # by session code
    keep[sess["session"].to_numpy()] = offline_mask(sess["arm"])
    rows = keep[f["session"].to_numpy()]
    out = []
    for p in target_policies(logs):
        if policy_kind(logs, p) == "rank":
            same = np.array_equal(f[POLICY_PREFIX + p].to_numpy()[rows], f["rank"].to_numpy()[rows])
        else:
            same = np.allclose(f[TARGET_PROPENSITY_PREFIX + p].to_numpy(dtype=float)[rows],
                               f["logging_propensity"].to_numpy(dtype=float)[rows], rtol=0, atol=1e-12)
        if same:
            out.append(p)
    return tuple(out)


def default_target_policy(policies: Sequence[str], *, logging: Collection[str] = ()) -> str | None:
    """The policy a page opens on: never one of ``logging`` (copies of the logging policy) while another policy
    exists; ``treatment`` (the policy that served the treatment arm) when it is one of the others, else the first
    of the others; a copy of the logging policy only when there is nothing else; None without policies.

    >>> default_target_policy(["production", "ranker_v2", "ranker_v3"], logging=["production"])
    'ranker_v2'
    >>> default_target_policy(["production", "cand", "treatment"], logging=["production"])
    'treatment'
    >>> default_target_policy(["production"], logging=["production"]), default_target_policy([])
    ('production', None)
    """
    policies = list(dict.fromkeys(policies))
    others = [p for p in policies if p not in set(logging)]
    if PREFERRED_TARGET in others:
        return PREFERRED_TARGET
    if others:
        return others[0]
    return policies[0] if policies else None
