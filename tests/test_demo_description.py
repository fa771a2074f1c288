"""The Data page's description of the bundled demo is read from the loaded logs (dashboard.data.overview.
demo_description): every count it states is the loaded world's own, so a demo written with another preset or
directory is described as it is."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np

from dashboard.data.overview import demo_description
from offeval_core.logs import read_logs, summarize
from offeval_core.simulate import preset_config, simulate


def _summary(preset: str, *, drop_candidates: bool = False):
    logs = simulate(preset_config(preset), seed=0).logs
    if drop_candidates:
        logs = logs.drop(columns=[c for c in logs.columns if c.startswith("rank__cand")])
    return summarize(read_logs(logs))


def test_every_number_of_the_description_is_the_loaded_logs_own():
    s = _summary("small")
    text = demo_description(s, ground_truth=True)
    f = s
    tests, days = re.search(r"^([\d,]+) simulated A/B tests? over ([\d,]+) days?", text).groups()
    assert (int(tests), int(days)) == (len(f.experiments), len(f.days)) == (3, 3)
    sessions = int(re.search(r"\(([\d,]+) sessions\)", text).group(1).replace(",", ""))
    assert sessions == f.sessions == sum(f.arms.values())
    rewards = re.search(r"with (\d+) rewards? \(([^)]*)\)", text).groups()
    assert int(rewards[0]) == len(f.reward_rates) and rewards[1].split(", ") == list(f.reward_rates)
    candidates = [p for p in f.policies if p not in ("production", "treatment")]
    assert candidates  # the small preset logs candidate rankers besides production and treatment
    assert f"the production and treatment rankers and {len(candidates)} candidate ranker" in text
    assert text.endswith(", plus the exact ground truth.")
    assert demo_description(s, ground_truth=False).endswith(" candidate ranker" + "s" * (len(candidates) > 1) + ".")


def test_a_different_demo_is_described_differently():
    """Logs without candidate rankers and with another session count say so (a fixed text could not)."""
    full, bare = _summary("small"), _summary("small", drop_candidates=True)
    assert [p for p in bare.policies if p.startswith("cand")] == []
    text = demo_description(bare, ground_truth=True)
    assert "candidate" not in text and ", the production and treatment rankers, plus" in text
    assert text != demo_description(full, ground_truth=True)


def test_rankers_without_the_demo_names_are_counted():
    """A summary-shaped object whose policies are not the demo's production / treatment: they are counted."""
    one = SimpleNamespace(experiments=("a",), days=(np.datetime64("2026-01-01"),), sessions=1,
                          reward_rates={"click": 0.5}, policies=("ranker_v2", "ranker_v3"))
    assert demo_description(one, ground_truth=False) == (
        "1 simulated A/B test over 1 day of a short-video feed (1 session), with 1 reward (click), 2 rankers.")
