"""Slate estimators for stochastic ranking policies (IIPS, RIPS, SIPS, self-normalised versions,
Cascade-DR, adaptive IPS) and a stochastic-slate simulator with exact truth."""

from offeval_core.slate.estimators import LABELS, SLATE_ESTIMATORS, SlateEstimate, estimate, slot_discount
from offeval_core.slate.schema import SlateData, from_arrays, from_logs
from offeval_core.slate.simulator import SlateConfig, SlateWorld, build_world, sample
from offeval_core.slate.weights import slate_weights

__all__ = [
           "LABELS",
           "SLATE_ESTIMATORS",
           "SlateConfig",
           "SlateData",
           "SlateEstimate",
           "SlateWorld",
           "build_world",
           "estimate",
           "from_arrays",
           "from_logs",
           "sample",
           "slate_weights",
           "slot_discount",
]
