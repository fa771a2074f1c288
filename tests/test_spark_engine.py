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
