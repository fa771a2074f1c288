"""The same Ibis reduce on Spark (local[2]) and DuckDB gives the same moments (issue: scale)."""

import math

import numpy as np
import pytest

from offeval_core.engine import Grid, connect, reduce, source_from_files
from offeval_core.simulate import preset_config, simulate

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

KEYS = ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip", "policy", "metric"]


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from offeval_core.engine import connect_spark

    backend = connect_spark("local[2]")
    yield backend
    backend._session.stop()


@pytest.fixture(scope="module")
def small_parquet(tmp_path_factory):
    world = simulate(preset_config("small", n_days=2, n_experiments=2, effects=("positive", "negative")), seed=5)
    path = tmp_path_factory.mktemp("spark") / "logs.parquet"
    world.logs.to_parquet(path)
    return path


def test_spark_and_duckdb_give_the_same_moments(spark, small_parquet):
    # like is binary (one sort per session serves every clip), watch_time is graded (one sort per clip)
    grid = Grid(rewards=("like", "watch_time"), policies=("treatment",), discounts=("log2",),
                exposures=("pbm",), clips=(1, 16, math.inf))
    by_engine = {}
    for name, backend in (("duckdb", connect()), ("spark", spark)):
        source = source_from_files(small_parquet, backend, rewards=["like", "watch_time"])
        by_engine[name] = reduce(source, grid)
    a, b = by_engine["duckdb"], by_engine["spark"]
    n_groups = len(a.online) // 2  # 2 rewards
    assert n_groups == 2 * 2 * 2 * 2  # experiments × days × arms × segments
    # per group: rewards × (discounts × exposures × clips) × (logging + 1 policy) × metrics
    assert len(a.offline) == len(b.offline) == n_groups * 2 * (1 * 1 * 3) * 2 * 2
    assert a.offline[KEYS].astype(str).equals(b.offline[KEYS].astype(str))
    for col in ("n", "sum", "m2", "co_den", "sum_diff", "m2_diff", "co_diff_den", "den_sum", "den_m2"):
        x, y = a.offline[col].to_numpy(float), b.offline[col].to_numpy(float)
        np.testing.assert_allclose(y, x, rtol=1e-9, atol=1e-12, err_msg=col)
    assert (a.offline["sum"] > 0).any()  # the comparison is not between two empty tables
    on_keys = ["experiment_id", "day", "arm", "segment", "reward"]
    assert a.online[on_keys].astype(str).equals(b.online[on_keys].astype(str))
    for col in ("n", "sum", "m2"):
        np.testing.assert_allclose(b.online[col].to_numpy(float), a.online[col].to_numpy(float), rtol=1e-9)


BASE = {"session_id": ["a", "a", "b", "b"], "rank": [1, 2, 1, 2], "like": [1.0, 0.0, 1.0, 1.0],
        "arm": ["control", "control", "treatment", "treatment"], "rank__new": [2, 1, 1, 2]}
SPOILED = {
    "rank 1.5": {"rank": [1, 1.5, 1, 2]},
    "duplicate (session, rank)": {"rank": [1, 1, 1, 2]},
    "arm labels no common pair names": {"arm": ["ctrl", "ctrl", "control", "control"]},
    "arm label missing": {"arm": ["control", None, "treatment", "treatment"]},
    "null session id": {"session_id": ["a", None, "b", "b"]},
    "target rank 0": {"rank__new": [0, 1, 1, 2]},
    "target rank -5": {"rank__new": [-5, 1, 1, 2]},
    "two items at target rank 1": {"rank__new": [1, 1, 1, 2]},
    "rank above the ceiling": {"rank": [1, 300_000_000, 1, 2]},
    "arm changes within a session": {"arm": ["control", "treatment", "treatment", "treatment"]},
}


def test_spark_refuses_what_read_logs_refuses_with_the_same_problems(spark, tmp_path):
    import pandas as pd

    from offeval_core.errors import LogValidationError
    from offeval_core.logs import read_logs

    for name, change in SPOILED.items():
        path = tmp_path / f"{name.replace(' ', '_')}.parquet"
        pd.DataFrame({**BASE, **change}).to_parquet(path)
        with pytest.raises(LogValidationError) as expected:
            read_logs(path)
        with pytest.raises(LogValidationError) as got:
            source_from_files(path, spark)
        assert got.value.problems == expected.value.problems, name
    # labels given with arms: a label the mapping leaves out is refused alike
    path = tmp_path / "ab.parquet"
    pd.DataFrame({**BASE, "arm": ["A", "A", "B", "B"]}).to_parquet(path)
    with pytest.raises(LogValidationError) as expected:
        read_logs(path, arms="control=B,treatment=C")
    with pytest.raises(LogValidationError) as got:
        source_from_files(path, spark, arms="control=B,treatment=C")
    assert got.value.problems == expected.value.problems
    # 'Control', a common pair (ctrl / treatment) and labels given with arms map to the arms on both engines
    for arm, arms in ((["Control", "Control", "treatment", "treatment"], None),
                      (["ctrl", "ctrl", "treatment", "treatment"], None), (["A", "A", "B", "B"], "control=A,treatment=B")):
        pd.DataFrame({**BASE, "arm": arm}).to_parquet(path)
        m = reduce(source_from_files(path, spark, arms=arms), Grid(rewards=("like",), policies=("new",),
                                                                   discounts=("log2",), exposures=("log2",), clips=(1.0,)))
        assert sorted(m.online["arm"]) == ["control", "treatment"]
        assert m.online.set_index("arm")["sum"].to_dict() == {"control": 1.0, "treatment": 2.0}


def test_spark_keeps_the_second_moments_of_rewards_offset_by_1e8(spark, tmp_path):
    """Rewards 1e8 + (0, 1, 2): Spark's var_pop / covar_pop are centred like DuckDB's, so both give the second
    moments of the values less their offset (Σx² − (Σx)²/n gave noise of the order of 1e8)."""
    import pandas as pd

    n = 300
    s = np.arange(n)
    df = pd.DataFrame({"session_id": s, "rank": 1, "like": 1e8 + s % 3, "rank__lower": 2,
                       "arm": np.where(s % 2 == 0, "control", "treatment")})
    path = tmp_path / "offset.parquet"
    df.to_parquet(path)
    grid = Grid(rewards=("like",), policies=("lower",), discounts=("log2",), exposures=("log2",), clips=(math.inf,))
    by_engine = {name: reduce(source_from_files(path, backend, rewards=["like"]), grid)
                 for name, backend in (("duckdb", connect()), ("spark", spark))}
    c = df[df["arm"] == "control"]["like"].to_numpy() - 1e8
    d2 = 1 / math.log2(3)
    want = {"m2": ((c * d2 - (c * d2).mean()) ** 2).sum(), "den_m2": ((c - c.mean()) ** 2).sum(),
            "m2_diff": (((d2 - 1) * (c - c.mean())) ** 2).sum()}
    for name, m in by_engine.items():
        off = m.offline
        row = off[(off["arm"] == "control") & (off["policy"] == "lower") & (off["metric"] == "dcg")].iloc[0]
        for col, value in want.items():
            assert row[col] == pytest.approx(value, rel=1e-6), (name, col)
        on = m.online[m.online["arm"] == "control"].iloc[0]
        assert on["m2"] == pytest.approx(((c - c.mean()) ** 2).sum(), rel=1e-6), name
