"""`offeval report` on files shaped like real exports: a team's export whose tested ranker is `ranker_v2` (no
policy named treatment, A/B labels, an item-id column) and an Open-Bandit-shaped propensity log whose target is
`bts`. The report takes the policy the logs have, says on stderr which one and why, and every table it prints
equals the core's on the correctly mapped logs (tests/export_fixtures.py)."""

from __future__ import annotations

import html
import math

import pytest

from offeval_core.analyses import (
    clip_tuning,
    correlation_by_clip,
    decision_boxes,
    default_variants,
    offline_online_correlation,
    sensitivity,
)
from offeval_core.analyses.clip_tuning import mean_offline_effect, recommend_clip
from offeval_core.analyses.plan import PROPENSITY_CURVES, decision_estimators, propensity_estimators
from offeval_core.cli import main
from offeval_core.engine import Grid, reduce
from offeval_core.importance import reduce_importance
from offeval_core.logs import LOGGING_POLICY, read_logs
from offeval_core.report import build_report
from offeval_core.report_html import fmt_table
from tests.export_fixtures import demo_sample, open_bandit_like, team_export

CLIPS = (1.0, 4.0, 64.0, math.inf)
GRID = "1,4,64,inf"


def _report(capsys, path, out, *extra):
    code = main(["report", str(path), "--out", str(out), "--clip-grid", GRID, "--n-boot", "20", "--no-progress",
                 *extra])
    err = capsys.readouterr().err
    assert code == 0, err
    return out.read_text(encoding="utf-8"), err


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    d = tmp_path_factory.mktemp("team")
    export, schema = team_export(demo_sample(80))
    export.to_csv(d / "export.csv", index=False)
    return d, read_logs(schema, rewards=["clicked", "completed"])


def test_a_tested_ranker_not_named_treatment_gets_every_section_with_the_cores_numbers(capsys, team):
    d, logs = team
    text, err = _report(capsys, d / "export.csv", d / "report.html")
    assert ("offeval report: target policy ranker_v2, taken to have served the treatment arm (no policy named "
            "treatment; the first policy that is not the logging policy (current is)); --policy chooses another "
            "(ranker_v3)") in err
    assert "rank__treatment" not in text and "Needs an A/B test" not in text
    assert "ranker_v2 (rank policy; taken to have served the treatment arm)" in text
    m = reduce(logs, Grid(rewards=("clicked", "completed"), policies=("ranker_v2",), discounts=("pbm", "log2"),
                          exposures=("pbm", "log2"), clips=CLIPS))
    # KDD'24 Sec. 6.2's settings only (no fallback to other settings): the table is shown iff there are some
    sens = sensitivity(m, policy="ranker_v2", discount="pbm", exposure="pbm")
    assert html.escape(sens.takeaway) in text
    assert (fmt_table(sens.table, pct_cols=("tpr", "sign_agreement")) in text) == (not sens.settings.empty)
    neg = sensitivity(m, policy="ranker_v2", discount="pbm", exposure="pbm", side="negatives")
    assert html.escape(neg.takeaway) in text
    # Table 2 has an Rₜ row per (experiment, reward) for ranker_v2, not only the logging policy's R₀ rows
    corr = offline_online_correlation(m, variants=default_variants(math.inf, pbm="pbm"),
                                      policies=(LOGGING_POLICY, "ranker_v2"))
    n_rows = logs.frame["experiment_id"].nunique() * 2
    assert set(corr.table["policy"]) == {LOGGING_POLICY, "ranker_v2"}
    assert len(corr.table.drop_duplicates(["experiment_id", "reward", "policy"])) == 2 * n_rows
    assert corr.styled_html() in text and html.escape(corr.takeaway) in text
    by_clip = correlation_by_clip(m, reward="clicked", policy="ranker_v2", model="pbm")
    assert html.escape(by_clip.takeaway) in text
    dec = decision_boxes(m, estimators=list(decision_estimators("pbm", math.inf)), policy="ranker_v2", level=0.99,
                         relative=True)
    assert fmt_table(dec.summary, pct_cols=("precision", "fnr", "agreement")) in text
    ct = clip_tuning(logs, reward="clicked", policy="ranker_v2", discount="pbm", exposure="pbm", clips=CLIPS,
                     moments=m, level=0.99)
    assert fmt_table(ct.table, pct_cols=("clipped_rows", "clipped_mass", "ess_share")) in text
    # --policy picks the other candidate: its numbers, not ranker_v2's
    text3, _ = _report(capsys, d / "export.csv", d / "report_v3.html", "--policy", "ranker_v3")
    ct3 = clip_tuning(logs, reward="clicked", policy="ranker_v3", discount="pbm", exposure="pbm", clips=CLIPS,
                      moments=reduce(logs, Grid(rewards=("clicked",), policies=("ranker_v3",), discounts=("pbm",),
                                                exposures=("pbm",), clips=CLIPS)), level=0.99)
    assert fmt_table(ct3.table, pct_cols=("clipped_rows", "clipped_mass", "ess_share")) in text3
    assert not ct3.table["estimate"].equals(ct.table["estimate"])


def test_a_policy_the_logs_do_not_hold_is_refused_naming_the_ones_they_do(capsys, team):
    d, logs = team
    code = main(["report", str(d / "export.csv"), "--out", str(d / "none.html"), "--policy", "treatment",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code != 0 and not (d / "none.html").exists()
    assert ("target policy 'treatment' is not in the logs (a rank__treatment or target_propensity__treatment "
            "column); their target policies: current, ranker_v2, ranker_v3") in err
    with pytest.raises(ValueError, match="their target policies: current, ranker_v2, ranker_v3"):
        build_report(logs, policy="bts")


def test_a_propensity_target_gets_the_importance_estimators_on_every_section_that_applies(capsys, tmp_path):
    export, schema = open_bandit_like(1500, seed=4, both=True)
    path = tmp_path / "obd.csv"
    export.to_csv(path, index=False)
    text, err = _report(capsys, path, tmp_path / "report.html", "--map", "arm=policy", "--arms",
                        "control=random,treatment=bts")
    assert "offeval report: target policy bts, taken to have served the treatment arm" in err
    assert "bts (propensity policy; taken to have served the treatment arm)" in text
    assert "Needs a target policy" not in text and "Needs an A/B test" not in text
    logs = read_logs(schema, rewards=["click"])
    m = reduce_importance(logs, rewards=("click",), policies=("bts",), clips=CLIPS, weights="propensity",
                          cappings=("max",), scales=("session",))
    p = "propensity"
    sens = sensitivity(m, policy="bts", metrics=PROPENSITY_CURVES, discount=p, exposure=p)
    assert html.escape(sens.takeaway) in text
    assert (fmt_table(sens.table, pct_cols=("tpr", "sign_agreement")) in text) == (not sens.settings.empty)
    corr = offline_online_correlation(m, variants=propensity_estimators(math.inf), policies=(LOGGING_POLICY, "bts"))
    assert corr.styled_html() in text
    dec = decision_boxes(m, estimators=list(propensity_estimators(math.inf)), policy="bts", level=0.99,
                         relative=True)
    assert fmt_table(dec.summary, pct_cols=("precision", "fnr", "agreement")) in text
    ct = clip_tuning(logs, reward="click", policy="bts", discount=p, exposure=p, clips=CLIPS, moments=m, level=0.99)
    assert fmt_table(ct.table, pct_cols=("clipped_rows", "clipped_mass", "ess_share")) in text
    effect = mean_offline_effect(m, reward="click", policy="bts", discount=p, exposure=p, level=0.99, metric="cis")
    assert html.escape("Recommended " + recommend_clip(ct.table, level=ct.level, effect=effect).reason) in text
    # CIS at the cap c = 4 is the capped weight times the click, averaged over the random arm's rounds
    control = schema[schema["arm"] == "control"]
    w = (control["target_propensity__bts"] / control["logging_propensity"]).clip(upper=4.0)
    assert ct.table.set_index("clip").loc[4.0, "estimate"] == pytest.approx(float((w * control["click"]).mean()),
                                                                             rel=1e-12)
    assert "DCG vs nDCG compares rankings: bts is given by propensities" in html.unescape(text)
