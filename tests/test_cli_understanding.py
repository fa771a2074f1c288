"""The command line says what it understood: one summary for `validate` and `dashboard --check`, guesses on
stderr, questions refused with the option that answers them, --arms on every command that reads logs, and the
default target policy never the logging policy; the numbers equal the core's on the correctly mapped data."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from offeval_core.cli import main
from offeval_core.engine import Grid, reduce
from offeval_core.estimators import summarize_groups
from offeval_core.importance import estimate
from offeval_core.logs import read_logs
from offeval_core.moments_io import read_moments
from tests.export_fixtures import demo_sample, open_bandit_like, team_export


def run(capsys, *argv):
    code = main([*map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("exports")
    demo = demo_sample(40)
    out = {}
    for key, kwargs in {"bucket": {}, "cohort": {"arm_column": "cohort"},
                        "asset01": {"item_column": "asset", "arm_column": "variant", "labels": "01"}}.items():
        export, schema = team_export(demo, **kwargs)
        export.to_csv(d / f"{key}.csv", index=False)
        out[key] = (d / f"{key}.csv", schema)
    export, schema = open_bandit_like(1500, seed=4, both=True)
    export.to_csv(d / "obd.csv", index=False)
    out["obd"] = (d / "obd.csv", schema)
    export, schema = open_bandit_like(1500, seed=5)
    export.to_csv(d / "obd_random.csv", index=False)
    out["obd_random"] = (d / "obd_random.csv", schema)
    return out


def test_validate_and_check_print_one_summary(capsys, files):
    path, _ = files["obd"]
    argv = ("--map", "arm=policy", "--arms", "control=random,treatment=bts")
    code, validate_out, validate_err = run(capsys, "validate", path, *argv)
    assert code == 0, validate_err
    code, check_out, check_err = run(capsys, "dashboard", path, *argv, "--check")
    assert code == 0, check_err
    assert check_out.replace("obd.csv", str(path), 1).strip() == validate_out.strip()
    lines = validate_out.splitlines()
    assert "  target policies:    bts (propensity); from column target_propensity__bts" in lines
    assert "  default target:     bts (no policy named treatment; the first target policy)" in lines
    assert ("  arms:               control 1,500 sessions, treatment 1,500 sessions (column policy, mapped by you; "
            "random → control, bts → treatment, labels mapped by you)") in lines
    assert "  sessions:           3,000 (no session column: each row is one session, a bandit round)" in lines
    assert ("  session length:     one position per session: each session is one logged impression (a bandit "
            "round)") in lines
    assert ("  ignored column:     user-item_affinity_0, user-item_affinity_1, … (8 columns): named like a feature or "
            "a model output, not a reward") in lines
    said = ("offeval validate: guessed sessions: no session column, so each row is one session (a bandit round with "
            "a logging propensity)")
    assert validate_err.strip() == said
    assert check_err.strip() == said.replace("validate", "dashboard")


def test_validate_on_the_team_export_says_its_guesses_on_stderr(capsys, files):
    path, schema = files["bucket"]
    code, out, err = run(capsys, "validate", path)
    assert code == 0
    assert err == ("offeval validate: guessed arm labels of column 'bucket': A → control, B → treatment (a common "
                   "pair)\n")
    arms = schema.groupby("arm")["session_id"].nunique()
    lines = out.splitlines()
    assert lines[0] == f"{path}: valid ranking logs"
    assert (f"  arms:               control {arms['control']:,} sessions, treatment {arms['treatment']:,} sessions "
            "(column bucket, guessed from its name; A → control, B → treatment, a common pair, guessed)") in lines
    assert ("  default target:     ranker_v2 (no policy named treatment; the first policy that is not the logging "
            "policy (current is))") in lines
    depth = schema.groupby("session_id")["rank"].max()  # ranks 1..n without gaps: the length is the deepest rank
    q = depth.quantile([0.1, 0.5, 0.9, 0.99]).tolist()
    assert [x for x in lines if x.startswith("  session length:")] == [
        f"  session length:     mean {depth.mean():.1f}; p10 {q[0]:g}, median {q[1]:g}, p90 {q[2]:g}, p99 {q[3]:g}"]
    assert "  rewards:            clicked, completed (named like a reward)" in lines
    assert "  items:              column video, guessed from its name" in lines


def test_an_id_column_is_shown_ignored_with_its_hint(capsys, files):
    code, out, _ = run(capsys, "validate", files["asset01"][0])
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("  ignored column:"))
    assert line.startswith("  ignored column:     asset: an identifier: no value repeats within a session (")
    assert line.endswith("— probably the item id: map it with --map item_id=asset")


def test_a_column_that_looks_like_the_arm_is_a_question(capsys, files):
    path, _ = files["cohort"]
    code, out, err = run(capsys, "validate", path)
    assert code == 2
    assert out.startswith(f"{path}: what offeval understood so far\n")
    assert ("  ignored column:     cohort: two labels, the same on every row of a session, each on about half the "
            "sessions: not a reward — probably the A/B arm: map it with --map arm=cohort --arms control=A,treatment=B"
            ) in out.splitlines()
    assert err.splitlines()[-1] == ("offeval validate: hint: if cohort is the arm, map it with --map arm=cohort "
                                    "--arms control=A,treatment=B; if not, say --arms none")
    for command in (["estimate", path, "--reward", "clicked"], ["dashboard", path, "--check"]):
        code, _, err = run(capsys, *command)
        assert code == 2 and "1 question(s) before anything is computed" in err and "--map arm=cohort" in err
    code, out, _ = run(capsys, "validate", path, "--map", "arm=cohort")
    assert code == 0 and "(column cohort, mapped by you; A → control, B → treatment, a common pair, guessed)" in out
    code, out, _ = run(capsys, "validate", path, "--arms", "none")
    assert code == 0 and "you said the file has no arm column" in out


def test_rewards_nobody_named_are_refused_with_the_option_that_names_them(capsys, tmp_path):
    df = pd.DataFrame({"session_id": [1, 1, 2, 2] * 10, "rank": [1, 2] * 20, "y1": [0, 1, 0, 0] * 10,
                       "y2": [0.0, 2.5, 0.0, 1.0] * 10})
    df["session_id"] += [i // 4 * 10 for i in range(40)]
    path = tmp_path / "plain.csv"
    df.to_csv(path, index=False)
    code, _, err = run(capsys, "validate", path)
    assert code == 2
    assert err.splitlines()[-1] == "offeval validate: hint: name the rewards with --reward y1 --reward y2"
    code, out, err = run(capsys, "validate", path, "--reward", "y2")
    assert code == 0 and "  rewards:            y2 (named as a reward by you)" in out.splitlines()
    one = tmp_path / "one.csv"
    df.drop(columns=["y2"]).to_csv(one, index=False)
    code, _, err = run(capsys, "validate", one)
    assert code == 0
    assert err == ("offeval validate: guessed rewards y1: y1 chosen by value (numeric, ≥ 0, not an identifier, rank "
                   "or feature), not by name\n")


def test_arm_labels_that_are_no_common_pair_name_the_labels_and_the_option(capsys, files, tmp_path):
    path, _ = files["bucket"]
    df = pd.read_csv(path)
    df["bucket"] = df["bucket"].map({"A": "red", "B": "blue"})
    colours = tmp_path / "colours.csv"
    df.to_csv(colours, index=False)
    code, _, err = run(capsys, "estimate", colours, "--reward", "clicked", "--map", "arm=bucket")
    assert code == 2
    assert ("  - column 'arm' (your 'bucket') has the labels 'blue', 'red': say which label is the control arm and "
            "which the treatment arm") in err.splitlines()
    assert err.splitlines()[-1] == ("offeval estimate: hint: say which label is which arm with --arms "
                                    "control=<label>,treatment=<label> (or --arms none when the column is not the arm)")
    code, out, err = run(capsys, "estimate", colours, "--reward", "clicked", "--map", "arm=bucket", "--arms",
                         "control=red,treatment=blue", "--json")
    assert code == 0, err
    _, ab, _ = run(capsys, "estimate", path, "--reward", "clicked", "--json")
    # the same numbers as the A/B file's, to the last bits a parallel aggregation may order differently
    got, want = (_leaves(json.loads(text)["groups"]) for text in (out, ab))
    assert [k for k, _ in got] == [k for k, _ in want]
    for (key, a), (_, b) in zip(got, want, strict=True):
        assert a == (pytest.approx(b, rel=1e-12, nan_ok=True) if isinstance(b, float) else b), key


def _leaves(doc, path=""):
    """(path, value) of every leaf of a JSON document, in order."""
    if isinstance(doc, dict):
        return [leaf for k, v in doc.items() for leaf in _leaves(v, f"{path}.{k}")]
    if isinstance(doc, list):
        return [leaf for i, v in enumerate(doc) for leaf in _leaves(v, f"{path}[{i}]")]
    return [(path, doc)]


def test_estimate_defaults_to_the_tested_policy_and_matches_the_core(capsys, files):
    path, schema = files["bucket"]
    code, out, err = run(capsys, "estimate", path, "--reward", "clicked", "--clip", "64", "--by", "test", "--json")
    assert code == 0
    assert ("offeval estimate: target policy ranker_v2 (no policy named treatment; the first policy that is not the "
            "logging policy (current is)); --policy chooses another") in err.splitlines()
    doc = json.loads(out)
    assert doc["settings"]["policy"] == "ranker_v2" and doc["settings"]["by"] == ["test"]
    ref = read_logs(schema)
    m = reduce(ref, Grid(rewards=("clicked",), policies=("ranker_v2",), clips=(64.0,)))
    want = summarize_groups(m, reward="clicked", policy="ranker_v2", clip=64.0, by=["experiment_id"], level=0.99)
    assert [g["effect"]["value"] for g in doc["groups"]] == pytest.approx([w.effect.value for w in want], rel=1e-12)
    assert [g["online"]["effect"]["value"] for g in doc["groups"]] == pytest.approx(
        [w.online.effect.value for w in want], rel=1e-12)
    assert [g["target"]["ci"][0] for g in doc["groups"]] == pytest.approx([w.target.ci.low for w in want], rel=1e-12)


def test_estimate_on_open_bandit_shaped_campaigns_matches_the_core(capsys, files):
    path, schema = files["obd"]
    code, out, err = run(capsys, "estimate", path, "--reward", "click", "--estimator", "is", "--scale", "impression",
                         "--map", "arm=policy", "--arms", "control=random,treatment=bts", "--json")
    assert code == 0, err
    assert "offeval estimate: target policy bts (no policy named treatment; the first target policy)" in err
    (g,) = json.loads(out)["groups"]
    want = estimate(read_logs(schema), reward="click", policy="bts", estimator="is", scale="impression", level=0.99)
    assert g["target"]["value"] == pytest.approx(want.target.value, rel=1e-12)
    assert g["target"]["ci"] == pytest.approx([want.target.ci.low, want.target.ci.high], rel=1e-12)
    # the online CTR of the bts campaign: its clicks over its rounds
    bts = schema[schema["arm"] == "treatment"]
    assert g["online"]["treatment"]["value"] == pytest.approx(bts["click"].mean(), rel=1e-12)


def test_a_single_campaign_has_no_target_and_estimate_says_what_it_needs(capsys, files):
    path, _ = files["obd_random"]
    code, out, _ = run(capsys, "validate", path)
    assert code == 0 and "  default target:     none (only the logging policy)" in out.splitlines()
    code, _, err = run(capsys, "estimate", path, "--reward", "click", "--estimator", "is")
    assert code == 2 and "--estimator is needs --policy" in err


def test_reduce_maps_the_arm_labels_like_read_logs(capsys, files, tmp_path):
    _, schema = files["bucket"]
    parquet = tmp_path / "ab.parquet"
    schema.assign(arm=schema["arm"].map({"control": "A", "treatment": "B"})).to_parquet(parquet)
    out = tmp_path / "m.parquet"
    code, _, err = run(capsys, "reduce", parquet, "--out", out, "--rewards", "clicked", "--policies", "ranker_v2",
                       "--discounts", "log2", "--exposures", "log2", "--clips", "1,inf")
    assert code == 0, err
    got = read_moments(out)
    want = reduce(read_logs(schema), Grid(rewards=("clicked",), policies=("ranker_v2",), discounts=("log2",),
                                          exposures=("log2",), clips=(1.0, float("inf"))))
    a = summarize_groups(got, reward="clicked", policy="ranker_v2", discount="log2", exposure="log2", clip=1.0)
    b = summarize_groups(want, reward="clicked", policy="ranker_v2", discount="log2", exposure="log2", clip=1.0)
    assert a[0].effect.value == pytest.approx(b[0].effect.value, rel=1e-12)
    assert a[0].online.effect.value == pytest.approx(b[0].online.effect.value, rel=1e-12)
    code, _, err = run(capsys, "reduce", parquet, "--out", tmp_path / "m2.parquet", "--arms", "control=B,treatment=C")
    assert code == 2 and "column 'arm' has labels the arm mapping (B → control, C → treatment) does not name" in err


def test_reduce_with_arms_given_gives_the_moments_of_read_logs(capsys, tmp_path):
    """A team's export as Parquet, its arm labels X / Y (no common pair: only --arms maps them), reduced with
    --arms and no --rewards: the reduce reads the columns as read_logs does (rewards clicked and completed, the
    item-id column left out as an identifier) and its moments equal read_logs → reduce on the same file."""
    export, _ = team_export(demo_sample(40))
    export["bucket"] = export["bucket"].map({"A": "X", "B": "Y"})
    parquet = tmp_path / "team.parquet"
    export.to_parquet(parquet, index=False)
    mapping = "session_id=visit,rank=pos,day=date,experiment_id=test,arm=bucket,segment=user_type,rank__*=pos_*"
    grid = ("--discounts", "log2", "--exposures", "log2", "--clips", "1,inf")
    code, _, err = run(capsys, "reduce", parquet, "--out", tmp_path / "m0.parquet", "--map", mapping, *grid)
    assert code == 2 and "column 'arm' (your 'bucket') has the labels 'X', 'Y': say which label is the control" in err
    code, _, err = run(capsys, "reduce", parquet, "--out", tmp_path / "m.parquet", "--map", mapping, *grid,
                       "--arms", "control=X,treatment=Y")
    assert code == 0, err
    got = read_moments(tmp_path / "m.parquet")
    logs = read_logs(parquet, columns=dict(p.split("=") for p in mapping.split(",")), arms="control=X,treatment=Y")
    assert logs.rewards == got.grid.rewards == ("clicked", "completed")
    assert logs.reading.of("video").role == "ignored"
    want = reduce(logs, Grid(rewards=logs.rewards, policies=logs.policies, discounts=("log2",), exposures=("log2",),
                             clips=(1.0, float("inf"))))
    assert got.grid.policies == want.grid.policies == ("current", "ranker_v2", "ranker_v3")
    on_got, on_want = (m.online.astype({"arm": str}) for m in (got, want))
    assert set(on_got["arm"]) == {"control", "treatment"}
    keys = ["experiment_id", "day", "arm", "segment", "reward"]
    a, b = (o.assign(day=o["day"].astype(str)).sort_values(keys).reset_index(drop=True) for o in (on_got, on_want))
    assert a[keys].astype(str).equals(b[keys].astype(str))
    assert a["n"].tolist() == b["n"].tolist()
    assert a["sum"].to_numpy() == pytest.approx(b["sum"].to_numpy(), rel=1e-12)
    for r in logs.rewards:
        for p in ("ranker_v2", "logging"):
            x, y = (summarize_groups(m, reward=r, policy=p, discount="log2", exposure="log2", clip=1.0,
                                     by=("experiment_id",)) for m in (got, want))
            assert len(x) == len(y) == 20  # the 20 A/B tests
            for gx, gy in zip(x, y, strict=True):
                assert gx.keys == gy.keys
                assert gx.target.value == pytest.approx(gy.target.value, rel=1e-12)
                assert gx.target.stderr == pytest.approx(gy.target.stderr, rel=1e-9)
                assert gx.online.effect.value == pytest.approx(gy.online.effect.value, rel=1e-12, abs=1e-15)


def test_reduce_asks_what_validate_asks(capsys, tmp_path):
    """reduce reads the columns as validate does: two numeric columns, neither named like a reward, are a question
    answered with --reward (as the hint says); an unmapped column that splits the sessions into A / B is the arm
    question; an id column is never a reward."""
    n = 50
    df = pd.DataFrame({"session_id": [s for s in range(n) for _ in range(4)], "rank": [1, 2, 3, 4] * n,
                       "a": [float((s * 7 + r) % 2) for s in range(n) for r in range(4)],
                       "b": [float((s + r) % 3) for s in range(n) for r in range(4)]})
    df.to_parquet(tmp_path / "amb.parquet", index=False)
    for command in ("validate", "reduce"):
        code, _, err = run(capsys, command, tmp_path / "amb.parquet", *(("--out", tmp_path / "m.parquet")
                                                                          if command == "reduce" else ()))
        assert code == 2
        assert ("which columns are rewards? none is named like one (click, like, purchase, watch…) and 2 numeric "
                "columns could be: a, b") in err
        assert f"offeval {command}: hint: name the rewards with --reward a --reward b" in err
    code, _, err = run(capsys, "reduce", tmp_path / "amb.parquet", "--out", tmp_path / "m.parquet", "--reward", "a",
                       "--reward", "b", "--clips", "1")
    assert code == 0, err
    assert read_moments(tmp_path / "m.parquet").grid.rewards == ("a", "b")
    arm = df.drop(columns="b").rename(columns={"a": "click"}).assign(
        bucket=["A" if s % 2 else "B" for s in range(n) for _ in range(4)], user_id=range(4 * n))
    arm.to_parquet(tmp_path / "arm.parquet", index=False)
    code, _, err = run(capsys, "reduce", tmp_path / "arm.parquet", "--out", tmp_path / "m2.parquet")
    assert code == 2
    assert "column 'bucket' looks like the A/B arm (labels 'A' and 'B'" in err
    assert "hint: if bucket is the arm, map it with --map arm=bucket --arms control=A,treatment=B" in err
    code, _, err = run(capsys, "reduce", tmp_path / "arm.parquet", "--out", tmp_path / "m2.parquet", "--map",
                       "arm=bucket", "--clips", "1")
    assert code == 0 and "offeval reduce: guessed arm labels of column 'bucket': A → control, B → treatment" in err
    m = read_moments(tmp_path / "m2.parquet")
    assert m.grid.rewards == ("click",)  # user_id, a different whole number on every row, is not a reward
    on = m.online.set_index("arm")
    assert on["n"].to_dict() == {"control": n // 2, "treatment": n // 2}
    assert on["sum"].to_dict() == pytest.approx({a: float(arm.loc[arm["bucket"] == label, "click"].sum())
                                                 for a, label in (("control", "A"), ("treatment", "B"))})
