"""Escaping and CSV neutralisation, checked against an independent renderer and a CSV round trip."""

from __future__ import annotations

import html
import io

import markdown_it
import pandas as pd
import plotly.graph_objects as go
from hypothesis import given, settings
from hypothesis import strategies as st

from offeval_core.sanitize import (
    FORMULA_LEADS,
    escape_markdown,
    neutralise_cell,
    neutralise_frame,
    plot_markup,
    sanitize_figure,
)

MD = markdown_it.MarkdownIt("commonmark")
TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_characters="\x7f"),
               max_size=40)


@settings(max_examples=600, deadline=None)
@given(TEXT)
def test_escaped_markdown_renders_as_exactly_the_text(text):
    """CommonMark renders the escaped text as one paragraph holding exactly the text (line breaks as spaces,
    ends stripped)."""
    stripped = " ".join(text.splitlines()).strip()
    rendered = MD.render(escape_markdown(text))
    if not stripped:
        assert rendered == ""
    else:
        assert rendered == f"<p>{html.escape(stripped, quote=False).replace(chr(34), '&quot;')}</p>\n"


def test_hostile_names_examples():
    for name, shown in [("**bold**", "**bold**"), ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
                        ("[click](http://evil)", "[click](http://evil)"), ("# title", "# title"),
                        ("1. item", "1. item"), ("- item", "- item"), ("_x_", "_x_"), ("session_id", "session_id")]:
        assert MD.render(escape_markdown(name)) == f"<p>{shown}</p>\n"
    assert escape_markdown("session_id") == "session_id"  # plain names stay readable in the source


@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=32), st.integers(-10**6, 10**6)),
                min_size=1, max_size=20),
       st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
                        max_size=12), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_csv_neutralises_text_cells_only(numbers, texts):
    n = min(len(numbers), len(texts))
    df = pd.DataFrame({"value": pd.Series(numbers[:n], dtype=float), "name": texts[:n]})
    out = neutralise_frame(df)
    back = pd.read_csv(io.StringIO(out.to_csv(index=False)), keep_default_na=False, dtype={"name": str})
    # numbers (negative ones too) come back as the same numbers
    assert back["value"].tolist() == pytest_approx(df["value"].tolist())
    for original, cell in zip(df["name"], out["name"], strict=True):
        if original.startswith(FORMULA_LEADS):
            assert cell == "'" + original
        else:
            assert cell == original
    assert df["name"].tolist() == texts[:n]  # the input frame is untouched


def pytest_approx(values):
    import pytest

    return pytest.approx(values, rel=1e-6)


def test_formula_cells_and_column_names():
    df = pd.DataFrame({"=cmd|' /C calc'!A0": ["@SUM(A1)", "+1", "-2", "ok", "\tx"], "delta": [-1.5, 2, -3, 0, 1]})
    out = neutralise_frame(df)
    assert list(out.columns) == ["'=cmd|' /C calc'!A0", "delta"]
    assert out.iloc[:, 0].tolist() == ["'@SUM(A1)", "'+1", "'-2", "ok", "'\tx"]
    assert out["delta"].tolist() == [-1.5, 2, -3, 0, 1]
    assert neutralise_cell(-7) == -7 and neutralise_cell(None) is None


def test_chart_text_keeps_formatting_and_shows_other_tags():
    assert plot_markup("a<br>b <sup>2</sup>") == "a<br>b <sup>2</sup>"
    assert plot_markup('<a href="javascript:x">p</a>') == "&lt;a href=&quot;javascript:x&quot;&gt;p&lt;/a&gt;"
    fig = go.Figure(go.Scatter(x=[1], y=[1], name="<span style='font-size:99px'>policy</span>"))
    fig.update_layout(title="DCG — <img src=x>", xaxis_title="<a href='http://e'>m</a>")
    sanitize_figure(fig)
    assert fig.data[0].name == "&lt;span style=&#x27;font-size:99px&#x27;&gt;policy&lt;/span&gt;"
    assert fig.layout.title.text == "DCG — &lt;img src=x&gt;"
    assert fig.layout.xaxis.title.text.startswith("&lt;a href=")
