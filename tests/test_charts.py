import math

import numpy as np
import pytest
from analyses_world import small_world

from offeval_core import charts
from offeval_core.analyses import (
    clip_tuning,
    dcg_vs_ndcg,
    decision_boxes,
    offline_online_correlation,
    sensitivity,
    table1_example,
)


@pytest.fixture(scope="module")
def world():
    return small_world()


def test_clip_axis_places_infinity_one_gap_right():
    pos, ticks, text = charts.clip_positions([1, 2, 64, math.inf])
    assert pos.tolist() == [0.0, 1.0, 6.0, 8.0]
    assert text == ["1", "2", "64", "∞"] and ticks == [0.0, 1.0, 6.0, 8.0]


def test_sensitivity_figure_data_matches_table(world):
    res = sensitivity(world[2], online_alpha=1.0)
    fig = charts.sensitivity_figure(res)
    assert any(res.best_clips.values())
    for metric in ("dcg", "ndcg"):
        t = res.table[res.table["metric"] == metric].sort_values("clip")
        name = charts.METRIC_LABELS[metric]
        tpr, pval = [tr for tr in fig.data if tr.name == name and tr.legendgroup == metric][:2]
        assert np.allclose(tpr.y, t["tpr"]) and np.allclose(pval.y, t["mean_p"])
        assert list(fig.layout.xaxis.ticktext)[-1] == "∞"
        stars = [tr for tr in fig.data if tr.name.startswith(f"best m for {name}")]
        best = res.best_clips[metric]
        if not best:   # a flat line: no star
            assert not stars
            continue
        (star,) = stars
        # one star per best m (all tied ones), each on its line at its position on the whole grid (∞ included)
        assert list(star.y) == pytest.approx([t.loc[t["clip"] == b, "tpr"].iloc[0] for b in best])
        assert list(star.x) == [tpr.x[list(t["clip"]).index(b)] for b in best]
    assert fig.layout.yaxis2.type == "log"
    assert "online improvements" in fig.layout.title.text


def test_sensitivity_star_only_where_the_tpr_varies():
    from types import SimpleNamespace

    import pandas as pd

    from offeval_core.analyses.sensitivity import best_clips

    t = pd.DataFrame({"metric": ["dcg"] * 3 + ["ndcg"] * 3, "clip": [1.0, 8.0, math.inf] * 2,
                      "tpr": [0.1, 0.3, 0.2, 0.06, 0.06, 0.06], "mean_p": [0.5] * 6,
                      "n_detected": [1, 3, 2, 1, 1, 1], "n_settings": [10] * 6, "sign_agreement": [0.5] * 6})
    best = best_clips(t)
    assert best == {"dcg": (8.0,), "ndcg": ()}  # a flat line has no best m
    res = SimpleNamespace(table=t, best_clips=best, level=0.99, policy="treatment", discount="pbm",
                          rate_column="tpr", rate_name="TPR")
    names = [tr.name for tr in charts.sensitivity_figure(res).data]
    assert "best m for DCG" in names and "best m for nDCG" not in names


def test_correlation_figures_match_result(world):
    res = offline_online_correlation(world[2])
    fig = charts.correlation_figure(res)
    z = np.array(fig.data[0].z, dtype=float)
    # identity cells (r = 1 by construction) are not coloured: their z is empty, their text ≡
    shown = res.table["r"].where(~res.table["identity"]).to_numpy(float)
    assert np.allclose(np.nan_to_num(np.sort(z.ravel())), np.nan_to_num(np.sort(shown)))
    text = np.array(fig.data[0].text, dtype=object).ravel()
    assert (text == "≡").sum() == int(res.table["identity"].sum())
    assert list(fig.data[0].x) == list(res.labels)
    s = res.series("exp01", "like", "R0")
    sf = charts.correlation_series_figure(s)
    assert np.allclose(sf.data[0].y, s["online"]) and len(sf.data) == 1 + len(res.labels)


def test_agreement_figure_points_and_inverted_segments():
    res = dcg_vs_ndcg(table1_example().session_values, n_boot=0)
    fig = charts.agreement_figure(res)
    pts = next(tr for tr in fig.data if tr.name == "policy")
    assert list(pts.x) == pytest.approx([1.0, 1.25]) and list(pts.y) == pytest.approx(list(res.points["ndcg"]))
    seg = next(tr for tr in fig.data if tr.name.startswith("inverted pairs"))
    assert seg.name == "inverted pairs (1)" and len(seg.x) == 3


def test_decision_figure_boxes_are_the_cis(world):
    res = decision_boxes(world[2], estimators=[("dcg", "pbm", "pbm", 64.0)], level=0.9)
    fig = charts.decision_figure(res)
    outlines = [tr for tr in fig.data if tr.fill == "toself"]
    xs = [x for tr in outlines for x in tr.x if x is not None]
    expected = res.boxes[["offline_low", "offline_high"]].to_numpy().ravel()
    assert sorted(set(np.round(xs, 12))) == sorted(set(np.round(expected, 12)))
    for tr in outlines:
        cat = next(c for c, lab in charts.DECISION_LABELS.items() if tr.name.startswith(lab))
        assert tr.line.color == charts.DECISION_COLOURS[cat]
    with pytest.raises(ValueError, match="estimator 'x' is not in the result"):
        charts.decision_figure(res, estimator="x")


def test_clip_tuning_figure_and_pbm_curves(world):
    _, logs, m = world
    res = clip_tuning(logs, reward="like", policy="treatment", clips=(1.0, 4.0, 64.0, math.inf), moments=m)
    fig = charts.clip_tuning_figure(res)
    se = next(tr for tr in fig.data if tr.name == "standard error")
    assert np.allclose(se.y, res.table.sort_values("clip")["stderr"])
    # the recommended-m line is drawn at that m's position on the grid, also when it is ∞
    rec_x = [sh.x0 for sh in fig.layout.shapes]
    pos, _, _ = charts.clip_positions(res.table.sort_values("clip")["clip"])
    assert rec_x[0] == pos[list(res.table.sort_values("clip")["clip"]).index(res.recommendation.clip)]
    curves = {"a": np.array([1.0, 0.5, 0.25]), "b": np.array([1.0, 0.6])}
    pf = charts.pbm_curve_figure(curves)
    assert [tr.name for tr in pf.data] == ["a", "b"] and list(pf.data[0].y) == [1.0, 0.5, 0.25]
    assert pf.layout.yaxis.type == "log"
    with pytest.raises(ValueError, match="curves must contain at least one"):
        charts.pbm_curve_figure({})
