"""DCG, nDCG and post-normalised DCG of ranking policies, from logs or from moments.

Each estimator is defined once, by the per-session kernel in :mod:`offeval_core.engine`; the functions
here aggregate it. Offline values are computed on the logging policy's sessions (the control arm when the
logs have arms), the online truth from comparing the arms.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core import stats
from offeval_core.arms import OFFLINE_ARM, offline_mask
from offeval_core.defaults import LEVEL
from offeval_core.discounts import parse_discount
from offeval_core.engine import Grid, Moments, reduce
from offeval_core.engine.grid import ndcg_of
from offeval_core.engine.per_session import compiled_session_values
from offeval_core.engine.sources import logs_source
from offeval_core.errors import InputError, UnknownName
from offeval_core.logs import LOGGING_POLICY, Logs
from offeval_core.moment_columns import ONLINE_ROLES, Layout, merge, pool
from offeval_core.registry import ESTIMATORS, SUM_COLUMNS, EstimatorSpec
from offeval_core.results import Effect, Estimate, json_number
from offeval_core.stats import CrossMoments, RatioMoments, ratio_difference
from offeval_core.validation import check_choice, check_clip, check_level, format_clip

__all__ = [
    "ESTIMATORS",
    "SUM_COLUMNS",
    "CrossMoments",
    "EstimatorSpec",
    "GroupResult",
    "OnlineResult",
    "RatioMoments",
    "aggregate",
    "dcg",
    "effect",
    "estimate_from_row",
    "impression_online_results",
    "ndcg",
    "online_results",
    "pndcg",
    "ratio_difference",
    "require",
    "select",
    "select_clips",
    "session_values",
    "subset",
    "summarize_groups",
]


# ------------------------------------------------------------------------------------- from moments


_SINGULAR = {"rewards": "reward", "policies": "policy", "discounts": "discount", "exposures": "exposure",
             "clips": "clip"}


def require(moments: Moments, *, rewards: Sequence[str] = (), policies: Sequence[str] = (),
            discounts: Sequence[str] = (), exposures: Sequence[str] = (), clips: Sequence[float] = (),
            of: str = "") -> None:
    """Raise :class:`~offeval_core.errors.UnknownName` for the first value that ``moments`` were not computed for
    (policies: the target policies), naming what is available; ``of`` says whose value it is. The one "was not
    computed" check of :func:`select`, :func:`subset` and every analysis.

    >>> from offeval_core.engine import Grid, Moments
    >>> m = Moments(offline=pd.DataFrame(), online=pd.DataFrame(), grid=Grid(rewards=("click",), policies=(),
    ...                                                                     clips=(1, math.inf)))
    >>> require(m, rewards=["click"], clips=[4], of=" of DCG")
    Traceback (most recent call last):
    ...
    offeval_core.errors.UnknownName: clip 4 of DCG was not computed; available: 1, inf
    """
    g = moments.grid
    for name, values in (("rewards", rewards), ("policies", policies), ("discounts", discounts),
                         ("exposures", exposures), ("clips", clips)):
        have = tuple(getattr(g, name))
        for value in values:
            if value not in have:
                shown = format_clip(value) if name == "clips" else repr(value)
                listed = ", ".join(format_clip(h) if name == "clips" else str(h) for h in have) or "none"
                raise UnknownName(f"{_SINGULAR[name]} {shown}{of} was not computed; available: {listed}")


def _check_variant(moments: Moments, *, rewards, policy, metric, discount, exposure) -> str:
    check_choice(metric, ESTIMATORS, name="metric")
    pol = policy or LOGGING_POLICY
    require(moments, rewards=rewards, policies=() if pol == LOGGING_POLICY else (pol,), discounts=(discount,),
            exposures=(exposure,))
    return pol


def _rows(moments: Moments, mask, arm: str | None) -> pd.DataFrame:
    off = moments.offline
    if arm is not None:
        mask = mask & offline_mask(off["arm"], arm)
    return off[mask]


def select(moments: Moments, *, reward: str, policy: str | None, metric: str, discount: str = "pbm",
           exposure: str = "pbm", clip: float = math.inf, arm: str | None = OFFLINE_ARM) -> pd.DataFrame:
    """The moment rows of one variant (pnDCG reads the DCG rows: it is a ratio of DCG and iDCG sums), on
    the offline sessions (:func:`offeval_core.arms.offline_mask`; ``arm=None`` for every arm)."""
    pol = _check_variant(moments, rewards=(reward,), policy=policy, metric=metric, discount=discount,
                         exposure=exposure)
    clip = check_clip(clip)
    require(moments, clips=(clip,))
    off = moments.offline
    mask = ((off["reward"] == reward) & (off["policy"] == pol) & (off["metric"] == ESTIMATORS[metric].stored)
            & (off["discount"] == discount) & (off["exposure"] == exposure) & (off["clip"] == clip))
    return _rows(moments, mask, arm)


def select_clips(moments: Moments, *, rewards: Sequence[str], policy: str | None, metric: str,
                 discount: str = "pbm", exposure: str = "pbm", arm: str | None = OFFLINE_ARM) -> pd.DataFrame:
    """Like :func:`select` for several rewards and every clip of the grid (e.g. a sensitivity curve)."""
    rewards = tuple(rewards)
    pol = _check_variant(moments, rewards=rewards, policy=policy, metric=metric, discount=discount,
                         exposure=exposure)
    off = moments.offline
    mask = (off["reward"].isin(rewards) & (off["policy"] == pol) & (off["metric"] == ESTIMATORS[metric].stored)
            & (off["discount"] == discount) & (off["exposure"] == exposure))
    return _rows(moments, mask, arm)


def subset(moments: Moments, *, rewards: Sequence[str] | None = None, policies: Sequence[str] | None = None,
           discounts: Sequence[str] | None = None, exposures: Sequence[str] | None = None,
           clips: Sequence[float] | None = None) -> Moments:
    """The same moments restricted to some rewards, target policies (the logging rows are always kept),
    discounts, exposures and clips; the grid is narrowed to match. ``None`` keeps everything."""
    g = moments.grid
    pick = {"rewards": rewards, "policies": policies, "discounts": discounts, "exposures": exposures, "clips": clips}
    chosen = {}
    for name, values in pick.items():
        have = getattr(g, name)
        if values is None:
            chosen[name] = tuple(have)
            continue
        values = tuple(dict.fromkeys(check_clip(v, name="clips") for v in values) if name == "clips" else
                       dict.fromkeys(values))
        require(moments, **{name: values})
        chosen[name] = values
    off = moments.offline
    keep = (off["reward"].isin(chosen["rewards"]) & off["policy"].isin((LOGGING_POLICY, *chosen["policies"]))
            & off["discount"].isin(chosen["discounts"]) & off["exposure"].isin(chosen["exposures"])
            & off["clip"].isin(chosen["clips"]))
    online = moments.online[moments.online["reward"].isin(chosen["rewards"])]
    grid = Grid(ndcg_rule=g.ndcg_rule, **chosen)
    return Moments(offline=off[keep].reset_index(drop=True), online=online.reset_index(drop=True), grid=grid,
                   discount_labels=moments.discount_labels, source=moments.source)


def aggregate(rows: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Pool moments over every key not in ``by``: counts and sums add, centred second moments combine by
    Chan et al.'s formulas (:func:`offeval_core.moment_columns.pool`)."""
    return pool(rows, by)


def estimate_from_row(row, *, metric: str, level: float, diff: bool = False) -> Estimate | Effect:
    """Estimate (or paired effect with ``diff=True``) of one aggregated moment row."""
    n = float(row["n"])
    if diff and ESTIMATORS[metric].paired == "two_ratio":
        return ratio_difference(
            RatioMoments(n, row["sum"], row["m2"], row["den_sum"], row["den_m2"], row["co_den"]),
            RatioMoments(n, row["ref_sum"], row["ref_m2"], row["ref_den_sum"], row["ref_den_m2"], row["ref_co_den"]),
            CrossMoments(row["co_ref"], row["co_ref_den"], row["den_co_ref"], row["den_co_ref_den"]),
            level=level)
    if ESTIMATORS[metric].ratio:
        x, xx, xy = (("sum_diff", "m2_diff", "co_diff_den") if diff else ("sum", "m2", "co_den"))
        est = stats.ratio_estimate(n, row[x], row[xx], row["den_sum"], row["den_m2"], row[xy], level=level)
        if diff:
            return Effect(est.value, est.stderr, est.n, est.ci, stats.one_sided_p(est.value, est.stderr))
        return est
    if diff:
        return stats.paired_effect(n, row["sum_diff"], row["m2_diff"], level=level)
    return stats.mean_estimate(n, row["sum"], row["m2"], level=level)


@dataclass(frozen=True)
class OnlineResult:
    """Online A/B outcome of one group: the reward per arm (per session, or per impression from
    :func:`impression_online_results`) and the treatment − control test."""

    control: Estimate | None
    treatment: Estimate | None
    effect: Effect | None
    p_two_sided: float

    def to_dict(self) -> dict:
        out = {"control": self.control.to_dict()} if self.control is not None else {}
        if self.treatment is not None:
            out["treatment"] = self.treatment.to_dict()
        if self.effect is not None:
            out["effect"] = self.effect.to_dict() | {"p_value_two_sided": json_number(self.p_two_sided)}
        return out


@dataclass(frozen=True)
class GroupResult:
    """Offline estimates of the logging and target policies, their paired effect, and the online truth."""

    keys: dict
    logging: Estimate
    target: Estimate | None
    effect: Effect | None
    online: OnlineResult | None

    def to_dict(self) -> dict:
        out = {k: (v if isinstance(v, int | float | str) else str(v)) for k, v in self.keys.items()}
        out["logging"] = self.logging.to_dict()
        if self.target is not None:
            out["target"] = self.target.to_dict()
            out["effect"] = self.effect.to_dict()
        if self.online is not None:
            out["online"] = self.online.to_dict()
        return out


def online_results(moments: Moments, *, reward: str, by: Sequence[str] = (), level: float = LEVEL) -> dict:
    """Online per-arm means and Welch's effect per group of ``by`` keys: ``{key tuple: OnlineResult}``. A group
    with treatment sessions only has no control and no effect; rows without A/B arms are the control's."""
    check_level(level)
    on = moments.online[moments.online["reward"] == reward]
    cols = ["n", "sum", "m2"]
    # one pooling over (by…, arm), then the tests on the small table (a groupby per group costs ~1 ms each)
    pooled = pool(on, [*by, "arm"], ONLINE_ROLES)
    table: dict[tuple, dict] = {}
    for idx, values in zip(pooled[[*by, "arm"]].itertuples(index=False, name=None),
                           pooled[cols].to_numpy(dtype=float), strict=True):
        table.setdefault(idx[:-1], {})[idx[-1]] = values
    if not by and not table:
        table[()] = {}
    out = {}
    for key, arms in table.items():
        if "control" not in arms and "treatment" not in arms:  # no A/B arms: every session is the control's
            parts = list(arms.values())
            layout = Layout(cols, ONLINE_ROLES)
            arms["control"] = functools.reduce(lambda a, b: merge(a, b, layout), parts) if parts else np.zeros(3)
        # a group with treatment sessions only has no control (not the treatment compared with itself)
        c = arms.get("control")
        control = None if c is None else stats.mean_estimate(c[0], c[1], c[2], level=level)
        treat = effect = None
        p2 = math.nan
        if "treatment" in arms and arms["treatment"][0] > 0:
            t = arms["treatment"]
            treat = stats.mean_estimate(t[0], t[1], t[2], level=level)
            if c is not None:
                effect = stats.welch_effect(t[0], t[1], t[2], c[0], c[1], c[2], level=level)
                p2 = stats.welch_two_sided_p(t[0], t[1], t[2], c[0], c[1], c[2])
        out[key] = OnlineResult(control, treat, effect, p2)
    return out


def impression_online_results(moments: Moments, *, reward: str, metric: str, discount: str, exposure: str,
                               clip: float, by: Sequence[str] = (), level: float = LEVEL) -> dict:
    """Online per-impression reward per arm and group of ``by`` keys: Σ reward / Σ impressions of the arm's
    sessions (a ratio of session sums, delta-method SE clustered by session), and the difference
    treatment − control of the independent arms (normal CI, one-sided p of H0: effect ≤ 0, and the
    two-sided p). Read from the logging rows of a per-impression importance estimator ``metric``.
    Returns ``{key tuple: OnlineResult}`` (``control`` may be missing when a group has no control arm).
    """
    check_level(level)
    rows = select(moments, reward=reward, policy=None, metric=metric, discount=discount, exposure=exposure,
                  clip=clip, arm=None)
    out = {}
    groups = rows.groupby(list(by), observed=True, sort=True) if by else [((), rows)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        ests = {}
        for arm in ("control", "treatment"):
            sub = part[part["arm"] == arm]
            if not len(sub) or sub["n"].sum() == 0:
                continue
            a = aggregate(sub).iloc[0]
            ests[arm] = stats.ratio_estimate(a["n"], a["sum"], a["m2"], a["den_sum"], a["den_m2"], a["co_den"],
                                             level=level)
        effect, p2 = None, math.nan
        if "control" in ests and "treatment" in ests:
            t, c = ests["treatment"], ests["control"]
            diff = t.value - c.value
            se = math.sqrt(t.stderr ** 2 + c.stderr ** 2)
            effect = Effect(diff, se, t.n + c.n, stats.normal_ci(diff, se, level=level), stats.one_sided_p(diff, se))
            p2 = stats.two_sided_p(diff, se)
        out[key] = OnlineResult(ests.get("control"), ests.get("treatment"), effect, p2)
    return out


def summarize_groups(moments: Moments, *, reward: str, policy: str | None, metric: str = "dcg",
                     discount: str = "pbm", exposure: str = "pbm", clip: float = math.inf,
                     by: Sequence[str] = (), level: float = LEVEL) -> list[GroupResult]:
    """Per group of ``by`` keys: logging and target estimates on control logs, paired effect, online."""
    check_level(level)
    by = list(by)
    for k in by:
        if k not in moments.keys or k == "arm":
            raise UnknownName(f"by keys must be among {', '.join(k for k in moments.keys if k != 'arm')}; got {k!r}")
    base = dict(reward=reward, metric=metric, discount=discount, exposure=exposure, clip=clip)
    log_rows = aggregate(select(moments, policy=None, **base), by)
    tgt_rows = aggregate(select(moments, policy=policy, **base), by) if policy else None
    online = online_results(moments, reward=reward, by=by, level=level)
    results = []
    # a dict per row, each value of its own column's type (a row of iterrows is upcast: an integer day next to
    # float sums is 1.0)
    targets = tgt_rows.to_dict("records") if tgt_rows is not None else None
    for i, row in enumerate(log_rows.to_dict("records")):
        keys = {k: row[k] for k in by}
        key = tuple(keys[k] for k in by)
        logging_est = estimate_from_row(row, metric=metric, level=level)
        target = eff = None
        if targets is not None:
            trow = targets[i]
            target = estimate_from_row(trow, metric=metric, level=level)
            eff = estimate_from_row(trow, metric=metric, level=level, diff=True)
        results.append(GroupResult(keys, logging_est, target, eff, online.get(key)))
    return results


# ---------------------------------------------------------------------------------------- from logs


def _single(logs: Logs, *, reward, policy, metric, discount, exposure, clip, level, ndcg_rule="zero", diff=False):
    logs.check_reward(reward)
    policy = logs.check_policy(policy)
    clip = check_clip(clip)
    grid = Grid(rewards=(reward,), policies=(policy,) if policy else (), discounts=(discount,),
                exposures=(exposure,), clips=(clip,), ndcg_rule=ndcg_rule)
    moments = reduce(logs, grid)
    rows = aggregate(select(moments, reward=reward, policy=policy, metric=metric, discount=discount,
                            exposure=exposure, clip=clip))
    return estimate_from_row(rows.iloc[0], metric=metric, level=level, diff=diff)


def dcg(logs: Logs, *, reward: str, policy: str | None = None, discount: str = "pbm", exposure: str = "pbm",
        clip: float = math.inf, level: float = LEVEL) -> Estimate:
    """Mean per-session DCG of ``policy`` on the logging policy's sessions (KDD'24 Eq. 9, Sec. 6.2).

    DCG_τ = Σ_i c_i · D(R(i)) · min(m, 1 / D0(i)). With D = D0 and m = ∞ it is unbiased for the policy's
    expected per-session reward under Asm. 1-5; m = 1 uses the raw labels C.

    >>> import pandas as pd
    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [0, 1],
    ...                                "rank__new": [2, 1]}))
    >>> # the click at logged rank 2 is de-biased by 1 / D0(2) = log2(3) and moved to rank 1, D(1) = 1
    >>> round(dcg(logs, reward="click", policy="new", discount="log2", exposure="log2").value, 4)
    1.585
    """
    return _single(logs, reward=reward, policy=policy, metric="dcg", discount=discount, exposure=exposure,
                   clip=clip, level=level)


def ndcg(logs: Logs, *, reward: str, policy: str | None = None, discount: str = "pbm", exposure: str = "pbm",
         clip: float = math.inf, level: float = LEVEL, ndcg_rule: str = "zero") -> Estimate:
    """Mean per-session nDCG_τ = DCG_τ / iDCG_τ (KDD'24 Sec. 5); sessions with iDCG_τ = 0 count 0 or are
    dropped (``ndcg_rule``). Inconsistent with DCG across sessions (Lemma 5.2).

    >>> import pandas as pd
    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [0, 1],
    ...                                "rank__new": [2, 1]}))
    >>> ndcg(logs, reward="click", policy="new", discount="log2", exposure="log2").value  # ideal ranking
    1.0
    """
    return _single(logs, reward=reward, policy=policy, metric="ndcg", discount=discount, exposure=exposure,
                   clip=clip, level=level, ndcg_rule=ndcg_rule)


def pndcg(logs: Logs, *, reward: str, policy: str | None = None, discount: str = "pbm", exposure: str = "pbm",
          clip: float = math.inf, level: float = LEVEL) -> Estimate:
    """Post-normalised DCG = mean DCG / mean iDCG (KDD'24 Sec. 5), consistent with DCG; delta-method CI.

    >>> import pandas as pd
    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [0, 1, 1]}))
    >>> # session 1: label 1/0.5 = 2, DCG = 2 · 0.5 = 1, iDCG = 2 · 1 = 2; session 2: DCG = iDCG = 1
    >>> round(pndcg(logs, reward="click", discount="exponential:0.5", exposure="exponential:0.5").value, 4)
    0.6667
    """
    return _single(logs, reward=reward, policy=policy, metric="pndcg", discount=discount, exposure=exposure,
                   clip=clip, level=level)


def effect(logs: Logs, *, reward: str, policy: str, metric: str = "dcg", discount: str = "pbm",
           exposure: str = "pbm", clip: float = math.inf, level: float = LEVEL) -> Effect:
    """Paired offline treatment effect of ``policy`` over the logging policy on the same sessions:
    mean of (metric_target − metric_logging) per session, normal CI, one-sided p of H0: effect ≤ 0."""
    if policy is None:
        raise InputError("policy must name a target policy for an effect, got None")
    return _single(logs, reward=reward, policy=policy, metric=metric, discount=discount, exposure=exposure,
                   clip=clip, level=level, diff=True)


def session_values(logs: Logs, *, reward: str, policies: Sequence[str] = (), discount: str = "pbm",
                   exposure: str = "pbm", clip: float = math.inf) -> pd.DataFrame:
    """Per-session DCG of the logging policy and each target policy, iDCG and nDCG (all sessions).

    One row per session (sessions without a reward have zeros), columns ``session``, ``dcg__<policy>``,
    ``ndcg__<policy>`` (``logging`` for the logged ranks) and ``idcg``, plus the session's group keys.
    """
    logs.check_reward(reward)
    policies = tuple(logs.check_policy(p) for p in policies if p is not None and p != LOGGING_POLICY)
    clip = check_clip(clip)
    source = logs_source(logs)  # the logs' one source: its compiled queries are reused
    disc, expo = parse_discount(discount, logs=logs), parse_discount(exposure, logs=logs)
    names = [LOGGING_POLICY, *policies]
    # the query of this reward's shape, compiled once per logs: a new (D, D0, clip) only runs it
    per = compiled_session_values(source, reward=reward, policies=policies).run(reward=reward, discount=disc,
                                                                               exposure=expo, clip=clip)
    per = per.rename(columns={f"d{i}": f"dcg__{p}" for i, p in enumerate(names)})
    out = logs.sessions[["session", "session_id", "experiment_id", "day", "arm", "segment"]].merge(
        per, on="session", how="left")
    for c in ["idcg", *(f"dcg__{p}" for p in names)]:
        out[c] = out[c].fillna(0.0)
    idcg = out["idcg"].to_numpy()
    for p in names:
        d = out[f"dcg__{p}"].to_numpy()
        out[f"ndcg__{p}"] = ndcg_of(d, idcg)
    return out
