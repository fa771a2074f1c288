"""Offline-online correlation across days (KDD'24 Sec. 6.1, Table 2).

Rows are (experiment, reward, policy ∈ {R0 = logging, Rt = the target policy that served the treatment arm, by
default the one named ``treatment``}); columns are offline metric variants. A cell correlates, across the days of
the experiment, the online mean per-session reward of the policy's arm (R0: control, Rt: treatment) with the
offline estimate of the policy computed on that day's control-arm logs. Pearson's r with the two-tailed Student-t p-value (as in the paper), Kendall's τ or
Spearman's ρ on request; † marks p < 0.05 and the best variant of each row is bold.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core import stats
from offeval_core.analyses._common import (
    Variant,
    as_variant,
    check_in_grid,
    check_moments,
    check_policy_in,
    check_rewards,
    variant_label,
)
from offeval_core.charts import correlation_figure, correlation_series_figure
from offeval_core.engine import Moments
from offeval_core.errors import InputError, UnknownName
from offeval_core.estimators import ESTIMATORS, aggregate, estimate_from_row, select
from offeval_core.formatting import CORRELATION_SYMBOLS
from offeval_core.logs import LOGGING_POLICY
from offeval_core.validation import check_choice

__all__ = ["DEFAULT_VARIANTS", "CorrelationResult", "HeadlineRows", "correlation_figure", "correlation_series_figure",
           "default_variants", "headline_rows", "is_identity", "offline_online_correlation", "pooled_correlation"]

MIN_DAYS = 4
TRACK_R = 0.5
"""A variant tracks the online reward when its median correlation across the (experiment, reward) rows is at least
this (a strong correlation by the usual convention) and it is positive and significant in at least one row (a few
days per experiment leave single rows weak); otherwise the takeaway says that nothing tracks, and why."""
METHODS = ("pearson", "kendall", "spearman")


def _arm(policy: str) -> str:
    """The arm whose online reward a policy's row is correlated with: the logging policy R₀ served the control
    arm, the target policy Rₜ the treatment arm."""
    return "control" if policy == LOGGING_POLICY else "treatment"


def _label(policy: str) -> str:
    return "R₀" if policy == LOGGING_POLICY else "Rₜ"


def default_variants(q_clip: float = math.inf, *, pbm: str = "pbm") -> tuple[Variant, ...]:
    """The five columns of KDD'24 Table 2 with de-biased labels Q̂ clipped at ``q_clip`` (default ∞):
    DCG (log2, C), DCG (log2, Q̂), DCG (pbm, C), DCG (pbm, Q̂), nDCG (pbm, Q̂). ``C`` is m = 1."""
    return (Variant("dcg", "log2", "log2", 1.0), Variant("dcg", "log2", "log2", float(q_clip)),
            Variant("dcg", pbm, pbm, 1.0), Variant("dcg", pbm, pbm, float(q_clip)),
            Variant("ndcg", pbm, pbm, float(q_clip)))


DEFAULT_VARIANTS: tuple[Variant, ...] = default_variants()


@dataclass(frozen=True, eq=False)
class CorrelationResult:
    """Result of :func:`offline_online_correlation`.

    ``table`` (tidy): experiment_id, reward, policy, policy_label, variant, metric, discount, exposure, clip,
    n_days, r, p_value, significant (p < 0.05), identity, best (highest r of its row among the non-identity
    cells). ``identity`` marks cells that equal the online control by construction: DCG of the logging policy
    with D = D0 and m = ∞ is Σ_i c_i · D(r_i)/D0(r_i) = Σ_i c_i, the observed reward of the control arm, so
    r = 1 whatever the logs (see :func:`is_identity`); such cells are reported, never ranked. ``daily``:
    the per-day online and offline values the correlations were computed from.
    """

    table: pd.DataFrame
    daily: pd.DataFrame
    variants: tuple[Variant, ...]
    method: str
    warnings: tuple[str, ...]
    takeaway: str
    alpha: float = 0.05
    labels: tuple[str, ...] = field(default=())
    target: str = "treatment"
    """The target policy Rₜ of the rows (the policy that served the treatment arm)."""

    def headline_rows(self) -> HeadlineRows | None:
        """The rows the takeaway ranks the variants on (:func:`headline_rows`); the chart's medians use them."""
        return headline_rows(self.table, self.labels)

    def wide(self) -> pd.DataFrame:
        """Table-2 layout: one row per (experiment, reward, policy) of the table, in its order (a row whose r is
        missing stays, NaN; a combination of levels with no cell is no row), columns (variant, r | p)."""
        keys = ["experiment_id", "reward", "policy_label"]
        t = self.table.drop_duplicates([*keys, "variant"])
        w = t.set_index([*keys, "variant"])[["r", "p_value"]].unstack("variant")
        w = w.reindex(pd.MultiIndex.from_frame(t[keys].drop_duplicates()))
        w = w.swaplevel(0, 1, axis=1)
        cols = [(v, s) for v in self.labels for s in ("r", "p_value")]
        return w.reindex(columns=pd.MultiIndex.from_tuples(cols, names=["variant", "statistic"]))

    def styled_html(self) -> str:
        """An HTML table that looks like KDD'24 Table 2: r and p per variant, † where p < 0.05, the best
        r of each row in bold. Self-contained (inline CSS)."""
        sym = CORRELATION_SYMBOLS[self.method]
        head1 = "".join(f'<th colspan="2">{html.escape(v)}</th>' for v in self.labels)
        head2 = "".join(f"<th>{sym}</th><th>p-val</th>" for _ in self.labels)
        body = []
        for (exp, reward, pol), part in self.table.groupby(["experiment_id", "reward", "policy_label"],
                                                           sort=False):
            cells = []
            by_variant = part.set_index("variant")
            for v in self.labels:
                rec = by_variant.loc[v]
                if np.isnan(rec["r"]):
                    cells.append("<td>–</td><td>–</td>")
                    continue
                if rec["identity"]:
                    cells.append(f'<td style="color:#888" title="identity: offline on the logging policy '
                                 f'equals the online control by construction">≡ {rec["r"]:.2f}</td><td>–</td>')
                    continue
                txt = f"{rec['r']:.2f}" + ("<sup>†</sup>" if rec["significant"] else "")
                if rec["best"]:
                    txt = f"<b>{txt}</b>"
                p = rec["p_value"]
                ptxt = "&lt;0.01" if p < 0.01 else f"{p:.2f}"
                cells.append(f"<td>{txt}</td><td>{ptxt}</td>")
            body.append(f"<tr><th>{html.escape(str(exp))}</th><th>{html.escape(str(reward))}</th>"
                        f"<th>{html.escape(str(pol))}</th>{''.join(cells)}</tr>")
        caption = (f"Correlation across days between the online mean reward per session and offline metrics "
                   f"({ {'pearson': 'Pearson', 'kendall': 'Kendall', 'spearman': 'Spearman'}[self.method] } "
                   f"{sym}, two-tailed p). † p &lt; {self.alpha:g}; bold: best per row; ≡: identity (DCG of the logging "
                   f"policy with D = D0 at m = ∞, or an importance estimator of it, is the control arm's observed "
                   f"reward, r = 1 by construction; not ranked). R₀ = logging policy "
                   f"(control arm), Rₜ = {html.escape(self.target)} (treatment arm); offline values on control logs.")
        style = ("<style>.t2{border-collapse:collapse;font:13px Helvetica,Arial,sans-serif}"
                 ".t2 td,.t2 th{padding:3px 8px;text-align:right;border-bottom:1px solid #ddd}"
                 ".t2 thead th{border-bottom:2px solid #333;text-align:center}"
                 ".t2 caption{caption-side:bottom;text-align:left;padding-top:6px;color:#444}</style>")
        return (f'{style}<table class="t2"><caption>{caption}</caption><thead>'
                f'<tr><th rowspan="2">experiment</th><th rowspan="2">reward</th><th rowspan="2">policy</th>'
                f"{head1}</tr><tr>{head2}</tr></thead><tbody>{''.join(body)}</tbody></table>")

    def series(self, experiment_id, reward: str, policy: str) -> pd.DataFrame:
        """Day-by-day online value and every variant's offline estimate for one row (for the drill-down).

        Columns ``day``, ``online`` and one per variant label; ``.attrs`` holds the keys and each variant's r.
        """
        pol = _policy_name(policy, self.target)
        d = self.daily[(self.daily["experiment_id"].astype(str) == str(experiment_id))
                       & (self.daily["reward"] == reward) & (self.daily["policy"] == pol)]
        if d.empty:
            raise UnknownName(f"no row for experiment {experiment_id!r}, reward {reward!r}, policy {policy!r}")
        wide = d.pivot_table(index="day", columns="variant", values="offline", aggfunc="first", sort=True)
        wide = wide.reindex(columns=[v for v in self.labels if v in wide.columns])
        online = d.groupby("day")["online"].first()
        out = pd.concat([online, wide], axis=1).reset_index()
        out.columns.name = None
        t = self.table[(self.table["experiment_id"].astype(str) == str(experiment_id))
                       & (self.table["reward"] == reward) & (self.table["policy"] == pol)]
        out.attrs = {"experiment_id": experiment_id, "reward": reward, "policy": pol,
                     "policy_label": _label(pol), "method": self.method,
                     "r": dict(zip(t["variant"], t["r"].astype(float), strict=True)),
                     "identity": [v for v, same in zip(t["variant"], t["identity"], strict=True) if same]}
        return out

    def series_takeaway(self, experiment_id, reward: str, policy: str) -> str:
        """One sentence on a drill-down row: the variant whose daily estimates follow the online reward most
        and least closely (by this result's correlation), identities named as such, never ranked.

        >>> from offeval_core.analyses import Variant
        >>> t = pd.DataFrame({"experiment_id": ["e"] * 2, "reward": ["click"] * 2, "policy": ["treatment"] * 2,
        ...                   "variant": ["A", "B"], "r": [0.9, 0.4], "identity": [False, False]})
        >>> d = pd.DataFrame({"experiment_id": ["e"] * 8, "reward": ["click"] * 8, "policy": ["treatment"] * 8,
        ...                   "day": [1, 2, 3, 4] * 2, "variant": ["A"] * 4 + ["B"] * 4, "online": [1, 2, 3, 4] * 2,
        ...                   "offline": [1, 2, 3, 5, 2, 1, 3, 4]})
        >>> res = CorrelationResult(table=t, daily=d, variants=(), method="pearson", warnings=(), takeaway="",
        ...                         labels=("A", "B"))
        >>> res.series_takeaway("e", "click", "treatment")
        'e · click · Rₜ (treatment), 4 days: A follows the online reward most closely (Pearson r = 0.90), B least (r = 0.40).'
        """
        s = self.series(experiment_id, reward, policy)
        meta = s.attrs
        label = f"{meta['policy_label']} ({meta['policy']})"
        head = f"{experiment_id} · {reward} · {label}, {len(s)} days: "
        same = list(meta["identity"])
        ranked = {v: r for v, r in meta["r"].items() if v not in same and not math.isnan(r)}
        name, sym = self.method.capitalize(), CORRELATION_SYMBOLS[self.method]
        if not ranked:
            text = head + f"no {name} correlation is computable (fewer than {MIN_DAYS} days or a constant series)."
        else:
            order = sorted(ranked, key=ranked.get, reverse=True)
            best, worst = order[0], order[-1]
            text = head + f"{best} follows the online reward most closely ({name} {sym} = {ranked[best]:.2f})"
            text += (f", {worst} least ({sym} = {ranked[worst]:.2f})." if worst != best else ".")
        if same:
            text += (f" {' and '.join(same)} {'equals' if len(same) == 1 else 'equal'} the online control by "
                     f"construction (≡ identity, {sym} = 1): not evidence, not ranked.")
        return text


def _policy_name(policy: str, target: str = "treatment") -> str:
    aliases = {"R0": LOGGING_POLICY, "R₀": LOGGING_POLICY, "Rt": target, "Rₜ": target}
    return aliases.get(policy, policy)


def _correlate(x: np.ndarray, y: np.ndarray, method: str) -> tuple[float, float]:
    if method == "pearson":
        return stats.pearson(x, y)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    from scipy import stats as _sps  # (imported here: ~0.45 s that the first page does not need)

    res = _sps.kendalltau(x, y) if method == "kendall" else _sps.spearmanr(x, y)
    return float(res.statistic), float(res.pvalue)


def offline_online_correlation(moments: Moments, *, variants: Sequence = DEFAULT_VARIANTS,
                               policies: Sequence[str] = (LOGGING_POLICY, "treatment"), method: str = "pearson",
                               rewards: Sequence[str] | None = None, alpha: float = 0.05) -> CorrelationResult:
    """Correlation across days between online reward and offline estimates (KDD'24 Table 2).

    For row (e, reward, π) and variant v: r = corr_d(ȳ_{e,d,arm(π)}, V̂_v(π; control logs of e, d)), where
    ȳ is the mean per-session reward of the arm that served π and V̂ the mean per-session offline
    metric (Eq. 9 with D, D0, m of the variant). Pearson's p is two-tailed from Student's t with
    n_days − 2 degrees of freedom.

    Examples
    --------
    Deviations (−1, 0, 1) and (−1, 1, 0): r = Σ dx·dy / √(Σdx² Σdy²) = 1 / √(2·2) = 0.5.

    >>> round(_correlate(np.array([1.0, 2, 3]), np.array([1.0, 3, 2]), "pearson")[0], 4)
    0.5
    """
    check_moments(moments)
    check_choice(method, METHODS, name="method")
    variants = tuple(as_variant(v, name="variants entry") for v in variants)
    if not variants:
        raise InputError("variants must list at least one (metric, discount, exposure, clip), got none")
    labels = tuple(dict.fromkeys(variant_label(v) for v in variants))
    if len(labels) != len(variants):
        raise InputError("variants contains duplicates: " + ", ".join(variant_label(v) for v in variants))
    for v in variants:
        check_in_grid(moments, v)
    targets = [p for p in policies if _policy_name(p) != LOGGING_POLICY and p not in ("Rt", "Rₜ")]
    if len(set(targets)) > 1:
        raise InputError(f"policies must be 'logging' (R0, control arm) and at most one target policy (Rt, the "
                         f"policy that served the treatment arm): only they have an online arm; got "
                         f"{', '.join(map(repr, dict.fromkeys(targets)))}")
    target = targets[0] if targets else "treatment"
    pols = tuple(dict.fromkeys(_policy_name(p, target) for p in policies))
    for p in pols:
        if p != LOGGING_POLICY:
            check_policy_in(moments, p)
    rewards = check_rewards(moments, rewards)

    on = moments.online
    on = on.groupby(["experiment_id", "day", "arm", "reward"], observed=True)[["n", "sum"]].sum().reset_index()
    on["online"] = on["sum"] / on["n"].where(on["n"] > 0)
    daily_parts = []
    for reward in rewards:
        for pol in pols:
            online = on[(on["reward"] == reward) & (on["arm"] == _arm(pol))][["experiment_id", "day",
                                                                                     "online"]]
            for v, label in zip(variants, labels, strict=True):
                rows = select(moments, reward=reward, policy=None if pol == LOGGING_POLICY else pol,
                              metric=v.metric, discount=v.discount, exposure=v.exposure, clip=v.clip)
                agg = aggregate(rows, ["experiment_id", "day"])
                agg["offline"] = [estimate_from_row(r, metric=v.metric, level=0.95).value
                                  for r in agg.to_dict("records")]
                part = agg[["experiment_id", "day", "offline"]].merge(online, on=["experiment_id", "day"],
                                                                      how="inner")
                part = part.assign(reward=reward, policy=pol, variant=label, metric=v.metric,
                                   discount=v.discount, exposure=v.exposure, clip=v.clip)
                daily_parts.append(part)
    daily = pd.concat(daily_parts, ignore_index=True)
    if daily.empty:
        raise InputError(f"no (experiment, day) has both an offline estimate of {', '.join(map(repr, pols))} and "
                         f"an online reward of its arm for {', '.join(map(repr, rewards))}")

    rows, warnings = [], []
    for (exp, reward, pol), part in daily.groupby(["experiment_id", "reward", "policy"], sort=True,
                                                   observed=True):
        of_variant = dict(tuple(part.groupby("variant", sort=False)))  # each variant's rows, in their order
        for v, label in zip(variants, labels, strict=True):
            d = of_variant.get(label, part.iloc[:0])
            online, offline = d["online"].to_numpy(float), d["offline"].to_numpy(float)
            known = ~(np.isnan(online) | np.isnan(offline))  # the days with both values
            r, p = _correlate(online[known], offline[known], method)
            rows.append({"experiment_id": exp, "reward": reward, "policy": pol,
                         "policy_label": _label(pol), "variant": label, "metric": v.metric,
                         "discount": v.discount, "exposure": v.exposure, "clip": v.clip, "n_days": int(known.sum()),
                         "r": r, "p_value": p})
    table = pd.DataFrame(rows)
    table["significant"] = table["p_value"] < alpha
    table["identity"] = [is_identity(Variant(m, d, e, c), pol) for m, d, e, c, pol in
                         zip(table["metric"], table["discount"], table["exposure"], table["clip"], table["policy"],
                             strict=True)]
    ranked = table["r"].where(~table["identity"])
    best = ranked.groupby([table["experiment_id"], table["reward"], table["policy"]], sort=False).transform("max")
    # ties within 1e-9 (e.g. two variants that coincide on binary rewards) share the bold
    table["best"] = ranked.notna() & np.isclose(ranked, best, rtol=0, atol=1e-9)
    pol_order = {p: i for i, p in enumerate(pols)}
    table = table.sort_values(["experiment_id", "reward", "policy"], key=lambda s: s.map(pol_order)
                              if s.name == "policy" else s, kind="stable").reset_index(drop=True)

    days = daily.groupby("experiment_id")["day"].nunique()
    short = days[days < MIN_DAYS]
    for n in sorted(set(short)):  # one warning per day count, naming every experiment that has it
        exps = [str(e) for e, k in short.items() if k == n]
        warnings.append(f"{'experiment' if len(exps) == 1 else 'experiments'} {', '.join(exps)} "
                        f"{'has' if len(exps) == 1 else 'have'} only {n} day(s); a correlation across fewer than "
                        f"{MIN_DAYS} days is not informative")
    n_nan = int(table["r"].isna().sum())
    if n_nan:
        warnings.append(f"{n_nan} cell(s) have no correlation (fewer than 3 days or a constant series)")
    takeaway = _takeaway(table, labels, method, daily, alpha=alpha)
    return CorrelationResult(table=table, daily=daily, variants=variants, method=method,
                             warnings=tuple(warnings), takeaway=takeaway, alpha=alpha, labels=labels, target=target)


def is_identity(variant: Variant, policy: str) -> bool:
    """Whether an offline cell equals the online control by construction (so its r = 1 is no evidence).

    DCG of the logging policy R0 with D = D0 and no clip: every logged row has weight D(r_i) / D0(r_i) = 1, so the
    per-session value is Σ_i c_i, the observed reward of that control session (KDD'24 Eq. 9 with R = R0).

    Every per-session importance estimator of the logging policy is likewise its observed mean reward per session
    (its weights are 1): Σ_τ c_τ / N (Gilotte Sec. 3), so its cells are identities too.

    >>> is_identity(Variant("dcg", "pbm", "pbm", math.inf), "logging"), is_identity(Variant("dcg", "pbm", "pbm",
    ...     math.inf), "treatment"), is_identity(Variant("dcg", "log2", "pbm", math.inf), "logging")
    (True, False, False)
    >>> is_identity(Variant("cis", "propensity", "propensity", 8.0), "logging")
    True
    """
    if policy != LOGGING_POLICY:
        return False
    spec = ESTIMATORS[variant.metric]
    if spec.family == "importance":
        return spec.scale == "session"
    return variant.metric == "dcg" and variant.discount == variant.exposure and math.isinf(variant.clip)


def pooled_correlation(daily: pd.DataFrame, *, policy: str = "treatment", method: str = "pearson") -> pd.DataFrame:
    """Correlation of online reward and offline estimate pooled over every (experiment, day) point of one policy,
    per (reward, variant): ``n_points``, ``r`` — "across experiment-days", so differences between experiments
    count as well as day-to-day drift."""
    d = daily[daily["policy"] == policy].dropna(subset=["online", "offline"])
    rows = []
    for (reward, variant), part in d.groupby(["reward", "variant"], sort=False):
        r, _ = _correlate(part["online"].to_numpy(float), part["offline"].to_numpy(float), method)
        rows.append({"reward": reward, "variant": variant, "n_points": len(part), "r": r})
    return pd.DataFrame(rows, columns=["reward", "variant", "n_points", "r"])


def _takeaway(table: pd.DataFrame, labels, method, daily: pd.DataFrame | None = None, *, alpha: float = 0.05) -> str:
    """Which variant tracks the online reward, on the target policy's Rₜ rows when the table has them (its offline
    estimate against its own arm: the question a user asks), else on the logging policy's R₀ rows. Every variant's
    median is taken over the *same* rows (a row where a variant has no r is left out of all of them; a variant that
    is an identity in every row is not ranked); "tracks" only when the best median r reaches :data:`TRACK_R` and it
    is positive and significant in one row at least. Then Table 2's finding pooled over the target policy's
    experiment-days with the bootstrap uncertainty of each difference in r
    (:mod:`~offeval_core.analyses.correlation_diff`)."""
    sym = CORRELATION_SYMBOLS[method]
    n_identity = int((table["identity"] & table["r"].notna()).sum())
    rows = headline_rows(table, labels)
    if rows is None:
        return "No correlation could be computed (too few days)."
    ranked, target, basis, who = rows.ranked, rows.target, rows.basis, rows.who
    common, left = rows.r, rows.left
    if common.empty:
        return (f"No correlation could be computed on the rows of {who} where every variant has one (too few "
                f"days).")
    n_rows = len(common)
    med = common.median()
    top = med.idxmax()
    wins = int(common[top].eq(common.max(axis=1)).sum())
    sig = basis.pivot_table(index=["experiment_id", "reward", "policy"], columns="variant", values="significant",
                            aggfunc="first").reindex(index=common.index)
    n_pos = int(((common[top] > 0) & sig[top].astype(bool)).sum())
    rows_text = f"{n_rows} (experiment, reward) rows"
    where = (f" where every variant has an {sym} ({left} row{'s' * (left != 1)} without one left out of every "
             f"median)" if left else "")
    support = f"positive and significant (p < {alpha:g}) in {n_pos} of {n_rows} rows"
    short = ([f"below {TRACK_R:g}"] if med[top] < TRACK_R else []) + (
        ["positive and significant in no row"] if n_pos == 0 else [])
    if not short:
        text = (f"Across the {rows_text} of {who}{where}, {top} tracks its online reward best: median {sym} = "
                f"{med[top]:.2f}, best in {wins} of {n_rows} rows, {support}")
    else:
        text = (f"No variant tracks the online reward of {who} across days on these logs: the highest median {sym} "
                f"over its {rows_text}{where} is {top}'s {med[top]:.2f}, {' and '.join(short)} ({top} is {support})")
    others = [lab for lab in med.index if lab != top]
    if others:
        worst = min(others, key=lambda lab: med[lab])
        text += f"; {worst} is lowest (median {sym} = {med[worst]:.2f})"
    text += "."
    r0 = ranked[ranked["policy"] == LOGGING_POLICY]
    if len(target) and r0["r"].notna().any():
        common0, _ = _common_rows(r0, labels)
        if not common0.empty:
            med0 = common0.median()
            text += (f" On the R₀ rows (the logging policy, whose offline and online values read the same control "
                     f"sessions) {med0.idxmax()} has the highest median {sym}, {med0.max():.2f}.")
    if daily is not None:
        text += _pooled_text(table, daily, method)
    if n_identity:
        text += (f" {n_identity} R₀ cell(s) marked ≡ are identities (on the logging policy, DCG with D = D0 at "
                 f"m = ∞ and every per-session importance estimator are the control arm's observed reward) and are "
                 f"not ranked.")
    return text


@dataclass(frozen=True, eq=False)
class HeadlineRows:
    """The rows the headline ranks the variants on (:func:`headline_rows`). ``who``: "Rₜ = <policy>" or "R₀ = the
    logging policy"; ``r``: (experiment, reward, policy) × variant table of r on those rows where every ranked
    variant has one; ``left``: rows left out for a missing r; ``basis``: those rows in tidy form; ``ranked``:
    the whole table with identity cells' r blanked; ``target``: its target-policy rows with an r."""

    who: str
    r: pd.DataFrame
    left: int
    basis: pd.DataFrame
    ranked: pd.DataFrame
    target: pd.DataFrame


def headline_rows(table: pd.DataFrame, labels) -> HeadlineRows | None:
    """The rows the Correlation headline and the chart's medians are taken over: the target policy's Rₜ rows
    when the table has them, else the logging policy's; every variant on the same rows; identity cells never
    ranked. None when no cell has an r."""
    ranked = table.assign(r=table["r"].where(~table["identity"].astype(bool)))
    if ranked["r"].dropna().empty:
        return None
    target = ranked[(ranked["policy"] != LOGGING_POLICY) & ranked["r"].notna()]
    basis = ranked[ranked["policy"] == target["policy"].iloc[0]] if len(target) else ranked
    who = (f"Rₜ = {target['policy'].iloc[0]}" if len(target) else "R₀ = the logging policy")
    common, left = _common_rows(basis, labels)
    return HeadlineRows(who=who, r=common, left=left, basis=basis, ranked=ranked, target=target)


def _common_rows(rows: pd.DataFrame, labels) -> tuple[pd.DataFrame, int]:
    """The (experiment, reward, policy) × variant table of r on the rows where every ranked variant has one, and
    how many rows were left out. A variant with no r in any row (an identity on R₀) is not a column."""
    keys = ["experiment_id", "reward", "policy"]
    wide = rows.pivot_table(index=keys, columns="variant", values="r", aggfunc="first", dropna=False)
    wide = wide.reindex(columns=[lab for lab in labels if lab in wide.columns]).dropna(axis=1, how="all")
    common = wide.dropna()
    return common, len(wide) - len(common)


def _pooled_text(table: pd.DataFrame, daily: pd.DataFrame, method: str) -> str:
    """KDD'24 Table 2's finding pooled over the target policy's experiment-days, per reward: the learnt-PBM
    de-biased DCG against each log2 variant, on the same experiment-days, with a paired bootstrap CI of the
    difference in r. It holds when both CIs lie above 0, does not hold when one lies below, and is undecided
    otherwise."""
    from offeval_core.analyses.correlation_diff import points_difference, pooled_points

    t = table[(table["policy"] != LOGGING_POLICY) & (table["metric"] == "dcg")]
    pbm_q = list(dict.fromkeys(t.loc[(t["discount"] != "log2") & (t["discount"] == t["exposure"])
                                     & (t["clip"] > 1), "variant"]))
    log2 = list(dict.fromkeys(t.loc[t["discount"] == "log2", "variant"]))
    if not pbm_q or not log2:
        return ""
    policy = str(t["policy"].iloc[0])  # the target policy, whatever it is named
    out = []
    for reward in dict.fromkeys(t["reward"]):
        points = pooled_points(daily, reward=reward, policy=policy)
        for a in pbm_q:
            diffs = [points_difference(points, a, b, method=method) for b in log2]
            diffs = [d for d in diffs if not math.isnan(d.low)]
            if not diffs:
                continue
            verdicts = [d.verdict for d in diffs]
            if all(v == "A" for v in verdicts):
                verdict = "holds"
            elif "B" in verdicts:
                verdict = "does not hold on these logs"
            else:
                verdict = "undecided: a difference's bootstrap CI holds 0"
            parts = "; ".join(f"vs {d.b}: {d.text()}" for d in diffs)
            out.append(f"{reward}, {a} — {parts} ({verdict})")
    if not out:
        return ""
    return (" KDD'24 Table 2's finding (the learnt-PBM de-biased DCG tracks the online reward better than both "
            "log2 variants), pooled over the target policy's experiment-days: " + " · ".join(out) + ".")
