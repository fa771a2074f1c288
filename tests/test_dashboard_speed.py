"""What the interactive-speed changes must not change: the scipy.special kernels give scipy.stats' numbers
exactly, the one-groupby online results equal a group-by-group computation, a clip marker is drawn on a copy,
decision-box labels are those of one add_annotation per box, and the background preparation computes the
pages' default results (the same cached values a page then reads)."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from scipy import stats as sps

from offeval_core import stats
from offeval_core.charts import DECISION_COLOURS, clip_positions, decision_figure, mark_clip
from offeval_core.engine import DEFAULT_CLIPS, Grid, reduce
from offeval_core.estimators import online_results
from offeval_core.logs import read_logs
from offeval_core.moment_columns import ONLINE_ROLES, pool
from offeval_core.simulate import preset_config, simulate


@pytest.fixture(scope="module")
def world():
    w = simulate(preset_config("small"), seed=5)
    logs = read_logs(w.logs)
    grid = Grid(rewards=logs.rewards, policies=logs.policies, discounts=("pbm",), exposures=("pbm",),
                clips=DEFAULT_CLIPS)
    return logs, reduce(logs, grid)


@pytest.mark.parametrize("z", [-40.0, -3.1, -0.2, 0.0, 1e-9, 0.7, 1.644853627, 5.5, 38.0])
def test_normal_and_t_tails_are_scipy_stats_bit_for_bit(z):
    assert stats.one_sided_p(z, 1.0) == float(sps.norm.sf(z))
    assert stats.two_sided_p(z, 1.0) == float(2 * sps.norm.sf(abs(z)))
    # Welch: n = 7 and 5 of values with the given sums → some finite df; compare with scipy.stats' t
    m2_t, m2_c = 90.0 - 6 * z - 9 / 7, 40.0 - 4 / 5  # Σx² = 90 + 7z² and 40 less (Σx)² / n
    eff = stats.welch_effect(7, 7 * z + 3.0, m2_t, 5, 2.0, m2_c, level=0.9)
    a, b = stats.sample_variance(7, m2_t) / 7, stats.sample_variance(5, m2_c) / 5
    df = stats.welch_df(a, b, 7, 5)
    t = float(sps.t.ppf(0.95, df))
    assert eff.p_value == float(sps.t.sf(eff.value / eff.stderr, df))
    assert (eff.ci.low, eff.ci.high) == (eff.value - t * eff.stderr, eff.value + t * eff.stderr)


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99, 0.999])
def test_normal_quantile_is_scipy_stats_bit_for_bit(level):
    assert stats.normal_quantile(level) == float(sps.norm.ppf(0.5 + level / 2))
    hits = stats._normal_quantile.cache_info().hits
    stats.normal_quantile(level)
    assert stats._normal_quantile.cache_info().hits == hits + 1  # cached: the second call computes nothing


def _online_group_by_group(m, reward, by, level):
    """The online results computed one group at a time (the earlier implementation), as a reference."""
    on = m.online[m.online["reward"] == reward]
    out = {}
    for key, part in on.groupby(list(by), sort=True, observed=True):
        arms = {arm: pool(rows, roles=ONLINE_ROLES).iloc[0] for arm, rows in part.groupby("arm", observed=True)}
        c = arms["control"]
        t = arms["treatment"]
        out[key] = (stats.mean_estimate(c["n"], c["sum"], c["m2"], level=level),
                    stats.welch_effect(t["n"], t["sum"], t["m2"], c["n"], c["sum"], c["m2"], level=level),
                    stats.welch_two_sided_p(t["n"], t["sum"], t["m2"], c["n"], c["sum"], c["m2"]))
    return out


@pytest.mark.parametrize("by", [("experiment_id",), ("experiment_id", "day")])
def test_online_results_equal_a_group_by_group_computation(world, by):
    logs, m = world
    for reward in logs.rewards:
        got = online_results(m, reward=reward, by=by, level=0.9)
        want = _online_group_by_group(m, reward, by, 0.9)
        assert list(got) == list(want) and len(got) >= 3
        for key, (control, effect, p2) in want.items():
            assert got[key].control == control and got[key].effect == effect
            assert got[key].p_two_sided == p2 or (math.isnan(p2) and math.isnan(got[key].p_two_sided))


def test_mark_clip_draws_on_a_copy():
    fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[1, 2, 3]))
    before = fig.to_json()
    clips = [1.0, 4.0, math.inf]
    marked = mark_clip(fig, 4.0, clips)
    assert fig.to_json() == before  # the (cached) original is untouched
    x = float(clip_positions(clips)[0][1])
    assert [(s.x0, s.x1) for s in marked.layout.shapes] == [(x, x)] == [(2.0, 2.0)]
    assert [a.text for a in marked.layout.annotations] == [" m = 4"]
    unmarked = mark_clip(fig, 64.0, clips)  # not in the grid: an unmarked copy
    assert not unmarked.layout.shapes and not unmarked.layout.annotations


def test_decision_labels_are_one_annotation_per_box():
    boxes = pd.DataFrame({
        "estimator": "e", "experiment_id": ["a", "b", "c"], "reward": "r", "category": ["agree", "other", "agree"],
        "offline_low": [0.0, 0.001, 1.0], "offline_high": [1.0, 1.0, 2.0], "online_low": [0.0, 0.0, 1.0],
        "online_high": [1.0, 1.001, 2.0], "offline_effect": [0.5, 0.5, 1.5], "online_effect": [0.5, 0.5, 1.5],
        "offline_decision": "ship", "online_decision": "ship"})

    class Result:
        estimators, level, relative = ("e",), 0.95, False

    Result.boxes = boxes
    fig = decision_figure(Result())
    labels = [a for a in fig.layout.annotations if (a.name or "").startswith("box ")]
    assert sorted(a.text for a in labels) == ["a", "b", "c"]  # one annotation per box, set at once
    by = {a.text: a for a in labels}
    assert (by["c"].x, by["c"].y) == (1.5, 1.5)
    # a and b share a centre: b (a disagreement) is placed first, a elsewhere
    assert (by["a"].ax, by["a"].ay) != (by["b"].ax, by["b"].ay)
    assert by["b"].font.color == DECISION_COLOURS["other"]


def test_the_preparation_puts_the_steps_of_the_page_the_user_opens_next():
    """A page opened while the preparation runs (here Clip tuning, while the moments of a reward are computed) gets
    its steps next, after the step under way; the sidebar's "n of N done; next: …" reads the new order."""
    from dashboard.data.warmup import Warmup, _run

    ran, seen = [], {}
    labels = ("data summary", "moments of a", "sensitivity", "decisions", "clip tuning")

    def step(label):
        def call():
            ran.append(label)
            if label == "moments of a":
                job.put_first("clip-tuning")
                seen["steps"], seen["under way"] = job.steps, job.steps[job.done]
        return call

    job = Warmup(labels, _todo=[(label, step(label)) for label in labels])
    _run(job)
    assert ran == ["data summary", "moments of a", "clip tuning", "sensitivity", "decisions"]
    assert seen == {"steps": ("data summary", "moments of a", "clip tuning", "sensitivity", "decisions"),
                    "under way": "moments of a"}
    assert (job.done, job.running, job.steps) == (5, False, seen["steps"])
    job.put_first("sensitivity")  # nothing left to re-order
    assert job.steps == seen["steps"]


def test_the_preparation_starts_no_step_while_a_page_runs():
    """While a script run is under way (``app.py`` wraps it in ``page_running``), the preparation starts no new
    step; the step under way finishes; once every run has ended the rest follow, in order."""
    import threading

    from dashboard.data import warmup

    ran, started, release = [], threading.Event(), threading.Event()

    def first():
        started.set()
        release.wait(10)
        ran.append("moments of a")

    job = warmup.Warmup(("moments of a", "sensitivity", "decisions"),
                        _todo=[("moments of a", first), ("sensitivity", lambda: ran.append("sensitivity")),
                               ("decisions", lambda: ran.append("decisions"))])
    with warmup.page_running():  # a page already running when the preparation starts: nothing starts
        thread = threading.Thread(target=warmup._run, args=(job,), daemon=True)
        thread.start()
        assert not started.wait(0.5) and ran == []
    assert started.wait(10)  # the run ended: the first step starts
    with warmup.page_running(), warmup.page_running():  # two sessions' runs start while it is under way
        release.set()
        thread.join(0.5)
        assert ran == ["moments of a"] and thread.is_alive()  # it finished; the next waits for both runs
    thread.join(10)
    assert ran == ["moments of a", "sensitivity", "decisions"] and not thread.is_alive()
    assert (job.done, job.running) == (3, False)


def test_the_preparation_waits_for_the_browser_to_draw_after_a_run(monkeypatch):
    """After the last script run ends, the next step waits ``DRAW_GRACE`` seconds (the browser draws what the run
    sent); a run that starts meanwhile restarts the wait from its own end."""
    import threading

    from dashboard.data import warmup

    monkeypatch.setattr(warmup, "DRAW_GRACE", 0.8)
    began = []
    job = warmup.Warmup(("moments of a",), _todo=[("moments of a", lambda: began.append(time.monotonic()))])
    with warmup.page_running():
        pass
    first_end = time.monotonic()
    thread = threading.Thread(target=warmup._run, args=(job,), daemon=True)
    thread.start()
    time.sleep(0.4)
    with warmup.page_running():  # a second run, inside the first one's grace
        pass
    second_end = time.monotonic()
    thread.join(10)
    assert not thread.is_alive() and len(began) == 1
    assert began[0] >= second_end + 0.8 > first_end + 0.8


def test_a_page_with_the_clip_slider_gets_the_clip_tuning_step_with_its_own():
    """The sidebar of a page that reads the clip shows the recommended clip, the clip-tuning result, before the
    page's script run ends: the preparation computes it with that page's own steps, and not for pages without the
    clip (Method, Which estimator?) or with their own clip rule (Candidates)."""
    from dashboard.data.warmup import page_first
    from dashboard.state import USES

    labels = ["data summary", "moments of a", "sensitivity", "moments of a (log2)", "correlation", "DCG vs nDCG",
              "decisions", "clip tuning", "candidates"]
    todo = [(label, None) for label in labels]
    order = {page: [label for label, _ in page_first(todo, page)] for page in USES}
    assert order["sensitivity"][:4] == ["moments of a", "sensitivity", "clip tuning", "data summary"]
    assert order["correlation"][:4] == ["moments of a (log2)", "correlation", "clip tuning", "data summary"]
    assert order["dcg-vs-ndcg"][:3] == ["DCG vs nDCG", "clip tuning", "data summary"]
    assert order["decisions"][:3] == ["decisions", "clip tuning", "data summary"]
    assert order["clip-tuning"][:2] == ["clip tuning", "data summary"]
    for page in ("data", "method", "which-estimator", "estimator-lab", "candidates"):
        assert order[page].index("clip tuning") == labels.index("clip tuning") + (page == "candidates"), page


def test_background_preparation_computes_each_pages_defaults(tmp_path):
    from dashboard import data
    from dashboard.data.warmup import Warmup, _run, steps
    from offeval_core.defaults import LEVEL, ONLINE_ALPHA
    from offeval_core.simulate import write_world

    write_world(preset_config("small"), tmp_path, seed=3)
    ds = data.load_demo(str(tmp_path), data.file_stamp(tmp_path / "logs.parquet"))
    rewards = tuple(r for r in ds.rewards if ds.reward_rates[r] > 0)
    todo = steps(ds, rewards[0], "treatment")
    labels = [label for label, _ in todo]
    assert labels[:len(rewards) + 1] == ["data summary", *(f"moments of {r}" for r in rewards)]
    assert labels[len(rewards) + 1:] == ["sensitivity", f"moments of {rewards[0]} (log2)", "correlation",
                                     "Table 2 across clips", "DCG vs nDCG", "decisions", "clip tuning", "candidates"]
    job = Warmup(tuple(labels), _todo=list(todo))
    _run(job)
    assert (job.done, job.failed, job.running) == (len(todo), [], False)
    assert all(data.is_ready("moments", ds.key, r, "pbm", "pbm") for r in rewards)
    # the page's own call reads the prepared value: the same numbers as the core on the same moments
    from offeval_core.analyses import sensitivity

    res = data.sensitivity_result(ds.key, rewards, "pbm", "pbm", "treatment", ("dcg", "ndcg"), LEVEL,
                                  ONLINE_ALPHA, 0.0, "improvements")
    direct = sensitivity(data.moments_many(ds.key, [(r, "pbm", "pbm") for r in rewards]), policy="treatment",
                         metrics=("dcg", "ndcg"), discount="pbm", exposure="pbm", level=LEVEL,
                         online_alpha=ONLINE_ALPHA, rewards=rewards)
    np.testing.assert_array_equal(res.table["tpr"].to_numpy(), direct.table["tpr"].to_numpy())
