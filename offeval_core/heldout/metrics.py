"""DCG@k, nDCG@k, Recall@k and ADG on held-out relevance judgments, per user and aggregated.

Definitions (1-based positions p, discount 1 / log2(p + 1)):

- DCG@k = Σ_{p ≤ k} g(rel_p) / log2(p + 1), with gain g(r) = r ("linear", Järvelin & Kekäläinen) or
  g(r) = 2^r − 1 ("exponential", Burges et al.) — the two formulations of the DCG article
  (dcg_wikipedia.txt, "Discounted Cumulative Gain"); they coincide for binary relevance.
- nDCG@k = DCG@k / iDCG@k, where iDCG@k is the DCG of the user's judged relevances sorted descending and
  **truncated at k** (dcg_wikipedia.txt, "Normalized DCG"). KDD'24 Sec. 5 (Lemma 5.2, Table 1) shows that
  averaging this ratio over users can order models differently from averaging DCG.
- Recall@k = |relevant ∩ top-k| / |relevant| (relevant = relevance > 0).
- ADG (ADG paper, Definition 1, Eq. 2) = (1 / |R⁺_u|) Σ_{i ∈ R⁺_u} 1 / log2(rank(i) + 2) with rank(i) the
  0-based number of items scored above i — i.e. 1 / log2(p + 1) with our 1-based positions. A relevant item
  the run does not retrieve (or, for ``adg@k``, retrieves below k) contributes 0: exact when the run ranks
  the whole catalogue. ADG_obs is unbiased for ADG_comp under the missing-data model (Theorem 1), nDCG_obs
  is not (Theorem 2).

Users evaluated: users with at least one relevant item (relevance > 0) in the qrels — for the others nDCG,
Recall and ADG are undefined, and every metric skips them so all metrics average over the same users.
Users in the qrels but not in the run and users in the run but not in the qrels follow explicit policies
(``missing_in_run`` / ``missing_in_qrels``); every skipped user is reported with the reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core.defaults import LEVEL
from offeval_core.engine.grid import ndcg_of
from offeval_core.errors import InputError, SpecError, WrongType
from offeval_core.heldout.io import Qrels, Run
from offeval_core.results import Estimate, json_number
from offeval_core.stats import mean_estimate, moments_of
from offeval_core.validation import check_choice, check_level

__all__ = [
    "GAINS", "METRIC_KINDS", "MISSING_IN_QRELS", "MISSING_IN_RUN", "REASON_NOT_IN_QRELS", "REASON_NOT_IN_RUN",
    "REASON_NO_RELEVANT", "MetricSpec", "RunEvaluation", "dcg_at_k", "evaluate_run", "gain", "ideal_dcg_at_k",
    "log2_discount", "ndcg_at_k", "parse_metric", "per_user_metrics", "resolve_users", "topn_metrics",
]


GAINS = ("linear", "exponential")
METRIC_KINDS = ("dcg", "ndcg", "recall", "adg")
MISSING_IN_RUN = ("error", "zero", "skip")
MISSING_IN_QRELS = ("error", "skip")

REASON_NO_RELEVANT = "no relevant items in the qrels"
REASON_NOT_IN_QRELS = "in the run but not in the qrels"
REASON_NOT_IN_RUN = "in the qrels but not in the run"


# ----------------------------------------------------------------------------------------------------------
# single-list reference functions


def gain(relevance, *, kind: str = "linear") -> np.ndarray:
    """Gain of graded relevance: ``rel`` (linear) or ``2**rel − 1`` (exponential).

    >>> gain([0, 1, 3], kind="exponential").tolist()
    [0.0, 1.0, 7.0]
    """
    check_choice(kind, GAINS, name="gain")
    r = np.asarray(relevance, dtype=float)
    return r if kind == "linear" else np.exp2(r) - 1.0


def log2_discount(positions) -> np.ndarray:
    """``1 / log2(p + 1)`` for 1-based positions p (p = 1 → 1)."""
    return 1.0 / np.log2(np.asarray(positions, dtype=float) + 1.0)


def dcg_at_k(ranked_relevance, *, k: int | None = None, gain_kind: str = "linear") -> float:
    """DCG@k of relevance grades listed in rank order (dcg_wikipedia.txt, "Discounted Cumulative Gain").

    >>> round(dcg_at_k([3, 2, 3, 0, 1, 2], k=6), 3)  # the article's worked example: 6.861
    6.861
    """
    r = np.asarray(ranked_relevance, dtype=float)
    if k is not None:
        r = r[: _check_k(k)]
    return float(np.sum(gain(r, kind=gain_kind) * log2_discount(np.arange(1, r.size + 1))))


def ideal_dcg_at_k(relevances, *, k: int | None = None, gain_kind: str = "linear") -> float:
    """iDCG@k: DCG of all judged relevances sorted descending, truncated at k.

    >>> round(ideal_dcg_at_k([3, 2, 3, 0, 1, 2, 3, 2], k=6), 3)  # ideal 3,3,3,2,2,2 in the article
    8.74
    """
    r = np.sort(np.asarray(relevances, dtype=float))[::-1]
    return dcg_at_k(r, k=k, gain_kind=gain_kind)


def ndcg_at_k(ranked_relevance, relevances, *, k: int | None = None, gain_kind: str = "linear") -> float:
    """nDCG@k = DCG@k / iDCG@k (NaN when iDCG@k = 0).

    >>> round(ndcg_at_k([3, 2, 3, 0, 1, 2], [3, 2, 3, 0, 1, 2, 3, 2], k=6), 3)  # 6.861 / 8.740
    0.785
    """
    ideal = ideal_dcg_at_k(relevances, k=k, gain_kind=gain_kind)
    return dcg_at_k(ranked_relevance, k=k, gain_kind=gain_kind) / ideal if ideal > 0 else math.nan


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise WrongType(f"k must be a positive integer, got {type(k).__name__} {k!r}")
    if k < 1:
        raise InputError(f"k must be a positive integer (cut-off rank), got {k}")
    return int(k)


# ----------------------------------------------------------------------------------------------------------
# metric specs


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric name and its cut-off (``None`` = the whole run)."""

    kind: str
    k: int | None = None

    @property
    def label(self) -> str:
        return self.kind if self.k is None else f"{self.kind}@{self.k}"


_METRIC_RE = re.compile(r"^\s*(ndcg|dcg|recall|adg)\s*(?:@\s*(\d+))?\s*$", re.IGNORECASE)


def parse_metric(text: str) -> MetricSpec:
    """Parse ``ndcg@10``, ``dcg@100``, ``recall@20``, ``adg`` or ``adg@50`` (case-insensitive).

    >>> parse_metric("nDCG@10")
    MetricSpec(kind='ndcg', k=10)
    """
    if isinstance(text, MetricSpec):
        return text
    m = _METRIC_RE.match(str(text))
    if not m:
        raise SpecError(
            f"metric must be one of ndcg@K, dcg@K, recall@K, adg or adg@K (K a positive integer); got {text!r}"
        )
    k = int(m.group(2)) if m.group(2) is not None else None
    if k is not None and k < 1:
        raise SpecError(f"metric cut-off must be ≥ 1, got {text!r}")
    return MetricSpec(m.group(1).lower(), k)


# ----------------------------------------------------------------------------------------------------------
# evaluation of a run against qrels


@dataclass(frozen=True, eq=False)
class RunEvaluation:
    """Per-user metric values of one run (``per_user``: index user, one column per metric label), their
    aggregates (mean, standard error, normal CI over users) and the users skipped, with the reason."""

    run: str
    gain: str
    per_user: pd.DataFrame
    estimates: dict[str, Estimate]
    skipped: dict[str, list[str]] = field(default_factory=dict)
    zero_filled: list[str] = field(default_factory=list)

    def to_dict(self, *, max_users_listed: int = 20) -> dict:
        return {
            "run": self.run,
            "gain": self.gain,
            "metrics": {
                label: {
                    "mean": json_number(e.value),
                    "stderr": json_number(e.stderr),
                    "ci": [json_number(e.ci.low), json_number(e.ci.high)],
                    "level": e.ci.level,
                    "n_users": e.n,
                }
                for label, e in self.estimates.items()
            },
            "n_users": int(self.per_user.shape[0]),
            "zero_filled": {"count": len(self.zero_filled), "users": self.zero_filled[:max_users_listed],
                            "reason": "in the qrels but not in the run; scored 0 (missing_in_run='zero')"},
            "skipped": {
                reason: {"count": len(users), "users": users[:max_users_listed]}
                for reason, users in self.skipped.items()
            },
        }



def _first(users, n: int = 5) -> str:
    users = list(users)
    shown = ", ".join(repr(u) for u in users[:n])
    return shown + (", …" if len(users) > n else "")


def resolve_users(
    qrels: Qrels, run: Run, *, missing_in_run: str = "error", missing_in_qrels: str = "error"
) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """Users to evaluate, users skipped (reason → users) and users scored 0 because the run misses them."""
    check_choice(missing_in_run, MISSING_IN_RUN, name="missing_in_run")
    check_choice(missing_in_qrels, MISSING_IN_QRELS, name="missing_in_qrels")
    q = qrels.frame
    q_users = set(q["user"].unique())
    rel_users = set(q.loc[q["relevance"] > 0, "user"].unique())
    run_users = set(run.frame["user"].unique())
    skipped: dict[str, list[str]] = {}
    no_rel = sorted(q_users - rel_users)
    if no_rel:
        skipped[REASON_NO_RELEVANT] = no_rel
    run_only = sorted(run_users - q_users)
    if run_only:
        if missing_in_qrels == "error":
            raise InputError(
                f"run {run.name!r}: {len(run_only)} user(s) are in the run but not in the qrels "
                f"({_first(run_only)}); policy missing_in_qrels='error' — use 'skip' to evaluate only judged users"
            )
        skipped[REASON_NOT_IN_QRELS] = run_only
    qrels_only = sorted(rel_users - run_users)
    zero_filled: list[str] = []
    if qrels_only:
        if missing_in_run == "error":
            raise InputError(
                f"run {run.name!r}: {len(qrels_only)} user(s) with relevant items in the qrels are not in the run "
                f"({_first(qrels_only)}); policy missing_in_run='error' — use 'zero' to score them 0 "
                "(as trec_eval -c) or 'skip' to leave them out"
            )
        if missing_in_run == "skip":
            skipped[REASON_NOT_IN_RUN] = qrels_only
        else:
            zero_filled = qrels_only
    users = sorted(rel_users & run_users) if missing_in_run == "skip" else sorted(rel_users)
    return users, skipped, zero_filled


def _per_relevant(values: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    """Recall@k and ADG@k divide by the user's number of relevant items: NaN for a user without one (also one
    absent from the qrels, ``n_rel`` NaN), as nDCG is (no warning for the 0 / 0).

    >>> _per_relevant(np.array([1.0, 0.0, 2.0]), np.array([2.0, 0.0, np.nan])).tolist()   # 1 / 2; 0 / 0; unknown
    [0.5, nan, nan]
    """
    v, n = np.asarray(values, dtype=np.float64), np.asarray(n_rel, dtype=np.float64)
    return np.divide(v, n, out=np.full(v.shape, np.nan), where=n > 0)


def per_user_metrics(
    qrels: Qrels, run: Run, users: list[str], metrics: list[MetricSpec], *, gain_kind: str = "linear"
) -> pd.DataFrame:
    """Per-user metric values (index ``users``); users without rows in the run score 0."""
    check_choice(gain_kind, GAINS, name="gain")
    index = pd.Index(users, name="user")
    q = qrels.frame[qrels.frame["user"].isin(index)]
    n_rel = (q["relevance"] > 0).groupby(q["user"]).sum().reindex(index).to_numpy(dtype=float)
    m = run.frame[run.frame["user"].isin(index)].merge(q, on=["user", "item"], how="left")
    rel = m["relevance"].fillna(0.0).to_numpy()
    rank = m["rank"].to_numpy()
    disc = log2_discount(rank)
    qs = q.sort_values(["user", "relevance"], ascending=[True, False], kind="mergesort")
    ideal_pos = qs.groupby("user", sort=False).cumcount().to_numpy() + 1
    ideal_gain = gain(qs["relevance"].to_numpy(), kind=gain_kind) * log2_discount(ideal_pos)
    g = gain(rel, kind=gain_kind)
    hit = (rel > 0).astype(float)
    out = {}
    for spec in metrics:
        cut = rank <= spec.k if spec.k is not None else np.ones(rank.size, dtype=bool)

        def per_user(values, sel, frame_users):
            s = pd.Series(values[sel]).groupby(frame_users[sel]).sum()
            return s.reindex(index, fill_value=0.0).to_numpy(dtype=float)

        muser = m["user"].to_numpy()
        if spec.kind in ("dcg", "ndcg"):
            d = per_user(g * disc, cut, muser)
            if spec.kind == "dcg":
                out[spec.label] = d
            else:
                icut = ideal_pos <= spec.k if spec.k is not None else np.ones(ideal_pos.size, dtype=bool)
                idcg = per_user(ideal_gain, icut, qs["user"].to_numpy())
                out[spec.label] = ndcg_of(d, idcg, empty=math.nan)
        elif spec.kind == "recall":
            out[spec.label] = _per_relevant(per_user(hit, cut, muser), n_rel)
        else:  # adg
            out[spec.label] = _per_relevant(per_user(hit * disc, cut, muser), n_rel)
    return pd.DataFrame(out, index=index)


def evaluate_run(
    qrels: Qrels,
    run: Run,
    metrics,
    *,
    gain_kind: str = "linear",
    missing_in_run: str = "error",
    missing_in_qrels: str = "error",
    level: float = LEVEL,
) -> RunEvaluation:
    """Evaluate one run: per-user metrics, mean ± standard error over users, skipped users and why.

    Parameters
    ----------
    qrels, run : Qrels, Run
        From :func:`offeval_core.heldout.io.read_qrels` / ``read_run``.
    metrics : sequence of str or MetricSpec
        E.g. ``["ndcg@10", "dcg@10", "recall@20", "adg"]``.
    gain_kind : {"linear", "exponential"}
        Gain ``rel`` or ``2**rel − 1`` (DCG / nDCG only; Recall and ADG use binary relevance rel > 0).
    missing_in_run : {"error", "zero", "skip"}
        Policy for users with relevant items in the qrels but no ranked list in the run.
    missing_in_qrels : {"error", "skip"}
        Policy for users the run ranks for but the qrels do not judge.
    level : float
        Confidence level of the normal CI of each mean.

    Examples
    --------
    One user, relevance (3, 2) on items (a, b), the run ranks b first: DCG@2 = 2 + 3 / log2 3 = 3.893,
    iDCG@2 = 3 + 2 / log2 3 = 4.262, nDCG@2 = 0.913.

    >>> from offeval_core.heldout.io import qrels_from_frame, run_from_frame
    >>> q = qrels_from_frame(pd.DataFrame({"user": ["u", "u"], "item": ["a", "b"], "relevance": [3, 2]}))
    >>> r = run_from_frame(pd.DataFrame({"user": ["u", "u"], "item": ["b", "a"], "rank": [1, 2]}), name="m")
    >>> ev = evaluate_run(q, r, ["dcg@2", "ndcg@2"])
    >>> round(ev.estimates["dcg@2"].value, 3), round(ev.estimates["ndcg@2"].value, 3)
    (3.893, 0.913)
    """
    check_level(level)
    specs = [parse_metric(m) for m in metrics]
    if not specs:
        raise InputError("metrics must name at least one metric (e.g. 'ndcg@10'), got an empty list")
    users, skipped, zero_filled = resolve_users(
        qrels, run, missing_in_run=missing_in_run, missing_in_qrels=missing_in_qrels
    )
    if not users:
        raise InputError(f"run {run.name!r}: no user left to evaluate (skipped: {', '.join(skipped) or 'none'})")
    per_user = per_user_metrics(qrels, run, users, specs, gain_kind=gain_kind)
    estimates = {}
    for col in per_user.columns:
        x = per_user[col].to_numpy(dtype=float)
        estimates[col] = mean_estimate(*moments_of(x), level=level)
    return RunEvaluation(run.name, gain_kind, per_user, estimates, skipped, zero_filled)


# ----------------------------------------------------------------------------------------------------------
# dense path for the model zoo (top-n item indices × a dense relevance matrix)


def topn_metrics(top_items: np.ndarray, relevance: np.ndarray, *, k: int, gain_kind: str = "linear") -> dict:
    """Per-user DCG@k, nDCG@k, Recall@k and ADG@k from top-n lists and a dense relevance matrix.

    ``top_items`` (users × n, n ≥ k) holds item indices in rank order; ``relevance`` (users × items) the
    held-out judgments (0 = not relevant / not held out). Users with no relevant item get NaN.
    An independent, vectorised code path of :func:`per_user_metrics`, used by the zoo analyses.
    """
    k = _check_k(k)
    top = np.asarray(top_items)[:, :k]
    rel = np.asarray(relevance, dtype=float)
    ranked = np.take_along_axis(rel, top, axis=1)
    disc = log2_discount(np.arange(1, top.shape[1] + 1))
    dcg = gain(ranked, kind=gain_kind) @ disc
    srt = -np.sort(-rel, axis=1)[:, :k]
    idcg = gain(srt, kind=gain_kind) @ log2_discount(np.arange(1, srt.shape[1] + 1))
    n_rel = (rel > 0).sum(axis=1).astype(float)
    hits = (ranked > 0).astype(float)
    valid = n_rel > 0  # every division below guards its own zeros (ndcg_of, _per_relevant): no warning to silence
    return {
        "dcg": np.where(valid, dcg, np.nan),
        "ndcg": np.where(valid, ndcg_of(dcg, idcg, empty=math.nan), np.nan),
        "recall": _per_relevant(hits.sum(axis=1), n_rel),
        "adg": _per_relevant(hits @ disc, n_rel),
    }
