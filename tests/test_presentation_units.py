"""The pieces of what is shown, without a browser: numbers (offeval_core.formatting, offeval_core.display), labels
that do not collide (offeval_core.labels), the exported figure's text (offeval_core.figure_text) and the checks the
browser layout test applies (tests/layout_checks.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layout_checks import markup_problems, number_problems, overlaps, significant_digits

from offeval_core.display import display_frame, header
from offeval_core.figure_text import CHAR_EM, chars_per_line, exported_figure, plain_text, wrap_lines
from offeval_core.formatting import format_number, format_p, format_share
from offeval_core.labels import PLOT_PX, place_labels, text_box

# ------------------------------------------------------------------------------------------------ numbers


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_a_number_is_shown_with_at_most_4_significant_digits_and_rounds_to_itself(x):
    text = format_number(x)
    if abs(x) < 1e4:
        assert significant_digits(text) <= 4 or text == "0"
    shown = float(text.replace(",", "").replace("+", ""))
    if x != 0:  # within half a unit of the 4th significant digit
        assert shown == pytest.approx(x, rel=5.01e-4, abs=0)


def test_numbers_p_values_and_shares_read_like_an_ab_tool():
    assert [format_p(p) for p in (0.04321, 0.000999, 1e-40, 1.0, math.nan)] == ["0.0432", "< 0.001", "< 0.001", "1",
                                                                                 "n/a"]
    assert format_number(0.00000000000000001) == "1e-17"   # never seventeen zeros
    assert format_number(333620.1527) == "333,600"
    assert format_share(0.0638297) == "6.38 %"


def test_tables_get_human_headers_and_why_a_cell_is_missing():
    shown, missing = display_frame(pd.DataFrame({"experiment_id": ["e1"], "ess": [333620.1527], "bias_bound": [1e-17],
                                                 "p_value": [3e-40], "precision": [math.nan], "clip": [math.inf]}))
    assert list(shown.columns) == ["A/B test", "ESS", "bias bound", "p-value", "precision", "m"]
    assert shown.iloc[0].tolist() == ["e1", "333,620", "1e-17", "< 0.001", "n/a — no offline ship decision", "∞"]
    assert missing == {"precision": "no offline ship decision"}
    assert "_" not in "".join(header(c) for c in ("offline_low", "n_false_negative", "sign_agreement", "ess_share"))


# ------------------------------------------------------------------------------------------------ labels


def _boxes(xs, ys, texts, placed, x_range, y_range, sx=1.0, sy=1.0):
    out = []
    for lab in placed:
        px = (xs[lab.index] - x_range[0]) / (x_range[1] - x_range[0]) * PLOT_PX[0] * sx
        py = (y_range[1] - ys[lab.index]) / (y_range[1] - y_range[0]) * PLOT_PX[1] * sy
        w, h = text_box(texts[lab.index], 12)
        out.append({"text": texts[lab.index], "x": px + lab.dx - w / 2, "y": py + lab.dy - h / 2, "width": w,
                    "height": h})
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=25))
def test_placed_labels_never_overlap_at_any_drawn_size(points):
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    texts = [f"exp{i:02d}" for i in range(len(points))]
    rng = (-0.05, 1.05)
    placed = place_labels(xs, ys, texts, x_range=rng, y_range=rng, max_labels=12)
    assert len(placed) <= 12 and len({p.index for p in placed}) == len(placed)
    for sx, sy in ((1, 1), (1.5, 1), (2.2, 1.4)):
        boxes = _boxes(xs, ys, texts, placed, rng, rng, sx, sy)
        assert not overlaps(boxes, tolerance=0.0)
        assert all(b["x"] >= 0 and b["x"] + b["width"] <= PLOT_PX[0] * sx for b in boxes)


def test_two_points_at_the_same_place_both_get_a_label():
    placed = place_labels([0.5, 0.5], [0.5, 0.5], ["treatment", "cand_07"], x_range=(0, 1), y_range=(0, 1))
    assert sorted(p.index for p in placed) == [0, 1]
    assert (placed[0].dx, placed[0].dy) != (placed[1].dx, placed[1].dy)


# ------------------------------------------------------------------------------------------------ exports


def test_the_export_is_plain_text_wrapped_to_its_width_with_a_footer():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="DCG"), layout={"title": {"text": "DCG <b>vs</b> nDCG"}})
    take = "treatment vs the logging policy — " + "DCG detects 19 % at m = 256, " * 20 + "<span style='x'>done</span>."
    out = exported_figure(fig, takeaway=take, footer="Dataset: demo · policy = treatment · m = ∞", width=900)
    texts = {a.name: a.text for a in out.layout.annotations}
    assert out.layout.title.text == "DCG vs nDCG"
    assert "<span" not in texts["takeaway"] and "style" not in texts["takeaway"]
    lines = texts["takeaway"].split("<br>")
    assert len(lines) > 3 and max(map(len, lines)) <= chars_per_line(900 - 60, 14)
    assert max(map(len, lines)) * CHAR_EM * 14 <= 900 - 60  # every line fits the width
    assert plain_text(texts["takeaway"]).replace("\xa0", " ").endswith("done.")
    assert texts["footer"].replace("\xa0", " ") == "Dataset: demo · policy = treatment · m = ∞"
    # the plot keeps its height: the figure grows by the text around it
    assert out.layout.height - out.layout.margin.t - out.layout.margin.b == pytest.approx(450 - 80 - 80, abs=1)


def test_wrapping_keeps_every_word_and_binds_equals_signs():
    text = "At m = 1024 the DCG estimate of treatment is 0.2447 ± 0.0081 with 12 % of the rows"
    lines = wrap_lines(text, 16)
    assert " ".join(lines).replace("\xa0", " ") == text
    assert not any(line.endswith(("=", "m")) for line in lines)


# ------------------------------------------------------------------------------------------------ the checks


def test_the_layout_checks_catch_what_they_are_for():
    assert markup_problems(["Position bias<span style='font-size:13px'>At rank 10"], "x")
    assert markup_problems(["don&#x27;t"], "x") and markup_problems(["p = &lt; 0.001"], "x")
    assert markup_problems(["Pearson r = nan"], "x") and markup_problems(["None"], "x")
    assert not markup_problems(["rank__<policy> columns", "p < 0.001", "NaN rewards are refused"], "x")
    assert number_problems(["333620.1527"], "x") and number_problems(["0.00000000000000001"], "x") == []
    assert number_problems(["0.06382978723404255"], "x")
    assert not number_problems(["1,207,877", "0.2447", "[0.2354, 0.2909]", "6.38 %", "2026-03-02", "exp01", "1e-17"],
                               "x")
    assert significant_digits("0.002685") == 4 and significant_digits("333,620") == 0
    a = {"text": "a", "x": 0, "y": 0, "width": 10, "height": 10}
    assert overlaps([a, {**a, "text": "b", "x": 5}]) == [("a", "b")]
    assert overlaps([a, {**a, "text": "b", "x": 10}]) == []


def test_hover_formats_are_the_formatting_modules():
    from offeval_core import charts
    from offeval_core.formatting import HOVER_NUMBER

    res = type("R", (), {})()
    res.points = pd.DataFrame({"policy": ["a", "b", "c"], "dcg": [0.1, 0.2, 0.3], "ndcg": [0.5, 0.4, 0.6]})
    res.inverted_pairs = pd.DataFrame({"better_by_dcg": ["b"], "better_by_ndcg": ["a"]})
    res.pearson, res.kendall, res.inverted_share = np.nan, 0.3333, 1 / 3
    fig = charts.agreement_figure(res)
    assert "r = n/a" in fig.layout.title.text  # never "nan"
    pts = next(t for t in fig.data if t.name == "policy")
    assert HOVER_NUMBER in pts.hovertemplate
