"""The dashboard (AppTest, in process) never opens a server path named by a URL, shows every problem as a
specific message without file content, escapes names from uploads and keeps them out of the link."""

from __future__ import annotations

import pandas as pd
import pytest
from dashboard_support import environment, open_page, upload, write_small_world
from security_support import SECRET, moments_file
from streamlit.testing.v1 import AppTest

from offeval_core.sanitize import escape_markdown


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("secworld")
    out = write_small_world(root / "demo")
    datadir = root / "datadir"
    datadir.mkdir()
    moments_file(datadir, "team.parquet")
    (datadir / "bias.csv").write_text("rank,probability\n1,1\n2,0.5\n3,0.25\n")
    secret = root / "secret.csv"
    secret.write_text(f"{SECRET},PATH=/usr/bin\n1,2\n")
    with environment(OFFEVAL_DEMO_DIR=str(out), OFFEVAL_DATA_DIR=str(datadir)):
        yield {"demo": out, "data": datadir, "secret": secret}


def texts(at: AppTest) -> str:
    parts = []
    for kind in ("error", "warning", "info", "markdown", "caption", "text", "success", "title", "subheader"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [str(e.value) for e in at.sidebar.error]
    return "\n".join(parts)


@pytest.mark.parametrize("spec", ["table:/proc/self/environ", "table:/etc/passwd", "table:{secret}",
                                  "table:../secret.csv", "table:/dev/zero@3"])
@pytest.mark.parametrize("page", ["sensitivity", "decisions"])
def test_a_table_path_in_the_url_is_refused_without_content(world, spec, page):
    spec = spec.format(**world)
    at = open_page(page, discount=spec)
    shown = texts(at)
    assert "is not a plain file name" in shown
    assert "Using 'pbm' instead" in shown
    assert SECRET not in shown and "PATH=" not in shown and "root:" not in shown
    assert str(world["data"]) not in shown
    assert at.query_params.get("discount") in (None, [], "")  # the bad spec is not carried on in the link


def test_a_table_of_the_data_directory_is_used_by_name(world):
    at = open_page("sensitivity", discount="table:bias.csv")
    assert "is not a plain file name" not in texts(at)
    assert at.query_params["discount"] in ("table:bias.csv", ["table:bias.csv"])
    assert "table:bias.csv" in at.sidebar.selectbox(key="w_discount").options


@pytest.mark.parametrize("name", ["/etc/passwd", "../demo/logs.parquet", "/proc/self/environ", "team.csv",
                                  "nope.parquet"])
def test_a_moments_path_in_the_url_is_a_notice(world, name):
    at = open_page(None, moments=name)
    shown = texts(at)
    assert "moments file" in shown
    assert "root:" not in shown and "PATH=" not in shown and str(world["data"]) not in shown


def test_a_moments_file_of_the_data_directory_opens_by_name(world):
    at = open_page(None, moments="team.parquet")
    assert "Moments file" in texts(at)


MARKUP = "**bold**<img src=x onerror=alert(1)>[link](http://example.com)"


def test_markup_in_uploaded_names_is_escaped_and_kept_out_of_the_link(world):
    frame = pd.DataFrame({"session_id": ["001", "1", "1"], "rank": [1, 1, 2], MARKUP: [1, 0, 1],
                          "rank__" + "<b>evil</b>": [1, 2, 1], "<i>note</i>": ["=HYPERLINK(x)", "a", "b"]})
    at = open_page(None)
    upload(at, frame.to_csv(index=False).encode(), "up.csv")
    # the reward was chosen by value alone: the page asks first, the question naming it as text
    asked = next(w.value for w in at.warning if "Before anything is computed" in w.value)
    assert escape_markdown(MARKUP) in asked and MARKUP not in asked
    at.button(key="w_map_apply").click().run()
    assert at.session_state["w_reward"] == MARKUP
    assert at.session_state["w_policy"] == "<b>evil</b>"
    # names are never in the shareable link of an uploaded file
    params = at.query_params
    assert "reward" not in params and "policy" not in params
    # the sessions '001' and '1' stay two sessions
    assert any(m.value == "2" for m in at.metric if m.label == "Sessions")
    # what was understood names the text column as escaped markdown, not markup
    table = next(m.value for m in at.markdown if "what offeval understood" in m.value)
    assert "| **ignored column** | &lt;i&gt;note&lt;/i&gt;: text, not a number |" in table
    assert "<i>" not in table and "<b>" not in table and escape_markdown(MARKUP) in table


CLICK_MARKUP = "**click**<img src=x onerror=alert(1)>[link](http://example.com)"  # named like a reward


def test_a_reward_without_positives_is_named_as_text_in_the_error(world):
    frame = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], CLICK_MARKUP: [0, 0, 0],
                          "rank__t": [2, 1, 1]})
    at = open_page(None)
    upload(at, frame.to_csv(index=False).encode(), "**up**.csv", confirm=True)
    at.switch_page("views/sensitivity.py").run()
    errors = [e.value for e in at.error]
    assert any(f"Reward **{escape_markdown(CLICK_MARKUP)}** has no positive value in" in e for e in errors), errors
    assert not any(CLICK_MARKUP in e or "**up**" in e for e in errors), errors
