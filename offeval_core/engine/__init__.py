"""The log reduce: per-session DCG-family values for a grid of variants, aggregated into moments.

One module per concept: :mod:`~offeval_core.engine.grid` (what is computed: :class:`Grid`, :class:`Moments`),
:mod:`~offeval_core.engine.sources` (where rows come from: in-memory logs as Arrow, Parquet files, any Ibis
backend), :mod:`~offeval_core.engine.lookups` (discount models and rank tables),
:mod:`~offeval_core.engine.kernel` (the kernel of the reduce and its compiled, reusable query),
:mod:`~offeval_core.engine.per_session` (every session's values at every clip value) and
:mod:`~offeval_core.engine.reduction` (:func:`reduce`, which assembles the moments). Every name is importable
from ``offeval_core.engine``.
"""

# ruff: noqa: I001 (public names first, then the private helpers kept importable)
from offeval_core.engine.grid import DEFAULT_CLIPS, GROUP_KEYS, INF_CLIP, METRICS, NDCG_RULES, Grid, Moments
from offeval_core.engine.kernel import CompiledMoments, binary_rewards, compiled_moments, fresh_moments
from offeval_core.engine.per_session import session_kernel
from offeval_core.engine.lookups import pbm_from_histogram, rank_table, source_discount, variant_table
from offeval_core.engine.reduction import check_finite_moments, prepare, reduce
from offeval_core.engine.sources import (
    Source,
    connect,
    connect_spark,
    logs_source,
    source_from_files,
    source_from_logs,
)

# private helpers other modules were written against when the engine was one file
from offeval_core.engine.reduction import _online, _tidy, _to_long  # noqa: F401
from offeval_core.engine.sources import _fetch_table, _prepared  # noqa: F401

_INF = INF_CLIP
_rank_table = rank_table

__all__ = [
    "DEFAULT_CLIPS", "GROUP_KEYS", "METRICS", "NDCG_RULES", "CompiledMoments", "Grid", "Moments", "Source",
    "binary_rewards", "check_finite_moments", "compiled_moments", "connect", "connect_spark", "fresh_moments", "logs_source",
    "pbm_from_histogram", "prepare", "rank_table", "reduce", "session_kernel", "source_discount", "source_from_files",
    "source_from_logs", "variant_table",
]
