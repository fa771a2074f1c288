"""Capped and normalised importance sampling on propensity or ranking logs (Gilotte et al., WSDM'18).

Estimators of the expected reward of a target policy π_t from rows logged by π_p (Sec. 3-5, Table 2),
with per-row importance weights

    w_i = target_propensity / logging_propensity          (propensity logs: π_t(a|x) / π_p(a|x))
    w_i = D(R(i)) / D0(r_i)                               (ranking logs without propensities)

and capped weights w̄_i = min(w_i, c) (max-capping) or w_i · 1{w_i < c} (zero-capping), c ∈ [1, ∞].

Everything is reduced per session τ (the independent unit; rows of one session are slots of one
display, or a bandit round each) to

    a_τ = Σ_i w̄_i r_i   (target numerator)      c_τ = Σ_i r_i     (logging numerator)
    s_τ = Σ_i w̄_i       (capped weight mass)    m_τ = number of rows (impressions)

and, with the unit count u_τ = 1 (per-session scale) or u_τ = m_τ (per-impression, CTR-like scale), every
estimator is a ratio of session sums Σx / Σy against the logging value Σc / Σu:

=============  ==================================================  =================================
estimator      per-session x, y                                    paper
=============  ==================================================  =================================
IS / CIS       x = a,  y = u                                       Sec. 3, Sec. 4.2
SNIPS / NCIS   x = a,  y = u · s / m (mean capped weight × u)      Sec. 4.1, Eq. (1)
PieceNCIS      x = ψ (below), y = u                                Sec. 5.3
PointNCIS      x = Σ_i w̄_i r_i / ν(x, rank_i), y = u  (exact ν)    Sec. 5.4
=============  ==================================================  =================================

SNIPS / NCIS normalise over whatever rows an analysis aggregates ("global" normalisation); their paired
effect is a difference of two ratios with different denominators, read through the ``ref_*`` columns
(:func:`offeval_core.estimators.ratio_difference`). At the per-impression scale NCIS is the paper's
Σ w̄ r / Σ w̄ over rows; at the per-session scale the control variate is the session's mean capped weight
on propensity logs (E_πp[W] = 1 per row), and on ranking logs (exposure weights, E[W] ≠ 1 per row) the
capped share of the weight mass Σ w̄ / Σ w within each (experiment, day, arm) cell, whose expectation is
the share E[W̄/W] under the target's exposure that NCIS assumes (docs/importance.md; SNIPS = IS there).
IS and SNIPS are CIS and NCIS with c = ∞.

**PieceNCIS** (Σ_g α_g R_g, R_g = A_g / Y_g the NCIS of stratum g, α_g its share of units) is stored as
the mean of the linearised per-session value ψ_τ = u_τ R_g + (U_g / Y_g)(a_τ − R_g y_τ): Σψ / Σu equals
the estimator exactly and the sample variance of ψ is its delta-method variance, including the
randomness of α_g. Strata are crossed with (experiment_id, day, arm); the strata column is ``segment`` by
default, any session-level column, a per-session Series, or value-model buckets (:func:`value_strata`).

**PointNCIS** needs ν(x, k) = E_πt[W̄/W | x, slot k] = E_πp[W̄ | x, k] (Lemma A.3's identity). It is used
*exactly* where the log enumerates the logging distribution of a context: the distinct (item_id, rank)
actions logged in a context (experiment, arm, context) at rank k have logging propensities summing to 1,
so ν = Σ_a π_p(a) w̄(a) by marginalisation. Elsewhere no sampler of π_t is available from a log, so the
context's own rows give the plug-in ν̂ = mean capped weight of the context — PieceNCIS with one stratum
per context (the "simple ratio estimator" the paper warns is biased for small contexts). ``n_exact``
counts the sessions that used the exact normaliser; users who can sample π_t can compute the paper's
Midzuno-Sen estimate with :func:`midzuno_sen_inverse`. The context defaults to the session.

The package has one module per concept: :mod:`~offeval_core.importance.keys` (estimator names),
:mod:`~offeval_core.importance.weights` (weights, capping, labels), :mod:`~offeval_core.importance.reduce`
(moments), :mod:`~offeval_core.importance.estimate`, :mod:`~offeval_core.importance.bootstrap`,
:mod:`~offeval_core.importance.strata` and :mod:`~offeval_core.importance.counterexample`.
"""

from __future__ import annotations

from offeval_core.importance.bootstrap import (
    BootstrapResult,
    bootstrap,
    percentile_summary,
    session_sums,
    session_values,
    values_from_sessions,
)
from offeval_core.importance.counterexample import (
    COUNTEREXAMPLE_ACTIONS,
    COUNTEREXAMPLE_SEGMENTS,
    ncis_counterexample,
)
from offeval_core.importance.estimate import (
    ImportanceResult,
    estimate,
    midzuno_sen_inverse,
)
from offeval_core.importance.keys import (
    BASES,
    CAPPINGS,
    SCALES,
    EstimatorKey,
    check_estimator,
    estimator_key,
    parse_key,
)
from offeval_core.importance.normalisation import (
    MIN_CONTEXT_ROWS,
    POOLED_CONTEXT,
    pooled_contexts,
    pooled_sessions,
    warn_pooled_contexts,
)
from offeval_core.importance.reduce import (
    EXACT_TOL,
    EXTRA_COLUMNS,
    add_importance,
    reduce_importance,
    session_table,
    weight_diagnostics,
)
from offeval_core.importance.strata import subset_sessions, value_strata
from offeval_core.importance.weights import (
    PROPENSITY,
    WEIGHT_MODES,
    WeightSetup,
    cap,
    capping_variants,
    exposure_weights,
    importance_source,
    per_session,
    resolve_weights,
    session_labels,
    weight_expr,
)

__all__ = [
    "BASES",
    "CAPPINGS",
    "COUNTEREXAMPLE_ACTIONS",
    "COUNTEREXAMPLE_SEGMENTS",
    "EXACT_TOL",
    "EXTRA_COLUMNS",
    "MIN_CONTEXT_ROWS",
    "POOLED_CONTEXT",
    "PROPENSITY",
    "SCALES",
    "WEIGHT_MODES",
    "BootstrapResult",
    "EstimatorKey",
    "ImportanceResult",
    "WeightSetup",
    "add_importance",
    "bootstrap",
    "cap",
    "capping_variants",
    "check_estimator",
    "estimate",
    "estimator_key",
    "exposure_weights",
    "importance_source",
    "midzuno_sen_inverse",
    "ncis_counterexample",
    "parse_key",
    "per_session",
    "percentile_summary",
    "pooled_contexts",
    "pooled_sessions",
    "reduce_importance",
    "resolve_weights",
    "session_labels",
    "session_sums",
    "session_table",
    "session_values",
    "subset_sessions",
    "value_strata",
    "values_from_sessions",
    "warn_pooled_contexts",
    "weight_diagnostics",
    "weight_expr",
]
