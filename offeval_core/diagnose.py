"""Which estimator can be trusted on these logs? Tests of the assumptions each estimator needs, weight
diagnostics per estimator, and a verdict (trust / caution / don't) with its reason.

Verdicts per estimator live in :mod:`offeval_core.verdicts`.

Assumption checks (each a real test with an effect size and a CI; docs/diagnose.md):

* **cascade** — does the chance of continuing past rank r depend on a reward at r? Rows at ranks below the
  deepest logged rank; continuing = the session logs rank r + 1. Cochran-Mantel-Haenszel test of
  (reward at r) × (continues), stratified by day × segment × arm × rank; effect = the Mantel-Haenszel
  common odds ratio of continuing after a reward (Robins-Breslow-Greenland CI). 1 under the position-based
  model (KDD'24 Asm. 2), < 1 when users stop after a reward.
* **reward interaction** — does the reward at rank k depend on what is above it, given the item? With an
  item → category table: within (item × rank × segment × day) strata, the slope of the reward on the number
  of same-category items above, session-clustered SE, two-sided; effect = the relative change of the reward
  rate per same-category item above. Without one: the same slope on "a reward above" (one-sided, a fall),
  which user-level heterogeneity biases upwards, so only satiation is detectable.
* **context-dependent position bias** — is the learnt PBM (the survival of session lengths) the same in every
  segment? CMH test of (segment) × (continues) stratified by day × arm × rank × reward at r (so a cascade
  effect does not masquerade as a segment effect), each segment against the rest, Holm-adjusted; effect =
  the common odds ratio of continuing. The rewards at the rank (every binary reward column) are among
  the strata, so a cascade on rewards whose rates differ by segment does not masquerade as a segment effect.
* **support** — ranking logs: the share of the target's exposure under the discount D that IPS can see,
  mean over control sessions of Σ_i D(R_t(i)) / D0(R_0(i)) divided by Σ_{r ≤ K} D(r) (1 with full support;
  one-sided t-test of < 1), and the exposure share beyond the deepest logged rank. Propensity logs: the
  mean importance weight (1 with full support), session-clustered.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from offeval_core.arms import offline_rows
from offeval_core.defaults import LEVEL
from offeval_core.discounts import parse_discount
from offeval_core.errors import InputError, UnknownName
from offeval_core.importance import exposure_weights
from offeval_core.logs import POLICY_PREFIX, TARGET_CONDITIONAL_PREFIX, TARGET_PROPENSITY_PREFIX, Logs
from offeval_core.multiple import holm
from offeval_core.policies import choose_target_policy, target_policies
from offeval_core.results import json_number
from offeval_core.stats import normal_quantile, one_sided_p, two_sided_p
from offeval_core.verdicts import EstimatorCheck, ranking_estimators, slate_estimators

__all__ = [
    "CHECKS", "RANK_CAP", "VERDICTS", "AssumptionCheck", "Diagnosis", "check_cascade",
    "check_context_position_bias", "check_interaction", "check_support", "diagnose",
]


CHECKS = ("cascade", "reward interaction", "context-dependent position bias", "support")
VERDICTS = ("trust", "caution", "don't")
RANK_CAP = 30


@dataclass(frozen=True)
class AssumptionCheck:
    """One assumption test: effect (with its name and a CI at ``level``), p-value, whether it fires at α."""

    name: str
    question: str
    test: str
    effect: float
    effect_label: str
    low: float
    high: float
    p_value: float
    fires: bool
    n: int
    finding: str
    identified: bool = True

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("effect", "low", "high", "p_value"):
            d[k] = json_number(d[k])
        return d


@dataclass(frozen=True)
class Diagnosis:
    source: str
    reward: str
    policy: str | None
    alpha: float
    checks: tuple[AssumptionCheck, ...]
    estimators: tuple[EstimatorCheck, ...]
    level: float = LEVEL
    """The confidence level of every CI: the checks' and, in :meth:`table` and the verdict chart, the estimators'."""

    def check(self, name: str) -> AssumptionCheck:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict:
        return {"source": self.source, "reward": self.reward, "policy": self.policy, "alpha": self.alpha,
                "level": self.level, "checks": [c.to_dict() for c in self.checks], "estimators": [e.to_dict() for e in self.estimators]}

    def table(self) -> pd.DataFrame:
        """One row per assumption and per estimator (the page's table). ``estimate`` holds what the row
        estimates — an assumption test's effect (named in ``effect``) or an estimator's value of the target policy
        (reward per session), each with its CI (an estimator's: normal, value ± z · stderr at the diagnosis's
        ``level``); an estimator's weight concentration is in its own column, ``ESS share`` (Kish ESS / rows).

        >>> e = EstimatorCheck("ips", "IPS", 0.004, 0.001, 500.0, 0.25, 0.01, 0.1, (), "trust", "")
        >>> t = Diagnosis("x", "click", "bts", 0.05, (), (e,)).table()  # the default level 0.99: z = 2.5758
        >>> t[["estimate", "CI low", "ESS share"]].round(5).values.tolist()   # 0.004 − 2.5758 · 0.001
        [[0.004, 0.00142, 0.25]]
        >>> Diagnosis("x", "click", "bts", 0.05, (), (e,), level=0.95).table()["CI low"].round(5).tolist()
        [0.00204]
        """
        z = normal_quantile(self.level)
        rows = [{"row": f"assumption: {c.name}", "test": c.test, "effect": c.effect_label,
                 "estimate": c.effect, "CI low": c.low, "CI high": c.high, "p-value": c.p_value,
                 "ESS share": math.nan,
                 "result": ("violated" if c.fires else "not rejected") if c.identified else "not testable",
                 "reason": c.finding} for c in self.checks]
        rows += [{"row": f"estimator: {e.label}", "test": "weights", "effect": f"value of {self.policy or 'the target'}",
                  "estimate": e.value, "CI low": e.value - z * e.stderr, "CI high": e.value + z * e.stderr,
                  "p-value": math.nan, "ESS share": e.ess_share,
                  "result": e.verdict, "reason": e.reason} for e in self.estimators]
        cols = ["row", "result", "reason", "estimate", "CI low", "CI high", "p-value", "ESS share", "effect", "test"]
        return pd.DataFrame(rows)[cols]


# ------------------------------------------------------------------------------------------ helpers


def _codes(*cols) -> np.ndarray:
    """Dense stratum codes of the row-wise combination of the given arrays."""
    frame = pd.DataFrame({i: np.asarray(c) for i, c in enumerate(cols)})
    return frame.groupby(list(frame.columns), sort=False, observed=True).ngroup().to_numpy()


def _cmh(x: np.ndarray, y: np.ndarray, strata: np.ndarray, *, level: float):
    """Mantel-Haenszel common odds ratio of y for x, its CI and the CMH p-value; None without information."""
    k = int(strata.max()) + 1 if len(strata) else 0
    cell = strata * 4 + x.astype(int) * 2 + y.astype(int)
    c = np.bincount(cell, minlength=4 * k).reshape(k, 4)
    d0, c0, b0, a0 = c[:, 0], c[:, 1], c[:, 2], c[:, 3]        # (x, y): 00, 01, 10, 11
    ok = (a0 + b0 > 0) & (c0 + d0 > 0) & (a0 + c0 > 0) & (b0 + d0 > 0)
    if ok.sum() == 0:
        return None
    tables = np.stack([np.stack([a0[ok], b0[ok]]), np.stack([c0[ok], d0[ok]])]).astype(float)
    from statsmodels.stats.contingency_tables import StratifiedTable  # (imported here: ~0.5 s, rarely needed)

    st = StratifiedTable(tables)
    with np.errstate(divide="ignore", invalid="ignore"):   # complete separation: OR 0 or ∞, CI undefined
        lo, hi = st.oddsratio_pooled_confint(alpha=1 - level)
        orr = float(st.oddsratio_pooled)
    return orr, float(lo), float(hi), float(st.test_null_odds(correction=False).pvalue), int(ok.sum())


def _within_slope(y: np.ndarray, x: np.ndarray, strata: np.ndarray, clusters: np.ndarray):
    """Slope of y on x within strata (fixed effects) with a cluster-robust SE.

    Demeaning within a stratum of n_s rows shrinks its residuals by (n_s − 1) / n_s in variance, so each
    residual is scaled by √(n_s / (n_s − 1)) (singleton strata carry no information and drop out); without
    this the SE is too small when most strata hold two or three rows, e.g. item × rank × segment × day."""
    size = np.bincount(strata)
    n_s = size[strata].astype(float)

    def demean(v):
        means = np.bincount(strata, weights=v) / size
        return v - means[strata]
    xd, yd = demean(x.astype(float)), demean(y.astype(float))
    sxx = float((xd * xd).sum())
    if sxx == 0:
        return math.nan, math.nan
    b = float((xd * yd).sum() / sxx)
    inflate = np.sqrt(np.where(n_s > 1, n_s / np.maximum(n_s - 1, 1), 0.0))
    score = np.bincount(clusters, weights=xd * (yd - b * xd) * inflate)
    return b, float(math.sqrt((score ** 2).sum()) / sxx)


def _prepared(logs: Logs, reward: str) -> pd.DataFrame:
    f = logs.frame
    sess = f["session"].to_numpy()
    rank = f["rank"].to_numpy()
    nxt_same = np.r_[sess[1:] == sess[:-1], False]
    nxt_rank = np.r_[rank[1:], -1]
    out = pd.DataFrame({
        "session": sess, "rank": rank, "r": f[reward].to_numpy() > 0,
        "cont": nxt_same & (nxt_rank == rank + 1),
        # day and arm are only stratum labels: codes in order of first appearance group like the values
        "day": pd.factorize(f["day"])[0], "segment": f["segment"].astype(str).to_numpy(),
        "arm": pd.factorize(f["arm"])[0],
        "rank_cap": np.minimum(rank, RANK_CAP),
    })
    if "item_id" in f.columns:
        out["item"] = pd.factorize(f["item_id"])[0]
    # every binary reward at the row (a cascade may stop on any of them), for stratifying
    binary = [c for c in logs.rewards if np.isin(f[c].to_numpy(), (0.0, 1.0)).all()]
    out["r_any"] = _codes(*(f[c].to_numpy() > 0 for c in binary)) if binary else out["r"].astype(int)
    return out


def _full_slates(logs: Logs) -> bool:
    """Propensity slate logs log every slot; continuation then says nothing about the user."""
    return "logging_conditional_propensity" in logs.frame.columns or "logging_propensity" in logs.frame.columns


# ------------------------------------------------------------------------------------------ checks


def check_cascade(logs: Logs, reward: str, *, alpha: float = 0.05, level: float = LEVEL) -> AssumptionCheck:
    """Does the chance of continuing past rank r depend on a reward at r? (CMH, see the module docstring.)"""
    q = "does the chance of continuing depend on a reward at this rank?"
    p = _prepared(logs, reward)
    if _full_slates(logs):
        return _rewards_above(p, name="cascade", question=q, alpha=alpha, level=level,
                              why="every slot of the slate is logged, so the test is whether a reward above "
                                  "lowers the chance of a reward below, given the item and slot")
    p = p[p["rank"] < p["rank"].max()]
    res = _cmh(p["r"].to_numpy(), p["cont"].to_numpy(), _codes(p["day"], p["segment"], p["arm"], p["rank_cap"]),
               level=level)
    if res is None:
        return AssumptionCheck("cascade", q, "CMH", math.nan, "odds ratio of continuing after a reward",
                               math.nan, math.nan, math.nan, False, len(p), "not testable: no rank with both "
                               "rewarded and unrewarded rows that some sessions leave", identified=False)
    orr, lo, hi, pv, k = res
    fires = pv < alpha
    cont_r, cont_n = p.loc[p["r"], "cont"].mean(), p.loc[~p["r"], "cont"].mean()
    finding = (f"sessions continue after a reward with odds ratio {orr:.2f} [{lo:.2f}, {hi:.2f}] "
               f"(raw: {cont_r:.1%} vs {cont_n:.1%} without), p = {pv:.2g} over {k} strata: "
               + ("users stop after rewards — cascade behaviour." if fires and orr < 1 else
                  "continuing depends on the reward." if fires else "no evidence of cascade behaviour."))
    return AssumptionCheck("cascade", q, "Cochran-Mantel-Haenszel, strata day × segment × arm × rank",
                           orr, "odds ratio of continuing after a reward", lo, hi, pv, fires, len(p), finding)


def _rewards_above(p: pd.DataFrame, *, name: str, question: str, alpha: float, level: float, why: str = ""):
    above = p.groupby("session")["r"].cumsum() - p["r"]  # over every row, so rank 1's reward counts as above
    keep = (p["rank"] >= 2).to_numpy()
    p, above = p.loc[keep], above.loc[keep]
    has_item = "item" in p.columns
    strata_cols = [p["item"]] if has_item else []
    strata = _codes(*strata_cols, p["rank_cap"], p["segment"], p["day"])
    given = "given the item" if has_item else "given the rank, segment and day (the logs have no item column)"
    stratum = "item × rank × segment × day" if has_item else "rank × segment × day; no item column"
    b, se = _within_slope(p["r"].to_numpy(), (above > 0).to_numpy(), strata, p["session"].to_numpy())
    base = float(p["r"].mean()) if len(p) else 0.0
    if base == 0 or math.isnan(b):
        return AssumptionCheck(name, question, "—", math.nan, "relative change of the reward rate", math.nan,
                               math.nan, math.nan, False, len(p), "not testable: no reward below rank 1 or no "
                               "variation in the rewards above within an item.", identified=False)
    z = normal_quantile(level)
    rel, lo, hi = b / base, (b - z * se) / base, (b + z * se) / base
    pv = one_sided_p(-b, se) if se > 0 else math.nan   # one-sided: a fall
    fires = bool(pv < alpha)
    finding = (f"a reward above changes the reward rate by {rel:+.1%} [{lo:+.1%}, {hi:+.1%}] {given}, "
               f"p = {pv:.2g} (one-sided, a fall)" + (f"; {why}" if why else "") + ".")
    return AssumptionCheck(name, question, f"within-stratum slope on 'a reward above' ({stratum}), "
                           "session-clustered SE", rel, "relative change of the reward rate after a reward above",
                           lo, hi, pv, fires, len(p), finding)


def check_interaction(logs: Logs, reward: str, *, categories: Mapping | pd.Series | None = None,
                      alpha: float = 0.05, level: float = LEVEL) -> AssumptionCheck:
    """Does the reward at rank k depend on what is above it, given the item? (see the module docstring)."""
    q = "does the reward at rank k depend on the items or rewards above, given the item?"
    p = _prepared(logs, reward)
    if (categories is None or "item_id" not in logs.frame.columns) and _full_slates(logs):
        return AssumptionCheck("reward interaction", q, "—", math.nan, "relative change of the reward rate",
                               math.nan, math.nan, math.nan, False, len(p),
                               "not testable without item categories: on slate logs the rewards-above test is "
                               "the cascade check.", identified=False)
    if categories is None or "item_id" not in logs.frame.columns:
        return _rewards_above(p, name="reward interaction", question=q, alpha=alpha, level=level,
                              why="no item categories given, so only a fall after rewards above is testable")
    cat = pd.Series(logs.frame["item_id"].to_numpy()).map(pd.Series(categories))
    if cat.isna().any():
        missing = int(cat.isna().sum())
        raise InputError(f"the item category table lacks {missing} logged row(s)' items "
                         f"(first item: {logs.frame['item_id'].iloc[int(np.flatnonzero(cat.isna())[0])]!r})")
    p["cat"] = pd.factorize(cat)[0]
    same_above = p.groupby(["session", "cat"]).cumcount().to_numpy()
    keep = p["rank"].to_numpy() >= 2
    p = p.loc[keep]
    x = same_above[keep]
    strata = _codes(p["item"], p["rank_cap"], p["segment"], p["day"])
    b, se = _within_slope(p["r"].to_numpy(), x, strata, p["session"].to_numpy())
    base = float(p["r"].mean()) if len(p) else 0.0
    if base == 0 or math.isnan(b):
        return AssumptionCheck("reward interaction", q, "—", math.nan, "relative change of the reward rate",
                               math.nan, math.nan, math.nan, False, len(p), "not testable: no reward below rank 1 "
                               "or no variation in same-category items above within an item.", identified=False)
    z = normal_quantile(level)
    rel, lo, hi = b / base, (b - z * se) / base, (b + z * se) / base
    pv = two_sided_p(b, se) if se > 0 else math.nan
    fires = bool(pv < alpha)
    finding = (f"each same-category item above changes the reward rate by {rel:+.1%} [{lo:+.1%}, {hi:+.1%}] "
               f"given the item and rank, p = {pv:.2g}: "
               + ("rewards interact across ranks." if fires else "no evidence of reward interactions."))
    return AssumptionCheck("reward interaction", q, "within-stratum slope on same-category items above "
                           "(item × rank × segment × day), session-clustered SE, two-sided", rel,
                           "relative change of the reward rate per same-category item above", lo, hi, pv, fires,
                           len(p), finding)


def check_context_position_bias(logs: Logs, reward: str, *, alpha: float = 0.05,
                                level: float = LEVEL) -> AssumptionCheck:
    """Is the learnt PBM the same in every segment? (CMH per segment vs the rest, Holm-adjusted.)"""
    q = "is the learnt position-bias curve the same in every segment?"
    p = _prepared(logs, reward)
    segs = sorted(p["segment"].unique())
    label = "odds ratio of continuing, segment vs the rest"
    if len(segs) < 2 or _full_slates(logs):
        why = "one segment only" if len(segs) < 2 else "every slot is logged, so session length says nothing"
        return AssumptionCheck("context-dependent position bias", q, "CMH", math.nan, label, math.nan, math.nan,
                               math.nan, False, len(p), f"not testable: {why}.", identified=False)
    p = p[p["rank"] < p["rank"].max()]
    strata = _codes(p["day"], p["arm"], p["rank_cap"], p["r"], p["r_any"])
    results = []
    for s in segs[: 1 if len(segs) == 2 else len(segs)]:
        res = _cmh((p["segment"] == s).to_numpy(), p["cont"].to_numpy(), strata, level=level)
        if res is not None:
            results.append((s, *res))
    if not results:
        return AssumptionCheck("context-dependent position bias", q, "CMH", math.nan, label, math.nan, math.nan,
                               math.nan, False, len(p), "not testable: no stratum with both segments.",
                               identified=False)
    adj = holm([r[4] for r in results])
    i = int(np.argmin(adj))
    s, orr, lo, hi, _, _k = results[i]
    pv = float(adj[i])
    lengths = logs.sessions.groupby(logs.sessions["segment"].astype(str), observed=True)["length"].mean()
    fires = pv < alpha
    finding = (f"segment {s!r} continues with odds ratio {orr:.2f} [{lo:.2f}, {hi:.2f}] against the rest "
               f"(mean session length " + ", ".join(f"{k_} {v:.1f}" for k_, v in lengths.items())
               + f"), p = {pv:.2g}" + (" (Holm)" if len(results) > 1 else "") + ": "
               + ("one position-bias curve does not fit every segment." if fires
                  else "one position-bias curve fits every segment."))
    return AssumptionCheck("context-dependent position bias", q,
                           "Cochran-Mantel-Haenszel per segment, strata day × arm × rank × rewards at the rank",
                           orr, label, lo, hi, pv, bool(fires), len(p), finding)


def check_support(logs: Logs, *, policy: str | None, discount: str = "log2", alpha: float = 0.05,
                  level: float = LEVEL) -> AssumptionCheck:
    """Share of the target's exposure the logs can see (see the module docstring)."""
    q = "does the logging policy show what the target would show?"
    f = offline_rows(logs.frame)
    label = "share of the target's exposure with support"
    z = normal_quantile(level)
    prop = TARGET_PROPENSITY_PREFIX + policy if policy else None
    cond = TARGET_CONDITIONAL_PREFIX + policy if policy else None
    if policy and (prop in f.columns or cond in f.columns):
        if prop in f.columns and "logging_propensity" in f.columns:
            w = f[prop].to_numpy() / f["logging_propensity"].to_numpy()
        else:
            w = f[cond].to_numpy() / f["logging_conditional_propensity"].to_numpy()
        sess = f["session"].to_numpy()
        first_slot = np.r_[True, sess[1:] != sess[:-1]]
        w1 = w[first_slot]                                       # one slot per session: independent units
        m, se = float(w1.mean()), float(w1.std(ddof=1) / math.sqrt(len(w1)))
        pv = one_sided_p(1 - m, se) if se > 0 else (0.0 if m < 1 else 1.0)  # one-sided: below 1
        fires = pv < alpha
        finding = (f"the mean importance weight at the top slot is {m:.3f} [{m - z * se:.3f}, {m + z * se:.3f}] "
                   f"(1 with full support), p = {pv:.2g}: "
                   + (f"about {1 - m:.1%} of the target's choices are never logged." if fires
                      else "no evidence of missing support."))
        return AssumptionCheck("support", q, "one-sided test of mean weight < 1", m, label, m - z * se, m + z * se,
                               pv, bool(fires), len(w1), finding)
    if not policy or POLICY_PREFIX + policy not in f.columns:
        return AssumptionCheck("support", q, "—", math.nan, label, math.nan, math.nan, math.nan, False, len(f),
                               "not testable: name a target policy with rank__<policy> or propensity columns.",
                               identified=False)
    d = parse_discount(discount, logs=logs)
    k = int(f[POLICY_PREFIX + policy].max())
    total = float(d(np.arange(1, k + 1)).sum())
    sess, w = exposure_weights(logs, policy, discount=discount, exposure="pbm")
    per = np.bincount(sess, weights=w)                # the target's exposure each session sees: Σ_i w_i
    per = per[np.unique(sess)] / total
    m, se = float(per.mean()), float(per.std(ddof=1) / math.sqrt(len(per)))
    deepest = int(f["rank"].max())
    beyond = float(d(np.arange(deepest + 1, k + 1)).sum() / total) if k > deepest else 0.0
    pv = one_sided_p(1 - m, se) if se > 0 else (0.0 if m < 1 else 1.0)  # one-sided: below 1
    fires = pv < alpha
    finding = (f"IPS sees {m:.1%} [{m - z * se:.1%}, {m + z * se:.1%}] of the {policy} policy's exposure under {d.spec}; "
               f"{beyond:.1%} of it lies beyond the deepest logged rank {deepest} (of {k}), p = {pv:.2g}: "
               + ("the target shows items the logs never reach." if fires else "no evidence of missing support."))
    return AssumptionCheck("support", q, f"one-sided t-test of covered exposure < 1 (D = {d.spec}, D0 = learnt PBM)",
                           m, label, m - z * se, m + z * se, pv, bool(fires), len(per), finding)


_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Logs → {(check, reward, alpha, level): result}
_CHECKED_LOCK = threading.Lock()


def _checked_once(logs: Logs, key: tuple, check: Callable[[], AssumptionCheck]) -> AssumptionCheck:
    """``check()`` run once per Logs object and ``key`` (the logs are immutable once read and a check is frozen):
    a new discount, policy or clip on the same logs reuses the checks that do not depend on them."""
    with _CHECKED_LOCK:
        done = _CHECKED.setdefault(logs, {})
        if key in done:
            return done[key]
    result = check()
    with _CHECKED_LOCK:
        return done.setdefault(key, result)


def diagnose(logs: Logs, *, reward: str, policy: str | None = None, discount: str = "log2",
             categories: Mapping | pd.Series | None = None, alpha: float = 0.05, level: float = LEVEL) -> Diagnosis:
    """Every assumption check and every applicable estimator's verdict on these logs.

    ``policy`` defaults to the default target policy (:func:`offeval_core.policies.choose_target_policy` over
    the rank, propensity and slate policies): ``treatment`` when the logs have it and it is not the logging
    policy, else the first policy that is not the logging policy.
    """
    logs.check_reward(reward)
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")
    props = sorted({c.split("__", 1)[1] for c in logs.frame.columns
                    if c.startswith((TARGET_PROPENSITY_PREFIX, TARGET_CONDITIONAL_PREFIX))})
    known = list(logs.policies) + props
    if policy is None and known:
        policy = choose_target_policy(known, logging=target_policies(logs).logging)
    if policy is not None and policy not in known:
        raise UnknownName(f"unknown policy {policy!r}; the logs have: {', '.join(known) or 'no target policy'}")
    # the checks that depend on neither the policy nor the discount are computed once per logs (the interaction
    # check too, unless a category table is given: that table is not part of the key)
    checks = (
        _checked_once(logs, ("cascade", reward, alpha, level),
                      lambda: check_cascade(logs, reward, alpha=alpha, level=level)),
        check_interaction(logs, reward, categories=categories, alpha=alpha, level=level) if categories is not None
        else _checked_once(logs, ("interaction", reward, alpha, level),
                           lambda: check_interaction(logs, reward, alpha=alpha, level=level)),
        _checked_once(logs, ("context", reward, alpha, level),
                      lambda: check_context_position_bias(logs, reward, alpha=alpha, level=level)),
        check_support(logs, policy=policy, discount=discount, alpha=alpha, level=level),
    )
    by_name = {c.name: c for c in checks}
    if policy is None:
        ests = []
    elif policy in props:
        ests = slate_estimators(logs, reward, policy, by_name)
    else:
        ests = ranking_estimators(logs, reward, policy, by_name, discount)
    return Diagnosis(logs.source, reward, policy, alpha, checks, tuple(ests), level)
