"""Facts about a loaded dataset that do not change while it is loaded, computed once per dataset key: the
Data page's reward overview, largest rank and learnt position-bias curve, and the sidebar's verdict on a
discount spec. Each is a cached call keyed by the dataset key (see :mod:`dashboard.data.datasets`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.data.datasets import load

__all__ = ["demo_description", "discount_problem", "learnt_pbm", "max_rank", "pbm_chart", "pbm_curves", "reward_overview", "understanding"]


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def demo_description(summary, *, ground_truth: bool) -> str:
    """What the Data page says of the bundled demo, every number read from the loaded logs' summary
    (:class:`offeval_core.logs.LogSummary`): A/B tests, days, sessions, rewards and the rankers (the production
    and treatment rankers, when the logs hold them, and the candidates besides), and whether its exact ground
    truth is there.

    >>> from types import SimpleNamespace as S
    >>> demo_description(S(experiments=("e1", "e2"), days=(1, 2, 3), sessions=1500, reward_rates={"like": 0.1},
    ...                    policies=("production", "treatment", "cand_01")), ground_truth=True)
    '2 simulated A/B tests over 3 days of a short-video feed (1,500 sessions), with 1 reward (like), the production and treatment rankers and 1 candidate ranker, plus the exact ground truth.'
    """
    rewards = list(summary.reward_rates)
    policies = list(summary.policies)
    named = [p for p in ("production", "treatment") if p in policies]
    others = [p for p in policies if p not in named]
    if named:
        rankers = "the " + " and ".join(named) + f" ranker{'s' * (len(named) > 1)}"
        if others:
            rankers += f" and {_count(len(others), 'candidate ranker')}"
    else:
        rankers = _count(len(others), "ranker")
    tail = ", plus the exact ground truth." if ground_truth else "."
    return (f"{_count(len(summary.experiments), 'simulated A/B test')} over {_count(len(summary.days), 'day')} of "
            f"a short-video feed ({_count(summary.sessions, 'session')}), with {_count(len(rewards), 'reward')} "
            f"({', '.join(rewards)}), {rankers}{tail}")


@st.cache_resource(show_spinner=False, max_entries=8)
def understanding(key: str):
    """What offeval understood of a dataset's logs (:func:`offeval_core.understanding.understand`), once per
    dataset: the same summary ``offeval validate`` prints."""
    from offeval_core.understanding import understand

    ds = load(key)
    return understand(ds.logs, summary=ds.summary)


@st.cache_data(show_spinner=False, max_entries=8)
def reward_overview(key: str) -> pd.DataFrame:
    """Per reward of a dataset's logs: its kind (0/1 or real-valued), the rate (0/1) or mean (real) per
    impression as text, and the share of sessions with a reward > 0 (computed once per dataset)."""
    from offeval_core.formatting import format_reward_value, reward_kind

    ds = load(key)
    s, frame = ds.summary, ds.logs.frame
    kinds = {r: reward_kind(frame[r].to_numpy()) for r in s.reward_rates}
    return pd.DataFrame({"reward": list(s.reward_rates),
                         "kind": [("0/1 (rate)" if kinds[r] == "binary" else "real-valued (mean)")
                                  for r in s.reward_rates],
                         "per impression": [format_reward_value(v if kinds[r] == "binary" else float(frame[r].mean()),
                                                                kinds[r]) for r, v in s.reward_rates.items()],
                         "sessions with ≥ 1": [s.sessions_with_reward[r] for r in s.reward_rates]})


@st.cache_data(show_spinner=False, max_entries=8)
def max_rank(key: str) -> int:
    """The largest logged or target rank of a dataset's logs (``Logs.max_rank``, computed once)."""
    return load(key).logs.max_rank


@st.cache_data(show_spinner=False, max_entries=8)
def learnt_pbm(key: str):
    """The position-bias curve learnt from a dataset's logs (``discounts.learn_pbm``, computed once)."""
    from offeval_core.discounts import learn_pbm

    return learn_pbm(load(key).logs)


@st.cache_data(show_spinner=False, max_entries=32)
def pbm_curves(key: str, p: float, ranks: int) -> dict:
    """The learnt position-bias curve of a dataset next to 1/log₂(r+1) and p^(r−1), over the first
    ``ranks`` ranks (at most as many as the learnt curve has): ``{label: values}``."""
    from offeval_core.discounts import parse_discount

    learnt = learnt_pbm(key)
    n = min(ranks, len(learnt))
    return {"learnt PBM (share of sessions reaching r)": learnt[:n],
            "1/log₂(r+1)": parse_discount("log2").table(n),
            f"exponential {p:g}^(r−1)": parse_discount(f"exponential:{p}").table(n)}


@st.cache_resource(show_spinner=False, max_entries=32)
def pbm_chart(key: str, p: float, ranks: int):
    """The figure of :func:`pbm_curves` (``charts.pbm_curve_figure``); shared and read-only."""
    from offeval_core.charts import pbm_curve_figure

    return pbm_curve_figure(pbm_curves(key, p, ranks))


def discount_problem(key: str, spec: str) -> str:
    """Why ``spec`` is not a valid discount model for a dataset's logs ('' when it is). The sidebar checks
    both models on every run and a ``pbm`` check learns the curve from the logs, so the verdict is cached
    per (dataset, spec); ``table:`` specs name files that can change and are checked every time."""
    return _check_discount(key, spec) if str(spec).startswith("table:") else _cached_check(key, spec)


def _check_discount(key: str, spec: str) -> str:
    from offeval_core.discounts import parse_discount
    from offeval_core.errors import OffevalError

    try:
        parse_discount(spec, logs=load(key).logs)
    except OffevalError as exc:
        return str(exc) or type(exc).__name__
    return ""


@st.cache_data(show_spinner=False, max_entries=64)
def _cached_check(key: str, spec: str) -> str:
    return _check_discount(key, spec)
