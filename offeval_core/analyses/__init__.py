"""Analyses on moments (and per-session values where stated): each a pure function to a small result
object, with a matching chart in :mod:`offeval_core.charts`.

- :func:`sensitivity` — TPR / mean p / sign agreement vs the clip value (KDD'24 Fig. 1, Sec. 6.2)
- :func:`offline_online_correlation` — correlation across days (KDD'24 Table 2)
- :func:`correlation_by_clip` — Table 2's comparison (learnt PBM vs log2) pooled, at every clip value
- :func:`dcg_vs_ndcg` — pairwise agreement of DCG and nDCG over policies (KDD'24 App. A, Fig. 2, Table 1)
- :func:`decision_boxes` — offline vs online decisions per A/B test (Gilotte Fig. 4/5, Table 3)
- :func:`clip_tuning` — bias and variance vs the clip value (Gilotte Fig. 2)
- :func:`compare_candidates` — every candidate vs the logging policy before any A/B test (a forest plot)
"""

from offeval_core.analyses._common import Variant, merge_moments, variant_label
from offeval_core.analyses.candidates import (
    CandidatesResult,
    candidates_figure,
    common_clip,
    compare_candidates,
)
from offeval_core.analyses.clip_tuning import ClipTuningResult, clip_tuning, clip_tuning_figure
from offeval_core.analyses.correlation import (
    DEFAULT_VARIANTS,
    CorrelationResult,
    correlation_figure,
    correlation_series_figure,
    default_variants,
    offline_online_correlation,
)
from offeval_core.analyses.correlation_clip import (
    CorrelationByClip,
    correlation_by_clip,
    correlation_clip_figure,
)
from offeval_core.analyses.dcg_vs_ndcg import AgreementResult, agreement_figure, dcg_vs_ndcg, table1_example
from offeval_core.analyses.decisions import (
    DEFAULT_ESTIMATORS,
    DecisionResult,
    decision_boxes,
    decision_figure,
)
from offeval_core.analyses.sensitivity import SensitivityResult, sensitivity, sensitivity_figure

__all__ = [
    "DEFAULT_ESTIMATORS", "DEFAULT_VARIANTS", "AgreementResult", "CandidatesResult", "ClipTuningResult", "CorrelationByClip",
    "CorrelationResult", "DecisionResult", "SensitivityResult", "Variant", "agreement_figure", "candidates_figure", "clip_tuning", "clip_tuning_figure",
    "common_clip", "compare_candidates", "correlation_by_clip", "correlation_clip_figure", "correlation_figure", "correlation_series_figure", "dcg_vs_ndcg", "decision_boxes", "decision_figure",
    "default_variants", "merge_moments", "offline_online_correlation", "sensitivity", "sensitivity_figure",
    "table1_example", "variant_label",
]
