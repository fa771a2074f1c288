"""offeval_core: offline evaluation of ranking and recommendation policies against online A/B tests.

The front door for notebooks — ``import offeval_core as oe`` gives::

    logs = oe.read_logs("logs.parquet")                       # validated logs (oe.Logs)
    oe.dcg(logs, reward="click", policy="new")                # Estimate: value, stderr, ci
    moments = oe.reduce(logs, oe.Grid(rewards=("click",), policies=("new",)))
    oe.sensitivity(moments, policy="new")                     # KDD'24 Fig. 1
    oe.estimate_importance(logs, reward="click", policy="new", estimator="ncis", clip=10)

Names are loaded on first use (``import offeval_core`` stays cheap and never imports streamlit). The
modules stay importable as before (``offeval_core.estimators``, ``offeval_core.importance``, …); where
a module's name would be ambiguous at the front door it gets a longer one: ``session_values`` is the
per-session DCG table of :mod:`offeval_core.estimators` (the importance sums are ``importance_session_sums``),
``ESTIMATORS`` is the registry of moment estimators (the GS estimators are ``MNAR_ESTIMATORS``, the slate
estimators ``SLATE_ESTIMATORS``), ``read_logs`` reads logs (a simulated world's written logs are read by
``read_world_logs``) and ``survival_curve`` is the learnt viewing curve of :mod:`offeval_core.discounts` (the
simulator's true curve is ``true_survival``). No exported name
is also the name of a submodule (importing ``offeval_core.simulate`` would shadow it), so the simulator is
``simulate_feed``.

Randomness is always one ``rng`` argument: None, an int seed or a ``numpy.random.Generator``. The only
``seed=`` arguments name a reproducible simulated world (``simulate_feed``, the held-out zoo, the report): the
integer is written into the world's metadata and cache key, which a Generator could not be.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS: dict[str, tuple[str, str]] = {}


def _export(module: str, *names: str, **renamed: str) -> None:
    for n in names:
        _EXPORTS[n] = (module, n)
    for public, original in renamed.items():
        _EXPORTS[public] = (module, original)


_export("offeval_core.logs", "Logs", "read_logs", "summarize", "LOGGING_POLICY")
_export("offeval_core.engine", "Grid", "Moments", "reduce", "DEFAULT_CLIPS")
_export("offeval_core.estimators", "ESTIMATORS", "dcg", "ndcg", "pndcg", "effect", "session_values", "select",
        "select_clips", "subset", "aggregate", "estimate_from_row", "summarize_groups", "online_results",
        "impression_online_results", "ratio_difference", "RatioMoments", "CrossMoments", "GroupResult",
        "OnlineResult")
_export("offeval_core.importance", "reduce_importance", "add_importance", "ncis_counterexample", "check_estimator",
        "estimator_key", "ImportanceResult", "BootstrapResult", estimate_importance="estimate",
        bootstrap_importance="bootstrap", importance_session_sums="session_sums")
_export("offeval_core.analyses", "sensitivity", "offline_online_correlation", "dcg_vs_ndcg", "decision_boxes",
        "clip_tuning", "merge_moments", "table1_example", "Variant", "SensitivityResult", "CorrelationResult",
        "AgreementResult", "DecisionResult", "ClipTuningResult", "compare_candidates", "CandidatesResult")
_export("offeval_core.policies", "target_policies", "default_target_policy", "choose_target_policy", "policy_kind",
        "TargetPolicies")
_export("offeval_core.heldout", "read_qrels", "read_run", "evaluate_run", "Qrels", "Run", "RunEvaluation")
_export("offeval_core.heldout.mnar", "mnar_estimate", "theorem41_terms", "MNAR_ESTIMATORS")
_export("offeval_core.heldout.analyses", "estimator_lab", "zoo_agreement", "runs_agreement")
_export("offeval_core.results", "Estimate", "Effect", "ConfidenceInterval")
_export("offeval_core.discounts", "parse_discount", "learn_pbm", "survival_curve")
_export("offeval_core.simulate", "preset_config", "SimulationConfig", "read_world_logs", "true_survival",
        simulate_feed="simulate")
_export("offeval_core.moments_io", "read_moments", "write_moments")
_export("offeval_core.errors", "OffevalError", "InputError", "SpecError", "UnknownName", "LogValidationError",
        "EstimatorWarning")
_export("offeval_core.validation", "parse_clip", "format_clip")
_export("offeval_core.slate", "SlateData", "SlateEstimate", "SlateConfig", "SlateWorld", "SLATE_ESTIMATORS",
        estimate_slate="estimate",
        slate_from_logs="from_logs", slate_from_arrays="from_arrays", build_slate_world="build_world",
        sample_slates="sample")
_export("offeval_core.diagnose", "check_cascade", "check_interaction", "check_context_position_bias", "check_support",
        diagnose_logs="diagnose")
_export("offeval_core.analyses.plan", "plan_moments", "PlannedReduce")
_export("offeval_core.understanding", "understand", "Understanding")
_export("offeval_core.arm_values", "ArmValues", "parse_arms")
_export("offeval_core.errors", "NeedsAnswers")

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str):
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'offeval_core' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
