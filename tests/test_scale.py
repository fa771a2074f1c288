"""Out-of-core reduce: Parquet read by the backend equals the in-memory path; moments files; the CLI."""

import json
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from offeval_core.cli import main
from offeval_core.discounts import learn_pbm
from offeval_core.engine import Grid, connect, pbm_from_histogram, reduce, source_from_files
from offeval_core.errors import LogValidationError
from offeval_core.estimators import aggregate, estimate_from_row, select
from offeval_core.logs import read_logs
from offeval_core.moments_io import is_moments_file, read_metadata, read_moments, write_moments
from offeval_core.simulate import preset_config, simulate

KEYS = ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip", "policy", "metric"]
STATS = ("n", "sum", "m2", "co_den", "sum_diff", "m2_diff", "co_diff_den", "den_sum", "den_m2")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = simulate(preset_config("small", n_days=2), seed=11)
    d = tmp_path_factory.mktemp("scale")
    # day-partitioned files, as a large world is written
    days = sorted(w.logs["day"].unique())
    (d / "logs").mkdir()
    for day in days:
        w.logs[w.logs["day"] == day].to_parquet(d / "logs" / f"day-{day}.parquet")
    return w, d


def test_parquet_source_equals_in_memory_logs(world):
    w, d = world
    grid = Grid(rewards=("like", "watch_time"), policies=("treatment", "cand_01"), discounts=("pbm", "log2"),
                exposures=("pbm", "exponential:0.8"), clips=(1, 4, math.inf))
    a = reduce(read_logs(w.logs), grid)
    b = reduce(source_from_files(d / "logs", connect(memory_limit="1GB", threads=2)), grid)
    assert a.offline[KEYS].astype(str).equals(b.offline[KEYS].astype(str))
    for col in STATS:
        np.testing.assert_allclose(b.offline[col].to_numpy(float), a.offline[col].to_numpy(float),
                                   rtol=1e-9, atol=1e-12, err_msg=col)
    pd.testing.assert_frame_equal(a.online.astype({"day": str}), b.online.astype({"day": str}), check_dtype=False)


def test_session_summary_by_key_hash_equals_the_one_by_keys(world, monkeypatch):
    """Sessions are summarised by the hash of their group keys; when two groups shared a hash the keys
    themselves are used. Both give the same groups, counts, length histogram and moments, and both catch a
    session whose rows disagree on their group."""
    import offeval_core.engine.sources as sources

    w, d = world
    grid = Grid(rewards=("like", "watch_time"), policies=("treatment",), clips=(1, 8, math.inf))
    by_hash = source_from_files(d / "logs", connect(threads=1))
    monkeypatch.setattr(sources, "_hash_identifies", lambda groups: False)
    by_keys = source_from_files(d / "logs", connect(threads=1))
    assert len(by_hash.groups) > 1 and int(by_hash.counts["n"].sum()) == w.logs["session_id"].nunique()
    for name in ("groups", "counts", "lengths"):
        pd.testing.assert_frame_equal(getattr(by_hash, name), getattr(by_keys, name), check_dtype=False)
    assert (by_hash.max_rank, by_hash.n_rows) == (by_keys.max_rank, by_keys.n_rows) == (w.logs["rank"].max(),
                                                                                       len(w.logs))
    a, b = reduce(by_hash, grid), reduce(by_keys, grid)
    pd.testing.assert_frame_equal(a.offline, b.offline)
    mixed = w.logs.copy()
    second = mixed["rank"] == 2
    one = mixed["session_id"] == mixed.loc[second, "session_id"].iloc[0]
    mixed.loc[one & second, "segment"] = "other"
    mixed.to_parquet(d / "mixed.parquet")
    with pytest.raises(LogValidationError) as expected:
        read_logs(d / "mixed.parquet")
    for identifies in (False, True):
        monkeypatch.setattr(sources, "_hash_identifies", lambda groups, v=identifies: v)
        with pytest.raises(LogValidationError) as info:
            source_from_files(d / "mixed.parquet")
        assert info.value.problems == expected.value.problems  # the message of read_logs, data row included
        assert "column 'segment' must be the same on every row of a session" in info.value.problems[0]


def test_pbm_from_the_length_histogram_is_learn_pbm():
    rng = np.random.default_rng(2)
    lengths = rng.integers(1, 30, 500)
    arm = np.where(rng.random(500) < 0.6, "control", "treatment")
    df = pd.DataFrame({"session_id": np.repeat(np.arange(500), lengths),
                       "rank": np.concatenate([np.arange(1, n + 1) for n in lengths]), "click": 0.0,
                       "arm": np.repeat(arm, lengths)})
    logs = read_logs(df)
    hist = pd.DataFrame({"length": lengths, "n": 1, "n_control": (arm == "control").astype(int)})
    hist = hist.groupby("length", as_index=False).sum()
    np.testing.assert_array_equal(pbm_from_histogram(hist, floor=1e-3), learn_pbm(logs, floor=1e-3))


def test_moments_file_round_trip_keeps_values_and_settings(world, tmp_path):
    w, _ = world
    logs = read_logs(w.logs)
    m = reduce(logs, Grid(rewards=("like",), policies=("treatment",), clips=(2, math.inf)))
    path = write_moments(m, tmp_path / "m.parquet", settings={"engine": "duckdb", "memory_limit": "2GB"})
    back = read_moments(path)
    pd.testing.assert_frame_equal(back.offline.astype({"day": str}), m.offline.astype({"day": str}),
                                  check_dtype=False)
    pd.testing.assert_frame_equal(back.online.astype({"day": str}), m.online.astype({"day": str}),
                                  check_dtype=False)
    assert back.grid == m.grid
    assert read_metadata(path)["settings"] == {"engine": "duckdb", "memory_limit": "2GB"}
    # written by another tool with the rows in any order (online rows first, shuffled): the same two parts
    table = pq.read_table(path)
    order = np.random.default_rng(0).permutation(table.num_rows)
    pq.write_table(table.take(order), tmp_path / "shuffled.parquet")
    other = read_moments(tmp_path / "shuffled.parquet")
    for part in ("offline", "online"):
        got, want = (getattr(x, part).astype({"day": str}) for x in (other, back))
        keys = [c for c in want.columns if not pd.api.types.is_numeric_dtype(want[c]) or c == "clip"]
        pd.testing.assert_frame_equal(got.sort_values(keys).reset_index(drop=True),
                                      want.sort_values(keys).reset_index(drop=True), check_dtype=False)
    # the paired effect read from the file equals the one from the in-memory moments
    effects = [estimate_from_row(aggregate(select(mm, reward="like", policy="treatment", metric="dcg",
                                                  clip=math.inf)).iloc[0], metric="dcg", level=0.95, diff=True)
               for mm in (m, back)]
    assert effects[1].value == pytest.approx(effects[0].value, rel=1e-12)
    assert effects[1].stderr == pytest.approx(effects[0].stderr, rel=1e-12)
    assert is_moments_file(path) and not is_moments_file(tmp_path / "nope.parquet")
    pq.write_table(pq.read_table(path).replace_schema_metadata({}), tmp_path / "plain.parquet")
    with pytest.raises(ValueError, match="not an offeval moments file"):
        read_moments(tmp_path / "plain.parquet")


def test_cli_reduce_writes_moments_with_settings(world, tmp_path, capsys, monkeypatch):
    import offeval_core.memory

    _, d = world
    out = tmp_path / "moments.parquet"
    # the process holds 1 GB when the reduce connects (a test worker's own memory varies from run to run)
    monkeypatch.setattr(offeval_core.memory, "resident_bytes", lambda: 10**9)
    code = main(["reduce", str(d / "logs"), "--out", str(out), "--memory-limit", "4GB", "--rewards", "like",
                 "--policies", "treatment", "--discounts", "pbm", "--clips", "1,16,inf"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    m = read_moments(out)
    meta = read_metadata(out)["settings"]
    assert meta["engine"] == "duckdb" and meta["memory_limit"] == "4GB" and meta["clips"] == [1.0, 16.0, "inf"]
    # the budget is the process's: DuckDB got 60 % of what the process did not hold, 0.6 · (4 − 1) GB
    assert meta["duckdb_memory_limit"] == "1800000000B"
    assert printed["sessions"] == meta["sessions"] == int(m.online["n"].sum())
    assert m.grid.clips == (1.0, 16.0, math.inf) and m.grid.policies == ("treatment",)


def test_reduce_rejects_bad_parquet(tmp_path):
    df = pd.DataFrame({"session_id": [1, 1, 2], "pos": [1, 2, 1], "click": [0.0, 1.0, -1.0]})
    df.to_parquet(tmp_path / "a.parquet")
    with pytest.raises(LogValidationError, match=r"missing required column 'rank'.*map your column to 'rank'") as err:
        source_from_files(tmp_path / "a.parquet")
    assert err.value.unmapped == ("rank",)  # the CLI turns it into a --map hint, the dashboard into a form hint
    with pytest.raises(LogValidationError) as err:
        source_from_files(tmp_path / "a.parquet", columns={"rank": "pos"})
    assert err.value.problems == ["reward column 'click' must be non-negative (DCG and nDCG assume gains ≥ 0); "
                                  "found -1 at data row 3"]
    mixed = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [0.0, 1.0, 1.0],
                          "arm": ["control", "treatment", "control"]})
    mixed.to_parquet(tmp_path / "b.parquet")
    with pytest.raises(LogValidationError, match="column 'arm' must be the same on every row of a session; "
                                                 "session 1 has 'control' and 'treatment' \\(data row 2\\)"):
        source_from_files(tmp_path / "b.parquet")
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        source_from_files(tmp_path / "missing.parquet")
