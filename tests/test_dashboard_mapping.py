"""The browser's column-mapping form on a file with the user's own names: guesses pre-filled, policy
columns by pattern with a live preview, the reward picker, browser wording in messages."""

from __future__ import annotations

import pandas as pd
import pytest
from dashboard_support import environment, open_page, write_small_world

from tests.user_names import user_named


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = write_small_world(tmp_path_factory.mktemp("demo"))
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield out


def _upload(at, frame: pd.DataFrame, name: str, mapping=None):
    from dashboard import data

    payload = frame.to_csv(index=False).encode()
    sha = data.content_key(payload)
    data.upload_raw(sha, name, payload)
    at.session_state["upload_info"] = {"sha": sha, "name": name, "mapping": mapping or {}}
    at.run()
    at.selectbox(key="w_dataset").set_value("upload").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _preview(at) -> dict[str, str]:
    df = next(d.value for d in at.dataframe if list(d.value.columns) == ["your column", "becomes"])
    return dict(zip(df["your column"], df["becomes"], strict=True))


def test_form_guesses_previews_and_applies_policies_by_pattern(world):
    raw = pd.read_parquet(world / "logs.parquet")
    frame = user_named(raw)
    policies = [c[len("rank__"):] for c in raw.columns if c.startswith("rank__")]
    at = _upload(open_page(), frame, "mine.csv")
    # without a mapping the file is not valid; the message speaks of the form, not of --map
    text = " ".join(e.value for e in at.error)
    assert "Pick your file's column for 'session_id' and 'rank' in the column-mapping form below" in text
    assert "--map" not in text
    # the form is pre-filled with guesses, the pattern included
    assert at.selectbox(key="w_map_session_id").value == "visit"
    assert at.selectbox(key="w_map_rank").value == "pos"
    assert at.selectbox(key="w_map_arm").value == "variant"
    assert at.text_input(key="w_map_policies").value == "pos_*"
    assert at.multiselect(key="w_map_rewards").value == ["clicked", "completed"]
    preview = _preview(at)
    assert preview["pos_treatment"] == "target policy “treatment”"
    assert preview["clicked"] == "reward" and preview["test"] == "experiment_id"
    # the preview follows the pattern before it is applied
    at.text_input(key="w_map_policies").set_value("pos_t*").run()
    preview = _preview(at)
    assert preview["pos_treatment"] == "target policy “reatment”" and preview["pos_production"] == "not used"
    at.text_input(key="w_map_policies").set_value("pos_*").run()
    at.button(key="w_map_apply").click().run()
    assert not at.error, [e.value for e in at.error]
    at.switch_page("views/clip_tuning.py").run()
    # every mapped policy; the copy of the logging policy is marked (and not the default)
    assert [o.split(" ")[0] for o in at.selectbox(key="w_policy").options] == policies
    assert at.selectbox(key="w_policy").options[0] == "production = the logging policy"
    assert at.selectbox(key="w_reward").options == ["clicked", "completed"]
    assert at.main.get("plotly_chart")


def test_rank_looking_rewards_are_flagged_in_the_form(world):
    raw = pd.read_parquet(world / "logs.parquet")
    frame = user_named(raw)
    at = _upload(open_page(), frame, "mine2.csv")
    at.text_input(key="w_map_policies").set_value("").run()
    at.multiselect(key="w_map_rewards").set_value(["clicked", "pos_production"]).run()
    warn = [w.value for w in at.warning if "look like ranks" in w.value]
    assert warn and warn[0].startswith("pos_production look like ranks")
    # a pattern that matches nothing says so and cannot be applied
    at.text_input(key="w_map_policies").set_value("rank_*").run()
    assert any("No column matches the policy columns pattern “rank_*”" in e.value for e in at.error)
    assert at.button(key="w_map_apply").disabled
