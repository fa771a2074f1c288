"""Tables as people read them: human column headers instead of snake_case names, and every cell formatted by
one rule per kind of column (counts with thousands separators, p-values as ``< 0.001``, shares in %, other
numbers with at most 4 significant digits, clip values as ``∞``, missing values as ``n/a — why``).

Pure functions (no Streamlit): the dashboard's tables and CSV headers use them, the numbers themselves come
from :mod:`offeval_core.formatting`, so tables, hovers, headlines and exports print a number the same way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from offeval_core.formatting import (
    clip_text,
    format_count,
    format_number,
    format_p,
    format_share,
    not_available,
)

__all__ = ["HEADERS", "KINDS", "NA_REASONS", "column_kind", "display_frame", "format_cell", "header"]

HEADERS: dict[str, str] = {
    "experiment_id": "A/B test", "policy_label": "R₀ / Rₜ", "p_value": "p-value", "p_one_sided": "p (one-sided)",
    "p_two_sided": "p (two-sided)", "mean_p": "mean p-value", "online_p": "online p (two-sided)",
    "offline_p": "offline p (two-sided)", "p_adj": "adjusted p", "online_p_adj": "online adjusted p",
    "offline_p_adj": "offline adjusted p", "correlation_p": "p of the correlation", "ess": "ESS",
    "ess_share": "ESS share", "tpr": "TPR", "negatives_detected": "negatives detected",
    "fnr": "false-negative rate", "ci_size": "relative CI size",
    "stderr": "std. error", "sd": "SD", "rmse": "RMSE", "rel_rmse": "relative RMSE", "bias_se": "SE of the bias",
    "ci_low": "CI low", "ci_high": "CI high", "effect_at_inf": "effect at m = ∞", "clip": "m",
    "beats_logging": "beats the logging policy", "below_logging": "below the logging policy",
    "sign_agreement": "sign agreement", "relative_effect": "relative effect", "offline_target": "offline estimate",
    "online_treatment": "online treatment arm", "max_weight": "largest weight", "reps": "replications",
    "kendall_tau": "Kendall τ", "tau_mean": "Kendall τ (mean)", "tau_std": "Kendall τ (SD)",
    "pearson_r": "Pearson r", "r": "r", "median_r": "median r", "n_points": "experiment-days",
    "n_tests": "A/B tests", "n_settings": "settings", "n_detected": "detected", "n": "n",
    "n_false_positive": "false positives", "n_false_negative": "false negatives", "n_sessions": "sessions",
    "dcg_rank": "rank by DCG", "ndcg_rank": "rank by nDCG", "better_by_dcg": "better by DCG",
    "better_by_ndcg": "better by nDCG", "mean_bias": "mean bias", "mean_abs_bias": "mean |bias|",
}
"""Headers of the columns analyses return; any other snake_case name reads with spaces (:func:`header`)."""

_TOKENS = {"ess": "ESS", "ci": "CI", "tpr": "TPR", "dcg": "DCG", "ndcg": "nDCG", "pndcg": "pnDCG", "idcg": "iDCG",
           "rmse": "RMSE", "id": "", "ips": "IPS", "snips": "SNIPS", "cis": "CIS", "ncis": "NCIS", "mse": "MSE"}

KINDS = ("count", "p", "share", "clip", "bool", "number", "text")
"""How a column is formatted (:func:`format_cell`)."""

_P_NAMES = re.compile(r"^(p|p_value|mean_p|p_adj|p_one_sided|p_two_sided|p-value)$|_p$|_p_adj$|^p \(")
_SHARE_NAMES = re.compile(r"^(tpr|negatives_detected|fnr|precision|agreement|sign_agreement|coverage"
                          r"|relative_effect)$|_share$"
                          r"|^clipped_(rows|mass)$|^share")
_COUNT_NAMES = re.compile(r"^(n|ess|reps|rank|day|seed|k|sessions|impressions|rows|replications)$|^n_|_rank$"
                          r"|^(dcg|ndcg)_rank$")

NA_REASONS: dict[str, str] = {
    "precision": "no offline ship decision", "fnr": "no online ship decision",
    "correlation": "fewer than 3 A/B tests or no spread", "correlation_p": "fewer than 3 A/B tests or no spread",
    "ci_size": "no reference CI", "r": "no spread across days", "p_value": "no spread across days",
    "median_r": "no spread across days", "ess_share": "not a weighted estimator",
}
"""Why a cell of a column can be missing, said in the cell (``n/a — why``); other columns say
"not computable here"."""


def header(name: object) -> str:
    """The human header of a column: a known name's header, else the words of a snake_case name.

    >>> header("experiment_id"), header("ess"), header("offline_low"), header("n_false_positive")
    ('A/B test', 'ESS', 'offline low', 'false positives')
    >>> header("Already fine"), header("target_high")
    ('Already fine', 'target high')
    """
    text = str(name)
    if text in HEADERS:
        return HEADERS[text]
    if "_" not in text:
        return _TOKENS.get(text, text)
    words = text.split("_")
    if words[0] == "n" and len(words) > 1:  # a count: "n_detected_unadjusted" reads "detected unadjusted"
        words = words[1:]
    words = [_TOKENS.get(w, w) for w in words]
    return " ".join(w for w in words if w) or text


def column_kind(name: object, values: pd.Series) -> str:
    """The kind of a column, from its name first (p-values, shares, counts, the clip), then its values
    (booleans, whole numbers, other numbers, text).

    >>> column_kind("p_adj", pd.Series([0.2])), column_kind("tpr", pd.Series([0.5])), column_kind("ess", pd.Series([3.5]))
    ('p', 'share', 'count')
    >>> column_kind("estimate", pd.Series([0.25])), column_kind("sessions", pd.Series([10])), column_kind("x", pd.Series(["a"]))
    ('number', 'count', 'text')
    """
    text = str(name).lower()
    if text == "clip" or text == "m":
        return "clip"
    if pd.api.types.is_bool_dtype(values):
        return "bool"
    numeric = pd.api.types.is_numeric_dtype(values)
    if numeric and _P_NAMES.search(text):
        return "p"
    if numeric and _SHARE_NAMES.search(text):
        return "share"
    if numeric and (_COUNT_NAMES.search(text) or pd.api.types.is_integer_dtype(values)):
        return "count"
    return "number" if numeric else "text"


def format_cell(value, kind: str, *, reason: str = "") -> object:
    """One cell as shown: by its column's ``kind``; a missing number reads ``n/a — reason``.

    >>> format_cell(333620.15, "count"), format_cell(2e-19, "p"), format_cell(0.0638, "share")
    ('333,620', '< 0.001', '6.38 %')
    >>> format_cell(float("inf"), "clip"), format_cell(float("nan"), "number", reason="no variance")
    ('∞', 'n/a — no variance')
    """
    if kind == "text":
        return value
    if value is None or (isinstance(value, float | np.floating) and math.isnan(value)) or value is pd.NA:
        return not_available(reason or "not computable here")
    if kind == "bool":
        return "yes" if bool(value) else "no"
    if kind == "clip":
        try:
            return clip_text(float(value))
        except (TypeError, ValueError):
            return value
    if not isinstance(value, int | float | np.integer | np.floating):
        return value
    if kind == "p":
        return format_p(float(value))
    if kind == "share":
        return format_share(float(value))
    if kind == "count":
        return format_count(float(value)) if math.isfinite(float(value)) else format_number(value)
    return format_number(value)


def display_frame(df: pd.DataFrame, *, kinds: Mapping[str, str] | None = None,
                  headers: Mapping[str, str] | None = None,
                  reasons: Mapping[str, str] | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """The table as shown: every cell formatted by its column's kind (``kinds`` overrides
    :func:`column_kind`), the columns under their human headers (``headers`` overrides :func:`header`). Returns
    it and, for the columns holding a missing value, the reason the cells give.

    >>> shown, missing = display_frame(pd.DataFrame({"experiment_id": ["e1", "e2"], "p_value": [1e-9, 0.25],
    ...                                              "ess": [333620.15, 12.0], "precision": [0.5, float("nan")]}))
    >>> shown.to_dict("list")
    {'A/B test': ['e1', 'e2'], 'p-value': ['< 0.001', '0.25'], 'ESS': ['333,620', '12'], 'precision': ['50 %', 'n/a — no offline ship decision']}
    >>> missing
    {'precision': 'no offline ship decision'}
    """
    kinds = dict(kinds or {})
    names = dict(headers or {})
    why = {**NA_REASONS, **(reasons or {})}
    out = {}
    missing: dict[str, str] = {}
    for col in df.columns:
        series = df[col]
        kind = kinds.get(col) or column_kind(col, series)
        reason = why.get(str(col), "not computable here")
        title = names.get(col) or header(col)
        if title in out:  # two names that read the same: keep both columns apart
            title = f"{title} ({col})"
        if kind != "text" and series.isna().any():
            missing[title] = reason
        out[title] = [format_cell(v, kind, reason=reason) for v in series.astype(object)]
    return pd.DataFrame(out, index=df.index), missing
