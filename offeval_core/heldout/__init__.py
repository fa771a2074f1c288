"""Held-out (qrels / runs) evaluation of top-n recommenders: readers, DCG / nDCG / Recall / ADG, MNAR
estimators (Naive, IPS, SNIPS, Generalized Stratified), a simulated MNAR world with an MCAR ground truth,
a model zoo, and the KDD'24 App. A and estimator-lab analyses."""

from offeval_core.heldout.io import Qrels, Run, read_qrels, read_run
from offeval_core.heldout.metrics import MetricSpec, RunEvaluation, evaluate_run, parse_metric

__all__ = [
    "MetricSpec",
    "Qrels",
    "Run",
    "RunEvaluation",
    "evaluate_run",
    "parse_metric",
    "read_qrels",
    "read_run",
]
