"""The Data page says what it understood of an upload, and asks before computing anything when the file leaves a
question open (which column is the arm, which columns are rewards); the arm labels have a field in the column
mapping; the numbers of the loaded upload equal the core's on the correctly mapped data."""

from __future__ import annotations

import pytest
from dashboard_support import environment, open_page, upload, write_small_world

from offeval_core.engine import Grid, reduce
from offeval_core.estimators import summarize_groups
from offeval_core.logs import read_logs
from offeval_core.mapping import EACH_ROW
from offeval_core.sanitize import escape_markdown
from tests.export_fixtures import demo_sample, open_bandit_like, team_export

NONE = "(not in my file)"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = write_small_world(tmp_path_factory.mktemp("demo"))
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield out


@pytest.fixture(scope="module")
def demo():
    return demo_sample(80)


def _asked(at) -> str:
    return " ".join(w.value for w in at.warning if "Before anything is computed" in w.value)


def _understood(at, title: str = "what offeval understood") -> str:
    return next(m.value for m in at.markdown if f"| | {title} |" in m.value)


def _upload_key(at):
    from dashboard import data

    info = at.session_state["upload_info"]
    return data.upload_key(info["sha"], info["name"], info["mapping"])


def test_an_ab_column_offeval_cannot_name_is_asked_before_anything_is_computed(world, demo):
    export, schema = team_export(demo, arm_column="cohort")
    at = upload(open_page(), export, "cohort.csv", guess=True)
    asked = _asked(at)
    assert "column 'cohort' looks like the A/B arm (labels 'A' and 'B'" in asked
    assert "if cohort is the arm, choose cohort as arm in the column mapping and enter the arm labels " \
           "control=A,treatment=B" in asked
    # nothing computed: no dataset, no validation report; what was understood so far is shown
    assert not any("Validation report" in h.value for h in at.subheader)
    so_far = _understood(at)
    assert "| **rewards** | clicked, completed (named like a reward) |" in so_far
    assert "cohort: two labels, the same on every row of a session, each on about half the sessions" in so_far
    # the form is pre-filled with the guesses; the arm is not guessed
    assert at.selectbox(key="w_map_session_id").value == "visit"
    assert at.selectbox(key="w_map_arm").value == NONE
    assert at.multiselect(key="w_map_rewards").value == ["clicked", "completed"]
    assert at.text_input(key="w_map_policies").value == "pos_*"
    # answered: cohort is the arm, its labels entered
    at.selectbox(key="w_map_arm").set_value("cohort")
    at.text_input(key="w_map_arms").set_value("control=A,treatment=B")
    at.button(key="w_map_apply").click().run()
    assert not _asked(at) and not at.error, [e.value for e in at.error]
    table = _understood(at)
    assert "(column cohort, mapped by you; A → control, B → treatment, labels mapped by you)" in table
    assert "| **default target** | ranker_v2 (no policy named treatment; the first policy that is not the logging " \
           "policy (current is)) |" in table
    # the dashboard's numbers equal the core's on the correctly mapped data
    from dashboard import data

    m = data.moments(_upload_key(at), "clicked", "log2", "log2")
    want = reduce(read_logs(schema), Grid(rewards=("clicked",), policies=("current", "ranker_v2", "ranker_v3"),
                                           discounts=("log2",), exposures=("log2",), clips=(64.0,)))
    got = summarize_groups(m, reward="clicked", policy="ranker_v2", discount="log2", exposure="log2", clip=64.0,
                           by=["experiment_id"])
    ref = summarize_groups(want, reward="clicked", policy="ranker_v2", discount="log2", exposure="log2", clip=64.0,
                           by=["experiment_id"])
    assert [g.effect.value for g in got] == pytest.approx([r.effect.value for r in ref], rel=1e-12)
    assert [g.online.effect.value for g in got] == pytest.approx([r.online.effect.value for r in ref], rel=1e-12)


def test_a_common_pair_loads_at_once_and_the_summary_says_what_was_guessed(world, demo):
    export, _ = team_export(demo, item_column="asset", arm_column="bucket")
    at = upload(open_page(), export, "bucket.csv", guess=True)
    assert not _asked(at) and not at.error, [e.value for e in at.error]
    table = _understood(at)
    assert "(column bucket, guessed from its name; A → control, B → treatment, a common pair, guessed)" in table
    assert f"| **sessions** | {export['visit'].nunique():,} (column visit, guessed from its name) |" in table
    assert "| **guessed** | arm labels of column 'bucket': A → control, B → treatment (a common pair) |" in table
    assert "| **target policies** | " + escape_markdown("current (rank, the logging policy), ranker_v2 (rank), "
                                                     "ranker_v3 (rank); from columns pos_<policy>") + " |" in table
    # the item id that once became the default reward is flagged, with how to map it
    flagged = " ".join(w.value for w in at.warning if "look meaningful" in w.value)
    assert "asset (an identifier: no value repeats within a session (" in flagged
    assert "probably the item id: choose asset as item_id in the column mapping" in table
    assert at.text_input(key="w_map_arms").value == "control=A,treatment=B"
    assert [m.value for m in at.metric if m.label == "Target policies"] == ["3"]
    # the pages' default target is the tested ranker, never the logging policy 'current' (the first column)
    assert at.session_state["w_policy"] == "ranker_v2"
    at.switch_page("views/clip_tuning.py").run()
    assert at.selectbox(key="w_policy").value == "ranker_v2"


def test_a_reward_chosen_by_value_is_confirmed_first(world, demo):
    export, _ = team_export(demo)
    export = export.rename(columns={"clicked": "y"}).drop(columns=["completed"])
    at = upload(open_page(), export, "y.csv", guess=True)
    assert "y is used as reward by value alone" in _asked(at)
    assert at.multiselect(key="w_map_rewards").value == ["y"]
    at.button(key="w_map_apply").click().run()
    assert not _asked(at) and "| **rewards** | y (named as a reward by you) |" in _understood(at)


def test_arm_labels_that_are_no_common_pair_are_entered_in_the_form(world, demo):
    export, _ = team_export(demo)
    export["bucket"] = export["bucket"].map({"A": "red", "B": "blue"})
    at = upload(open_page(), export, "colours.csv")
    at.selectbox(key="w_map_session_id").set_value("visit")
    at.selectbox(key="w_map_rank").set_value("pos")
    at.selectbox(key="w_map_arm").set_value("bucket")
    at.button(key="w_map_apply").click().run()
    text = " ".join(e.value for e in at.error)
    assert "column 'arm' (your 'bucket') has the labels 'blue', 'red'" in text
    assert "Enter which label is control and which treatment under Arm labels" in text
    at.text_input(key="w_map_arms").set_value("control=red treatment=blue").run()
    assert any("Arm labels must look like control=" in e.value for e in at.error)
    assert at.button(key="w_map_apply").disabled
    at.text_input(key="w_map_arms").set_value("control=red,treatment=blue").run()
    at.button(key="w_map_apply").click().run()
    assert not at.error, [e.value for e in at.error]
    assert "red → control, blue → treatment, labels mapped by you" in _understood(at)


def test_open_bandit_shaped_campaigns_one_round_per_row_and_a_propensity_policy(world):
    export, schema = open_bandit_like(1200, seed=6, both=True)
    at = upload(open_page(), export, "obd.csv", guess=True)
    assert "column 'policy' looks like the A/B arm (labels 'bts' and 'random'" in _asked(at)
    assert at.selectbox(key="w_map_session_id").value == EACH_ROW
    assert at.selectbox(key="w_map_logging_propensity").value == "propensity_score"
    at.selectbox(key="w_map_arm").set_value("policy")
    at.text_input(key="w_map_arms").set_value("control=random,treatment=bts")
    at.button(key="w_map_apply").click().run()
    assert not at.error, [e.value for e in at.error]
    table = _understood(at)
    assert "| **sessions** | 2,400 (no session column: each row is one session, a bandit round) |" in table
    assert "| **target policies** | " + escape_markdown("bts (propensity); from column target_propensity__bts") + " |" \
        in table
    assert escape_markdown("user-item_affinity_0, user-item_affinity_1, … (8 columns): named like a feature") in table
    # one impression per session: its deepest rank is its position (1 to 3 here), not a session length
    one = "one position per session: each session is one logged impression (a bandit round)"
    assert f"| **session length** | {escape_markdown(one)} |" in table
    assert [c.value for c in at.caption if c.value.startswith("Session length:")] == [f"Session length: {one}."]
    # nor a learnt position-bias curve: sessions do not reach ranks, rounds are logged at one
    assert ("No position-bias curve: each session is one logged impression (a bandit round), so how far users look "
            "down a ranking cannot be learnt from these logs — a learnt curve would only count the rounds logged at "
            "each position.") in [i.value for i in at.info]
    assert not [ch for ch in at.main.get("plotly_chart") if "Position bias" in ch.proto.spec]
    at.switch_page("views/method.py").run()
    assert [c.value for c in at.caption if c.value.startswith("Your data:")] == [
        f"Your data: 2,400 sessions, session length {one}; 1 target policy."]
    from dashboard import data

    ds = data.load(_upload_key(at))
    ref = read_logs(schema)
    assert (ds.logs.frame["click"].to_numpy() == ref.frame["click"].to_numpy()).all()
    assert ds.logs.sessions["arm"].astype(str).tolist() == ref.sessions["arm"].astype(str).tolist()
