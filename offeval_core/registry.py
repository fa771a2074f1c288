"""The registry of estimators readable from moments: which stored ``metric`` rows each reads, whether it is a
ratio of means, how its paired effect is formed, and its unit (see :class:`EstimatorSpec`)."""

from __future__ import annotations

from dataclasses import dataclass

from offeval_core.moment_columns import OFFLINE_ROLES

__all__ = ["ESTIMATORS", "SUM_COLUMNS", "EstimatorSpec"]

SUM_COLUMNS = tuple(c for c, role in OFFLINE_ROLES.items() if role.kind != "max")
"""The pooled moment columns of ``Moments.offline`` (their roles: :data:`offeval_core.moment_columns.OFFLINE_ROLES`)."""


@dataclass(frozen=True)
class EstimatorSpec:
    """How an estimator reads the moments: which stored ``metric`` rows, and whether it is a ratio of
    means Σx / Σy (delta-method CI from ``den_*`` columns) or a plain mean of per-session values."""

    name: str
    stored: str
    ratio: bool
    label: str
    description: str
    family: str = "dcg"
    """``dcg`` (ranking metrics of KDD'24) or ``importance`` (Gilotte et al. Sec. 3-5)."""
    paired: str = "shared"
    """How the paired effect target − logging is read: ``shared`` — Σd / Σy (or the mean of d) with one
    denominator for both policies; ``two_ratio`` — x̄_t / ȳ_t − x̄_l / ȳ_l with different denominators
    (NIS / NCIS), delta method from the ``ref_*`` and cross-moment columns."""
    scale: str = "session"
    """Unit of the value: ``session`` (reward per session) or ``impression`` (reward per logged row)."""


ESTIMATORS: dict[str, EstimatorSpec] = {
    "dcg": EstimatorSpec("dcg", "dcg", False, "DCG",
                         "mean per-session DCG with de-biased, clipped labels (KDD'24 Eq. 9) — unbiased for m = ∞"),
    "ndcg": EstimatorSpec("ndcg", "ndcg", False, "nDCG",
                          "mean per-session DCG / ideal DCG (KDD'24 Sec. 5) — bounded but inconsistent with DCG"),
    "pndcg": EstimatorSpec("pndcg", "dcg", True, "pnDCG",
                           "post-normalised DCG = mean DCG / mean ideal DCG (KDD'24 Sec. 5) — consistent with DCG"),
}
"""Registry of estimators readable from moments; more estimators register here with their own rows."""


def _register_importance() -> None:
    """Gilotte et al. (WSDM'18) Sec. 3-5 / Table 2: IS, SNIPS, CIS, NCIS, PieceNCIS, PointNCIS, each with
    max- or zero-capping and at the per-session or per-impression scale; rows come from
    :func:`offeval_core.importance.reduce_importance` and are stored under the registry key."""
    bases = {  # base: (label, two-ratio effect?, ratio at session scale?, description)
        "is": ("IS", False, False, "importance sampling Σ w·r / n (Gilotte Sec. 3) — unbiased, high variance"),
        "snips": ("SNIPS", True, True,
                  "self-normalised IS Σ w·r / Σ w (NIS, Gilotte Sec. 4.1) — consistent, small bias"),
        "cis": ("CIS", False, False,
                "capped IS Σ w̄·r / n (Gilotte Sec. 4.2) — low variance, biased down by the capped mass"),
        "ncis": ("NCIS", True, True,
                 "normalised capped IS Σ w̄·r / Σ w̄ (Gilotte Eq. 1) — rescales the capped mass globally"),
        "piece-ncis": ("PieceNCIS", False, False,
                       "NCIS normalised within strata, Σ_g α_g NCIS_g (Gilotte Sec. 5.3)"),
        "point-ncis": ("PointNCIS", False, False,
                       "capped weights normalised per context by E_πt[W̄/W | x] (Gilotte Sec. 5.4)"),
    }
    for base, (label, two_ratio, ratio, desc) in bases.items():
        for capping in (("max",) if base in ("is", "snips") else ("max", "zero")):
            for scale in ("session", "impression"):
                key = base + ("-zero" if capping == "zero" else "") + ("@impression" if scale == "impression" else "")
                lab = label + (" (zero-capping)" if capping == "zero" else "")
                lab += " per impression" if scale == "impression" else ""
                unit = "per logged impression" if scale == "impression" else "per session"
                ESTIMATORS[key] = EstimatorSpec(
                    key, key, ratio or scale == "impression", lab, f"{desc}; {unit}", family="importance",
                    paired="two_ratio" if two_ratio else "shared", scale=scale)


_register_importance()
