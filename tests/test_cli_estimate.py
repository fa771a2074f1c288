"""``offeval estimate``: the JSON contract for the DCG family and the importance-sampling family."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from offeval_core.cli import main
from offeval_core.importance import ncis_counterexample


def run(capsys, *argv):
    code = main(["estimate", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def counter_csv(tmp_path_factory):
    df = ncis_counterexample(1000)
    df["customer"] = df["segment"].map({"registered": "REG", "unknown": "ANON"})  # a text column read_logs drops
    path = tmp_path_factory.mktemp("cli") / "counter.csv"
    df.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def ranking_csv(tmp_path_factory):
    df = pd.DataFrame({"session_id": [1, 1, 2, 2, 3], "rank": [1, 2, 1, 2, 1], "click": [0, 1, 1, 0, 1],
                       "rank__new": [2, 1, 1, 2, 1]})
    path = tmp_path_factory.mktemp("cli") / "ranking.csv"
    df.to_csv(path, index=False)
    return path


def test_ncis_json_contract_on_counterexample(capsys, counter_csv):
    code, out, _ = run(capsys, counter_csv, "--reward", "value", "--policy", "test", "--estimator", "ncis",
                       "--clip", "10", "--json")
    assert code == 0
    doc = json.loads(out)
    s = doc["settings"]
    assert (s["estimator"], s["registry_key"], s["capping"], s["clip"], s["scale"]) == ("ncis", "ncis", "max", 10.0,
                                                                                      "session")
    assert s["units"] == "reward per session" and s["weights"] == "propensity"
    (g,) = doc["groups"]
    assert g["logging"]["value"] == pytest.approx(1.9)
    assert g["target"]["value"] == pytest.approx(1.74 / 0.97)
    assert g["effect"]["value"] == pytest.approx(1.74 / 0.97 - 1.9)
    assert g["effect"]["value"] < 0  # NCIS says "worse" ...
    assert g["online"]["effect"]["value"] == pytest.approx(0.2)  # ... while the online test says better
    assert g["online"]["treatment"]["value"] == pytest.approx(2.1)
    d = g["diagnostics"]
    assert d["max_weight"] == 40.0 and d["capped_share"] == pytest.approx(0.03)  # 0.1·0.4·(40 − 10)/40 / 1
    assert set(g) == {"logging", "target", "effect", "online", "diagnostics"}


def test_piece_ncis_with_text_strata_column_and_zero_capping(capsys, counter_csv):
    code, out, _ = run(capsys, counter_csv, "--reward", "value", "--policy", "test", "--estimator", "piece-ncis",
                       "--clip", "10", "--capping", "zero", "--strata", "customer", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["settings"]["registry_key"] == "piece-ncis-zero" and doc["settings"]["strata"] == "customer"
    # within each stratum zero-capped NCIS is exact here (reward ⊥ capping given the segment): 2.1
    assert doc["groups"][0]["target"]["value"] == pytest.approx(2.1)
    assert doc["groups"][0]["effect"]["ci"][0] > 0


def test_point_ncis_per_impression_with_bootstrap(capsys, counter_csv):
    code, out, _ = run(capsys, counter_csv, "--reward", "value", "--policy", "test", "--estimator", "point-ncis",
                       "--clip", "10", "--context", "segment", "--scale", "impression", "--bootstrap", "50",
                       "--seed", "3", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["settings"]["scale"] == "impression" and doc["settings"]["units"].startswith("reward per logged "
                                                                                              "impression")
    (g,) = doc["groups"]
    assert g["target"]["value"] == pytest.approx(2.1)
    assert g["diagnostics"]["exact_normaliser_share"] == 1.0
    # one row per session here, so per impression = per session; online per impression per arm
    assert g["online"]["control"]["value"] == pytest.approx(1.9)
    assert g["online"]["effect"]["value"] == pytest.approx(0.2)
    b = doc["bootstrap"]
    assert b["n_boot"] == 50 and b["target"]["value"] == pytest.approx(2.1)
    assert b["target"]["ci"][0] <= 2.1 <= b["target"]["ci"][1]


@pytest.mark.parametrize("boot", [(), ("--bootstrap", "5", "--seed", "1")])
def test_point_ncis_says_how_many_sessions_share_their_cells_normaliser(capsys, tmp_path, boot):
    """The pooled PointNCIS contexts are counted as the estimator pools them (one-row contexts with an exact ν are
    not; see tests/test_importance_estimate.py), said once on stderr as a note with or without the bootstrap, not
    as a Python warning, and the JSON on stdout stays whole."""
    from test_importance_estimate import EXACT

    path = tmp_path / "exact.csv"
    EXACT.to_csv(path, index=False)
    code, out, err = run(capsys, path, "--reward", "click", "--policy", "t", "--estimator", "point-ncis",
                         "--context", "segment", "--clip", "10", "--json", *boot)
    assert code == 0
    assert err.splitlines() == [
        "offeval estimate: note: PointNCIS: 2 of 6 sessions are in contexts with a single logged row, where the "
        "plug-in normaliser would be the row's own capped weight (the estimate would collapse to the logging "
        "value); they share the normaliser of their (experiment, day, arm) cell instead, i.e. NCIS. Pass a context "
        "column that groups sessions (e.g. context='segment'; on the command line --context segment)."]
    (g,) = json.loads(out)["groups"]
    assert g["target"]["value"] == pytest.approx(4 / 6, rel=1e-12)
    assert g["diagnostics"]["exact_normaliser_share"] == pytest.approx(4 / 6)


def test_by_segment_groups(capsys, counter_csv):
    code, out, _ = run(capsys, counter_csv, "--reward", "value", "--policy", "test", "--estimator", "is",
                       "--by", "segment", "--json")
    assert code == 0
    groups = {g["segment"]: g for g in json.loads(out)["groups"]}
    assert groups["registered"]["target"]["value"] == pytest.approx(12.0)
    assert groups["unknown"]["target"]["value"] == pytest.approx(1.0)
    assert groups["registered"]["online"]["treatment"]["value"] == pytest.approx(12.0)


def test_text_table_states_the_scale(capsys, counter_csv):
    code, out, _ = run(capsys, counter_csv, "--reward", "value", "--policy", "test", "--estimator", "cis",
                       "--clip", "10")
    assert code == 0
    assert "values are reward per session, [99% CI]; offline on control-arm sessions" in out
    assert "capped mass 3.0%" in out


def _numbers(doc, prefix: str = "") -> dict:
    """A JSON document flattened to {path: leaf}."""
    if isinstance(doc, dict):
        return {k: v for key, item in doc.items() for k, v in _numbers(item, f"{prefix}/{key}").items()}
    if isinstance(doc, list):
        return {k: v for i, item in enumerate(doc) for k, v in _numbers(item, f"{prefix}/{i}").items()}
    return {prefix: doc}


def test_metric_alias_and_dcg_json(capsys, ranking_csv):
    code, out, _ = run(capsys, ranking_csv, "--reward", "click", "--policy", "new", "--metric", "dcg",
                       "--discount", "log2", "--exposure", "log2", "--json")
    assert code == 0
    doc = json.loads(out)
    # session 1: click at rank 2 → label log2(3), moved to rank 1: DCG = log2 3; sessions 2, 3: 1 each
    assert doc["groups"][0]["target"]["value"] == pytest.approx((math.log2(3) + 2) / 3)
    assert doc["settings"]["metric"] == "dcg" and doc["settings"]["estimator"] == "dcg"
    code2, out2, _ = run(capsys, ranking_csv, "--reward", "click", "--policy", "new", "--estimator", "dcg",
                         "--discount", "log2", "--exposure", "log2", "--json")
    assert code2 == 0
    alias, named = _numbers(json.loads(out2)["groups"]), _numbers(doc["groups"])
    # the same computation; DuckDB's parallel sums may differ in the last bit between runs (a logging stderr
    # that is 0 in exact arithmetic came out 4.5e-17 in one run)
    assert alias.keys() == named.keys()
    assert alias == {k: pytest.approx(v, rel=1e-12, abs=1e-15) if isinstance(v, float) else v
                     for k, v in named.items()}
    # the same ranking logs through importance sampling: w = D(R(i)) / D0(i), IS at c = ∞ equals DCG
    code3, out3, _ = run(capsys, ranking_csv, "--reward", "click", "--policy", "new", "--estimator", "is",
                         "--discount", "log2", "--exposure", "log2", "--json")
    assert code3 == 0
    assert json.loads(out3)["groups"][0]["target"]["value"] == pytest.approx((math.log2(3) + 2) / 3)


@pytest.mark.parametrize("argv, message", [
    (["--estimator", "ncis", "--policy", "logging"],
     "offeval estimate: error: --estimator ncis needs --policy: a target policy with a "
                              "'target_propensity__<policy>' (propensity logs) or 'rank__<policy>' (ranking logs) "
                              "column"),
    (["--estimator", "ncis", "--policy", "other"],
     "offeval estimate: error: policy 'other': the logs {path} have no column 'target_propensity__other' (target "
     "propensities found: test); importance weights π_t / π_p need the target policy's propensity on every "
     "logged row"),
    (["--metric", "ndcg", "--estimator", "ncis"],
     "offeval estimate: error: --metric ndcg and --estimator ncis disagree; give one of them"),
    (["--estimator", "piece-ncis", "--policy", "test", "--strata", "nope"],
     "offeval estimate: error: --strata 'nope' is not a column of {path}"),
    (["--estimator", "ncis", "--policy", "test", "--clip", "0.5"],
     "offeval estimate: error: clip must be ≥ 1 (1 = raw labels, inf = unclipped), got 0.5"),
])
def test_errors(capsys, counter_csv, argv, message):
    code, out, err = run(capsys, counter_csv, "--reward", "value", *argv)
    assert code == 2 and out == ""
    assert err.startswith(message.format(path=counter_csv))
