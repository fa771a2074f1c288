"""Adjusted p-values for a family of comparisons shown at once (Holm's step-down family-wise error control,
Benjamini-Hochberg false discovery rate), through statsmodels' ``multipletests``.

Holm (1979): with p-values sorted ascending p_(1) ≤ … ≤ p_(m), the adjusted p_(i) = max_{j ≤ i} min(1,
(m − j + 1) p_(j)); rejecting where it is ≤ α keeps P(any false rejection) ≤ α. Benjamini & Hochberg (1995):
adjusted p_(i) = min_{j ≥ i} min(1, m p_(j) / j); rejecting where it is ≤ α keeps the expected share of
false rejections among the rejections ≤ α (independent or positively dependent tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offeval_core.errors import InputError, SpecError

METHODS = {"none": None, "holm": "holm", "bh": "fdr_bh"}
LABELS = {"none": "unadjusted", "holm": "Holm (family-wise error)", "bh": "Benjamini-Hochberg (false discovery rate)"}


@dataclass(frozen=True)
class Adjusted:
    """Adjusted p-values of a family, in the input order, and which ones are rejected at ``alpha``."""

    method: str
    alpha: float
    p_values: np.ndarray
    adjusted: np.ndarray
    rejected: np.ndarray
    family: str = ""

    @property
    def caption(self) -> str:
        """One sentence naming the family and the correction, for a table or chart caption."""
        fam = f" over {self.family}" if self.family else ""
        return (f"{LABELS[self.method]} adjustment{fam}: {int(self.rejected.sum())} of {len(self.p_values)} "
                f"comparisons significant at α = {self.alpha:g}")


def _adjust_iv(p_values, method: str, alpha: float) -> np.ndarray:
    if method not in METHODS:
        raise SpecError(f"unknown adjustment {method!r}; expected one of {', '.join(METHODS)}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise InputError("p_values must be one-dimensional")
    finite = p[~np.isnan(p)]
    if ((finite < 0) | (finite > 1)).any():
        raise InputError("p-values must lie in [0, 1]")
    return p


def adjust(p_values, *, method: str = "holm", alpha: float = 0.05, family: str = "") -> Adjusted:
    """Adjust a family of p-values (NaN entries are left out of the family and stay NaN).

    >>> adjust([0.01, 0.04, 0.03], method="holm").adjusted.tolist()  # 3·0.01, max(2·0.03, 0.03), max(1·0.04, 0.06)
    [0.03, 0.06, 0.06]
    >>> adjust([0.01, 0.04, 0.03], method="bh").adjusted.round(3).tolist()  # 3·0.01/1, then min(3·0.03/2, 3·0.04/3)
    [0.03, 0.04, 0.04]
    """
    p = _adjust_iv(p_values, method, alpha)
    adjusted = p.copy()
    ok = ~np.isnan(p)
    if METHODS[method] is not None and ok.any():
        from statsmodels.stats.multitest import multipletests  # (imported here: ~0.6 s, not needed before)

        adjusted[ok] = multipletests(p[ok], alpha=alpha, method=METHODS[method])[1]
    rejected = np.where(ok, adjusted <= alpha, False)
    return Adjusted(method, alpha, p, adjusted, rejected, family)


def holm(p_values, *, alpha: float = 0.05) -> np.ndarray:
    """Holm-adjusted p-values."""
    return adjust(p_values, method="holm", alpha=alpha).adjusted


def benjamini_hochberg(p_values, *, alpha: float = 0.05) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values of the step-up procedure)."""
    return adjust(p_values, method="bh", alpha=alpha).adjusted
