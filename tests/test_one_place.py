"""Rules defined once: offline rows, moment subsets, the clip codec, the constant-within-a-session check."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offeval_core import importance as imp
from offeval_core.arms import offline_mask, offline_rows
from offeval_core.engine import Grid, reduce
from offeval_core.errors import InputError, LogValidationError, NeedsArms, SpecError
from offeval_core.estimators import subset
from offeval_core.logs import read_logs
from offeval_core.validation import clip_value, format_clip, parse_clip


def test_offline_rows_are_the_control_arm_when_there_is_one():
    f = pd.DataFrame({"arm": ["control", "treatment", "control"], "x": [1, 2, 3]})
    assert offline_rows(f)["x"].tolist() == [1, 3]
    assert offline_rows(f, None)["x"].tolist() == [1, 2, 3]
    assert offline_rows(f.assign(arm="treatment"))["x"].tolist() == [1, 2, 3]  # no control arm: all rows
    assert offline_rows(f.drop(columns="arm"))["x"].tolist() == [1, 2, 3]
    assert offline_mask(pd.Series(["a", "b"], dtype="category"), "control").tolist() == [True, True]


def test_subset_narrows_rows_and_grid():
    df = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [1.0, 0.0, 1.0], "like": [0.0, 1.0, 0.0],
                       "rank__a": [2, 1, 1], "rank__b": [1, 2, 1]})
    m = reduce(read_logs(df), Grid(rewards=("click", "like"), policies=("a", "b"), discounts=("log2",),
                                   exposures=("log2",), clips=(1, 4, math.inf)))
    s = subset(m, rewards=["like"], policies=["b"], clips=[4])
    assert s.grid.rewards == ("like",) and s.grid.policies == ("b",) and s.grid.clips == (4.0,)
    assert set(s.offline["policy"]) == {"logging", "b"} and set(s.offline["clip"]) == {4.0}
    assert set(s.offline["reward"]) == {"like"} and set(s.online["reward"]) == {"like"}
    assert len(s.offline) == len(m.offline[(m.offline["reward"] == "like") & (m.offline["clip"] == 4)
                                           & m.offline["policy"].isin(["logging", "b"])])
    with pytest.raises(ValueError, match="clip 8 was not computed; available: 1, 4, inf"):
        subset(m, clips=[8])
    with pytest.raises(ValueError, match="policy 'c' was not computed; available: a, b"):
        subset(m, policies=["c"])


@given(st.one_of(st.integers(1, 10**6).map(float), st.floats(1, 1e12, allow_nan=False), st.just(math.inf)))
def test_clip_codec_round_trips(clip):
    assert parse_clip(format_clip(clip)) == clip or math.isclose(parse_clip(format_clip(clip)), clip, rel_tol=1e-5)
    assert parse_clip(format_clip(clip, symbol=True)) == parse_clip(format_clip(clip))
    assert clip_value(clip) == ("inf" if math.isinf(clip) else clip)


def test_clip_codec_rejects_text_with_a_spec_error():
    with pytest.raises(SpecError, match="clip must be a number ≥ 1 or 'inf', got 'many'"):
        parse_clip("many")
    with pytest.raises(SpecError, match=r"clip must be ≥ 1 \(1 = raw labels, inf = unclipped\), got 0.5"):
        parse_clip("0.5")


def test_context_columns_must_be_constant_within_a_session():
    with pytest.raises(InputError, match="context column 'device' must be constant within a session .* session 7 "
                                         "has 'phone' and 'tv'"):
        imp.per_session(pd.Series([7, 7, 8]), pd.Series(["phone", "tv", "tv"]), name="context column 'device'")
    # a row-level column of the logs used as the context goes through the same check
    df = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [1.0, 0.0, 1.0],
                       "logging_propensity": [0.5, 0.25, 0.5], "target_propensity__t": 0.5})
    with pytest.raises(InputError, match="context column 'logging_propensity' must be constant within a session .* "
                                         "session 1 has '0.5' and '0.25'"):
        imp.estimate(read_logs(df), reward="click", policy="t", estimator="point-ncis", context="logging_propensity")


def test_dashboard_hints_are_chosen_by_the_error_type():
    from dashboard.ui import explain
    from offeval_core.errors import UnreadableInput

    what, fix = explain(SpecError("clip must be a number ≥ 1 or 'inf', got 'many'"))
    assert what == "clip must be a number ≥ 1 or 'inf', got 'many'" and fix.startswith("Use a discount spec like")
    # a typed error gets its type's hint even when its text would match another pattern
    _, fix = explain(UnreadableInput("duplicates in the discount column"))
    assert fix == "Upload a comma-separated CSV with a header row, or a Parquet file."
    # the problem lines of invalid logs carry their kind; the hint follows the kind, not the wording
    df = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 1, 0], "click": [1.0, -1.0, 0.0],
                       "arm": ["control", "control", "other"]})
    with pytest.raises(LogValidationError) as err:
        read_logs(df)
    kinds = sorted(p.kind for p in err.value.problems)
    assert kinds == ["arm", "rank", "reward"], err.value.problems
    _, fix = explain(err.value)
    assert fix == ("Ranks are 1-based positions: 1 = top of the feed, no 0, no text. Reward columns (e.g. click) "
                   "must hold finite numbers ≥ 0. Enter which label is control and which treatment under Arm labels "
                   "in the column mapping (e.g. control=A,treatment=B), or none if the column is not the arm.")
    # an analysis that needs an A/B test raises NeedsArms, which has its own hint
    m = reduce(read_logs(df.assign(rank=[1, 2, 1], click=[1.0, 0.0, 1.0], arm="control", rank__t=[2, 1, 1])),
               Grid(rewards=("click",), policies=("t",), discounts=("log2",), exposures=("log2",), clips=(1.0,)))
    from offeval_core.analyses import Variant, decision_boxes

    with pytest.raises(NeedsArms) as err:
        decision_boxes(m, estimators=[Variant("dcg", "log2", "log2", 1.0)], policy="t")
    assert explain(err.value)[1].startswith("These logs have no treatment arm")


def test_the_dashboard_and_the_report_plan_moments_with_one_planner():
    """Which reduces an analysis needs is decided once (analyses.plan); both front ends call it."""
    import inspect
    import re
    from pathlib import Path

    from offeval_core.analyses import Variant
    from offeval_core.analyses.plan import (
        PlannedReduce,
        correlation_variants,
        decision_estimators,
        plan_moments,
        report_variants,
    )

    plan = plan_moments([Variant("dcg", "pbm", "pbm", 8.0), Variant("ncis", "log2", "log2", 4.0),
                         Variant("ndcg", "pbm", "pbm", 1.0), Variant("snips", "log2", "log2", math.inf)])
    assert plan == (PlannedReduce("dcg", "pbm", "pbm", (1.0, 8.0)),
                    PlannedReduce("importance", "log2", "log2", (4.0, math.inf)))
    # the decision boxes' defaults, for the page and the report: m = 1, the chosen m, then m = ∞ (DCG, nDCG);
    # at m = ∞ the chosen m is one of the two, so three distinct estimators
    assert [(v.metric, v.discount, v.exposure, v.clip) for v in decision_estimators("log2", 16.0)] == [
        ("dcg", "log2", "log2", 1.0), ("dcg", "log2", "log2", 16.0), ("dcg", "log2", "log2", math.inf),
        ("ndcg", "log2", "log2", math.inf)]
    assert len(decision_estimators("pbm", math.inf, exposure="log2")) == 3
    assert {v.exposure for v in decision_estimators("pbm", math.inf, exposure="log2")} == {"log2"}
    # the correlation's defaults: Table 2's five at m = ∞, plus DCG (D, Q̂ at m) only when it is not one of them
    five = [(v.metric, v.discount, v.clip) for v in correlation_variants("pbm", math.inf)]
    assert five == [("dcg", "log2", 1.0), ("dcg", "log2", math.inf), ("dcg", "pbm", 1.0), ("dcg", "pbm", math.inf),
                    ("ndcg", "pbm", math.inf)]
    assert [(v.metric, v.discount, v.clip) for v in correlation_variants("log2", 1.0)] == five
    assert [(v.metric, v.discount, v.clip) for v in correlation_variants("pbm", 16.0)] == [*five, ("dcg", "pbm", 16.0)]
    # the report reduces exactly the planned (D, D0) pairs with the union of their clips: pbm at the curve's
    # clips 1, 4, Table 2's m = 1 and ∞, the chosen m = 16 (correlation and decisions); log2 at the curve's clips
    # (Table 2 across clip values) and Table 2's m = 1 and ∞
    assert [(p.discount, p.clips) for p in plan_moments(report_variants("pbm", (1.0, 4.0), 16.0))] == [
        ("pbm", (1.0, 4.0, 16.0, math.inf)), ("log2", (1.0, 4.0, math.inf))]
    root = Path(__file__).resolve().parents[1]
    from dashboard.data import analyses as dash_analyses
    from offeval_core import report

    assert "plan_moments(" in inspect.getsource(dash_analyses) and "plan_moments(" in inspect.getsource(report)
    # each of these is defined exactly once in the code base
    sources = [p for d in ("offeval_core", "dashboard") for p in (root / d).rglob("*.py")]
    for name in ("estimator_family", "plan_moments", "format_clip", "parse_clip", "clip_text", "subset"):
        defs = [p for p in sources if re.search(rf"^def {name}\(", p.read_text(), flags=re.M)]
        assert len(defs) == 1, (name, defs)


def test_missing_columns_are_typed_and_each_interface_says_how_to_map(tmp_path, capsys):
    """The core names the missing schema columns (LogValidationError.unmapped), never an interface's syntax;
    the CLI prints a --map hint from it, the dashboard a column-mapping-form hint."""
    from dashboard.ui import explain
    from offeval_core.cli import main
    from offeval_core.errors import LogValidationError

    path = tmp_path / "mine.csv"
    pd.DataFrame({"who": [1, 1], "where": [1, 2], "click": [1.0, 0.0]}).to_csv(path, index=False)
    with pytest.raises(LogValidationError) as err:
        read_logs(path)
    assert err.value.unmapped == ("session_id", "rank")
    assert all("--map" not in p for p in err.value.problems)
    assert main(["validate", str(path)]) == 2
    assert ("hint: map your column names with --map 'session_id=<your column>,rank=<your column>'"
            in capsys.readouterr().err)
    _, fix = explain(err.value)
    assert fix.startswith("Pick your file's column for 'session_id' and 'rank' in the column-mapping form below.")


def test_the_verdicts_compute_no_session_value_of_their_own():
    """One implementation of the importance-weighted session value: verdicts.py reads DCG / IPS, SNIPS and their
    capped values from the importance reduce and groups no rows by session itself (no bincount, groupby, factorize,
    np.add.at / reduceat, np.unique, pivot, and no ``["session"]`` column read). The exact values are pinned by
    tests/test_verdicts.py::test_ranking_estimators_equal_the_cores_public_estimators."""
    import ast
    from pathlib import Path

    rel = "offeval_core/verdicts.py"
    tree = ast.parse((Path(__file__).resolve().parents[1] / rel).read_text(encoding="utf-8"))
    calls = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
             for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)}
    grouping = {"bincount", "groupby", "factorize", "at", "reduceat", "unique", "pivot", "pivot_table", "crosstab"}
    assert not calls & grouping, sorted(calls & grouping)
    keys = {n.slice.value for n in ast.walk(tree)
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)}
    assert not keys & {"session", "session_id"}, keys
    assert {"reduce_importance", "estimate_from_row", "kish_ess"} <= calls
