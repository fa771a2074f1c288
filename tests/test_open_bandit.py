"""A real propensity log: the Open Bandit Dataset sample (ZOZOTOWN, CC BY 4.0; tests/fixtures/open_bandit, built by
tools/open_bandit.py). The fixture's construction (BTS's position probabilities, checked by an independent Monte
Carlo simulation of the policy), the offline IS estimate of BTS on the random policy's logs against BTS's online
click rate, the command line, and the dashboard's pages on the file against the core."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dashboard_support import environment, metric, open_page

from offeval_core import importance as imp
from offeval_core.analyses import Variant, clip_tuning, compare_candidates, decision_boxes, sensitivity
from offeval_core.engine import DEFAULT_CLIPS
from offeval_core.errors import EstimatorWarning
from offeval_core.estimators import online_results, summarize_groups
from offeval_core.formatting import format_number
from offeval_core.importance import reduce_importance
from offeval_core.logs import read_logs

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "open_bandit"
LOGS = FIXTURE / "open_bandit.csv.gz"
LEVEL = 0.99
CAMPAIGNS = ("all", "men", "women")


@pytest.fixture(scope="module")
def frame():
    return pd.read_csv(LOGS)


@pytest.fixture(scope="module")
def policy_table():
    return pd.read_csv(FIXTURE / "bts_policy.csv")


@pytest.fixture(scope="module")
def logs():
    return read_logs(LOGS, guess=True)


@pytest.fixture(scope="module")
def moments(logs):
    """The importance moments the dashboard reads (max-capping, per session, every clip)."""
    return reduce_importance(logs, rewards=("click",), policies=("bts",), clips=DEFAULT_CLIPS, weights="propensity",
                             cappings=("max",), scales=("session",))


# ------------------------------------------------------------------------------------------ the fixture


def _tool():
    spec = importlib.util.spec_from_file_location("open_bandit_tool", ROOT / "tools" / "open_bandit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_quadrature_of_the_bts_position_probabilities_on_a_closed_form():
    # θ₁ ~ Beta(2, 1) (density 2x), θ₂ ~ U(0, 1): P(θ₁ > θ₂) = ∫ 2x · x dx = 2/3
    p = _tool().bts_position_probabilities([2.0, 1.0], [1.0, 1.0], positions=2)
    assert p == pytest.approx(np.array([[2 / 3, 1 / 3], [1 / 3, 2 / 3]]), abs=1e-9)


def test_the_fixture_is_the_source_with_its_propensities(frame, policy_table):
    assert len(frame) == 60_000 and LOGS.stat().st_size < 1_000_000
    counts = frame.groupby(["experiment_id", "arm"]).size()
    assert set(counts) == {10_000} and len(counts) == 6
    assert sorted(frame["position"].unique()) == [1, 2, 3]
    sums = policy_table.groupby("campaign")[["p_position_1", "p_position_2", "p_position_3"]].sum()
    assert sums.to_numpy() == pytest.approx(np.ones((3, 3)), abs=1e-9)    # each position shows exactly one item
    per_item = policy_table[["p_position_1", "p_position_2", "p_position_3"]].sum(axis=1)
    assert (per_item <= 1 + 1e-12).all()
    for c in CAMPAIGNS:
        table = policy_table[policy_table["campaign"] == c].set_index("item_id")
        rows = frame[(frame["experiment_id"] == c) & (frame["arm"] == "control")]
        # the random policy: 1 / n items at every position; BTS: its probability of (item, position)
        assert rows["logging_propensity"].to_numpy() == pytest.approx(1 / len(table), rel=1e-9)
        lookup = table.to_numpy()[:, -3:][rows["item_id"].to_numpy(), rows["position"].to_numpy() - 1]
        assert rows["target_propensity__bts"].to_numpy() == pytest.approx(lookup, rel=1e-9)
        treated = frame[(frame["experiment_id"] == c) & (frame["arm"] == "treatment")]
        assert (treated["target_propensity__bts"] == treated["logging_propensity"]).all()


def test_bts_position_probabilities_match_a_simulation_of_the_policy(policy_table):
    """Independent of the quadrature: draw θ ~ Beta(α, β) per item, show the three largest (the policy of obp's
    BernoulliTS), count; every probability within 5 Monte Carlo standard errors (+ 1e-4)."""
    rng = np.random.default_rng(7)
    n = 20_000
    for c in CAMPAIGNS:
        t = policy_table[policy_table["campaign"] == c]
        theta = rng.beta(t["alpha"].to_numpy(), t["beta"].to_numpy(), size=(n, len(t)))
        top = np.argsort(-theta, axis=1)[:, :3]
        for k in range(3):
            freq = np.bincount(top[:, k], minlength=len(t)) / n
            p = t[f"p_position_{k + 1}"].to_numpy()
            assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-4), (c, k)


# -------------------------------------------------------------------------------- estimates vs online truth


def test_is_of_bts_equals_numpy_and_its_ci_covers_bts_online_click_rate(frame, moments):
    groups = {g.keys["experiment_id"]: g for g in summarize_groups(
        moments, reward="click", policy="bts", metric="is", discount="propensity", exposure="propensity",
        clip=math.inf, by=("experiment_id",), level=LEVEL)}
    for c in CAMPAIGNS:
        rows = frame[(frame["experiment_id"] == c) & (frame["arm"] == "control")]
        v = rows["target_propensity__bts"] / rows["logging_propensity"] * rows["click"]
        online = frame[(frame["experiment_id"] == c) & (frame["arm"] == "treatment")]["click"].mean()
        g = groups[c]
        assert g.target.value == pytest.approx(v.mean(), rel=1e-12)
        assert g.target.stderr == pytest.approx(v.std(ddof=1) / math.sqrt(len(v)), rel=1e-9)
        assert g.target.ci.low <= online <= g.target.ci.high, (c, g.target, online)
        assert g.online.treatment.value == pytest.approx(online)
    # Open Bandit Pipeline's README: IPW on `all` gives 1.198126 × the random policy's click rate (Monte Carlo
    # action distribution); exact probabilities give 1.2007
    rel = groups["all"].target.value / groups["all"].logging.value
    assert rel == pytest.approx(1.2007, abs=1e-4) and abs(rel / 1.198126 - 1) < 0.005


def test_the_command_line_gives_the_same_estimates(moments):
    r = subprocess.run([sys.executable, "-m", "offeval_core.cli", "estimate", str(LOGS), "--reward", "click",
                        "--policy", "bts", "--estimator", "is", "--by", "experiment_id", "--json"],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    out = {g["experiment_id"]: g for g in json.loads(r.stdout)["groups"]}
    for g in summarize_groups(moments, reward="click", policy="bts", metric="is", discount="propensity",
                              exposure="propensity", clip=math.inf, by=("experiment_id",), level=LEVEL):
        cli = out[g.keys["experiment_id"]]["target"]
        assert cli["value"] == pytest.approx(g.target.value, rel=1e-12)
        assert cli["ci"] == pytest.approx([g.target.ci.low, g.target.ci.high], rel=1e-9)


# ------------------------------------------------------------------------------------------ the dashboard


BELOW_ZERO = ("The CI's lower end is below 0, which a click rate cannot be: the interval is the normal approximation "
              "(estimate ± z · SE), symmetric by construction, so near 0 it reads as \"not distinguishable from 0 "
              "at this level\".")


@pytest.fixture(scope="module")
def served():
    with environment(OFFEVAL_DATA=str(LOGS), OFFEVAL_MAP="", OFFEVAL_REWARDS=""):
        yield


def test_the_sidebar_lists_bts_and_opens_on_it(served):
    at = open_page("clip_tuning", timeout=300)
    box = at.selectbox(key="w_policy")
    assert box.options == ["bts (propensities)"] and box.value == "bts"
    keys = {w.key for w in at.sidebar.selectbox}
    assert "w_discount" not in keys and "w_exposure" not in keys   # the weights are the logged propensities
    from dashboard.render import export_settings

    settings = export_settings(at.session_state["_offeval_ctx"])
    assert settings["policy"] == "bts" and "D" not in settings and "D0" not in settings   # exports say so too


def test_the_summary_lists_the_target_policies_and_the_default_the_pages_use(served):
    """``offeval dashboard --check``, ``offeval validate`` and the Data page say what the sidebar opens on."""
    lines = {}
    for command in (["dashboard", str(LOGS), "--check"], ["validate", str(LOGS)]):
        r = subprocess.run([sys.executable, "-m", "offeval_core.cli", *command], capture_output=True, text=True,
                           timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 0, r.stderr
        lines[command[0]] = r.stdout.splitlines()
    for out in lines.values():
        assert "  target policies:    bts (propensity); from column target_propensity__bts" in out
        assert "  default target:     bts (no policy named treatment; the first target policy)" in out
    from offeval_core.sanitize import escape_markdown

    at = open_page("data", timeout=300)
    table = next(m.value for m in at.markdown if "| | what offeval understood |" in m.value)
    assert "| **target policies** | " + escape_markdown("bts (propensity); from column target_propensity__bts") + " |" \
        in table
    assert "| **default target** | " + escape_markdown("bts (no policy named treatment; the first target policy)") \
        + " |" in table
    assert at.session_state["w_policy"] == "bts"


def test_decisions_show_bts_offline_estimate_and_ci_next_to_its_online_click_rate(served, moments):
    at = open_page("decisions", timeout=300)
    assert not at.error, [e.value for e in at.error]
    ests = [Variant("is", "propensity", "propensity", math.inf), Variant("snips", "propensity", "propensity", math.inf)]
    res = decision_boxes(moments, estimators=ests, policy="bts", level=LEVEL, rewards=("click",))
    assert at.segmented_control(key="w_dec_est").value == "IS (propensity)"
    seen = []
    for c in CAMPAIGNS:
        if at.selectbox(key="w_experiment").value != c:
            at.selectbox(key="w_experiment").set_value(c).run()
        row = res.boxes[(res.boxes["experiment_id"] == c) & (res.boxes["estimator"] == "IS (propensity)")].iloc[0]
        assert metric(at, "Offline estimate") == f"{row['offline_target']:.4g}"
        assert metric(at, "Online treatment arm") == f"{row['online_treatment']:.4g}"
        assert metric(at, "Offline 99% CI") == f"[{row['offline_target_low']:.4g}, {row['offline_target_high']:.4g}]"
        assert metric(at, "Covers the online mean") == "yes"
        assert row["offline_target_low"] <= row["online_treatment"] <= row["offline_target_high"]
        # a click rate cannot be below 0: a CI reaching below it is said to be the symmetric normal interval
        notes = [x.value for x in at.caption if x.value.startswith("The CI's lower end is below 0")]
        assert notes == ([BELOW_ZERO] if row["offline_target_low"] < 0 else []), (c, notes)
        seen.append(row["offline_target_low"] < 0)
    assert seen == [True, False, False]   # all reaches below 0 (IS of bts −0.0008256), men and women do not
    assert metric(at, "Offline estimate") == "0.006804"     # women: IS of bts
    takes = [m.value for m in at.markdown if "offeval-takeaway" in m.value]
    assert takes[0].startswith('<div class="offeval-takeaway">bts vs the logging policy, IS (propensity): the offline '
                               "decision is the online one in 3 of 3 A/B tests")
    title = json.loads(at.main.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert title == "Offline vs online decisions per A/B test — bts, IS (propensity)"


def test_clip_tuning_shows_the_cis_estimate_with_its_ci_next_to_the_online_click_rate(served, logs, moments):
    at = open_page("clip_tuning", timeout=300)
    assert not at.error, [e.value for e in at.error]
    res = clip_tuning(logs, reward="click", policy="bts", clips=DEFAULT_CLIPS, level=LEVEL, moments=moments)
    row = res.table.set_index("clip").loc[math.inf]
    on = online_results(moments, reward="click", level=LEVEL)[()].treatment
    assert metric(at, "Estimate at m") == f"{row['estimate']:.4g}"
    assert metric(at, "Online treatment arm") == f"{on.value:.4g}"
    assert row["ci_low"] <= on.value <= row["ci_high"]
    # the headline above the chart, the rest of it under the chart (Markdown-escaped: "\[" shows as "[")
    take = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert (f"At m = ∞ the CIS estimate of bts is {row['estimate']:.4g}" in take
            and f"Online, the treatment arm measured {on.value:.4g} [{on.ci.low:.4g}, {on.ci.high:.4g}]: inside the "
                f"offline 99% CI [{row['ci_low']:.4g}, {row['ci_high']:.4g}]" in take), take
    spec = json.loads(at.main.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["title"]["text"] == "Bias and variance vs the cap c — bts (CIS, weights π_t / π_p), click"
    at.select_slider(key="w_clip").set_value(8.0).run()
    assert metric(at, "Estimate at m") == f"{res.table.set_index('clip').loc[8.0, 'estimate']:.4g}"


def test_sensitivity_selects_the_settings_of_a_propensity_policy_by_the_rank_policies_rule(served, moments):
    from offeval_core.analyses.sensitivity import online_settings, select_settings

    # no (campaign, day) is a significant online improvement at p < 0.001: nothing to detect, said, no TPR shown
    at = open_page("sensitivity", timeout=300)
    assert not at.error, [e.value for e in at.error]
    res = sensitivity(moments, policy="bts", metrics=("cis", "ncis"), discount="propensity", exposure="propensity",
                      level=LEVEL)
    assert len(res.settings) == 0
    assert [w.value for w in at.warning] == [res.takeaway]
    assert not at.main.get("plotly_chart")
    # at p < 0.05 the one improvement (men, 2019-11-25: +0.0090, p = 0.0065) is chosen by the same select_settings
    online = online_settings(moments, ("click",))
    chosen = select_settings(online, online_alpha=0.05)
    assert [(r.experiment_id, str(r.day)) for r in chosen.itertuples()] == [("men", "2019-11-25")]
    at = open_page("sensitivity", timeout=300, sens_alpha="0.05")
    assert not at.error, [e.value for e in at.error]
    res = sensitivity(moments, policy="bts", metrics=("cis", "ncis"), discount="propensity", exposure="propensity",
                      level=LEVEL, online_alpha=0.05)
    assert res.settings[["experiment_id", "day"]].astype(str).values.tolist() == [["men", "2019-11-25"]]
    at_inf = res.table[res.table["clip"] == math.inf].set_index("metric")
    assert metric(at, "CIS TPR") == f"{at_inf.loc['cis', 'tpr']:.0%}"
    assert metric(at, "NCIS TPR") == f"{at_inf.loc['ncis', 'tpr']:.0%}"
    assert metric(at, "CIS sign agreement") == f"{at_inf.loc['cis', 'sign_agreement']:.0%}"
    spec = json.loads(at.main.get("plotly_chart")[0].proto.spec)
    # the title is wrapped to the chart's width (figure_text.wrap_title): its words, in order
    assert spec["layout"]["title"]["text"].replace("<br>", " ") == (
        "Offline sensitivity vs clipping — 1 online improvement, 99% CI (policy bts, weights π_t / π_p)")
    assert spec["layout"]["xaxis"]["title"]["text"] == "cap c of the weights π_t / π_p (log₂ scale)"


def test_correlation_and_dcg_vs_ndcg_name_what_applies(served):
    at = open_page("correlation", timeout=300)
    assert not at.error, [e.value for e in at.error]
    titles = [json.loads(e.proto.spec)["layout"]["title"]["text"] for e in at.main.get("plotly_chart")]
    assert titles[0].endswith("Rₜ = bts")
    assert any("is given by propensities" in i.value for i in at.info)
    at = open_page("dcg_vs_ndcg", timeout=300)
    assert any("DCG and nDCG score a ranking" in i.value for i in at.info)
    assert [link.proto.page for link in at.main.get("page_link")] == ["candidates", "decisions", "clip-tuning",
                                                                       "sensitivity", "correlation"]


def test_candidates_page_equals_the_core_at_the_recommended_cap(served, logs, moments):
    from offeval_core.analyses.clip_tuning import mean_offline_effect, recommend_clip

    at = open_page("candidates", timeout=300)
    assert not at.error, [e.value for e in at.error]
    tuned = clip_tuning(logs, reward="click", policy="bts", clips=DEFAULT_CLIPS, level=LEVEL, moments=moments)
    effect = mean_offline_effect(moments, reward="click", policy="bts", discount="propensity",
                                 exposure="propensity", level=LEVEL, metric="cis")
    cap = recommend_clip(tuned.table, level=tuned.level, effect=effect).clip
    res = compare_candidates(moments, candidates=[("bts", Variant("cis", "propensity", "propensity", cap))],
                             reward="click", level=LEVEL)
    table = next(d.value for d in at.dataframe if "beats the logging policy" in d.value.columns)
    assert table["effect"].iloc[0] == format_number(res.table["effect"].iloc[0])   # as every number is shown
    assert table["estimate high"].iloc[0] == format_number(res.table["estimate_high"].iloc[0])
    assert metric(at, "A/B test next") == (res.next_policy or "none")
    assert any(i.value.startswith(f"**Clip of the comparison:** m = {cap:g}") for i in at.info)


@pytest.mark.parametrize("estimator", ["ncis", "piece-ncis", "point-ncis"])
def test_the_bootstrap_normalises_as_the_reduce_on_the_real_log(logs, estimator):
    """The bootstrap's point value (its own pass over the per-session sums, importance/normalisation.py's groups)
    equals the reduce's estimate on the real log: the normalised estimators at c = 16 (campaigns as strata)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EstimatorWarning)  # PointNCIS pools the one-row (bandit) contexts, said
        est = imp.estimate(logs, reward="click", policy="bts", estimator=estimator, clip=16, weights="propensity")
        boot = imp.bootstrap(logs, reward="click", policy="bts", estimator=estimator, clip=16, weights="propensity",
                             n_boot=2, rng=0)
    assert boot.target.value == pytest.approx(est.target.value, rel=1e-12)
    assert boot.logging.value == pytest.approx(est.logging.value, rel=1e-12)
