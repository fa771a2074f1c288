"""``offeval reduce --engine spark --spark-master spark://127.0.0.1:PORT`` on a standalone Spark cluster (a master
and a worker as separate processes, tests/spark_cluster_support.py) equals DuckDB on the same Parquet logs, with
executors whose Python has neither offeval nor Ibis: every step of the reduce is Spark SQL (docs/scale.md,
"the executors need only Spark itself")."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from spark_cluster_support import marked_processes, skip_reason, spark_cluster

from offeval_core.cli import main
from offeval_core.moments_io import read_moments
from offeval_core.simulate import preset_config, simulate

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark"),
              pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

OFF_KEYS = ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip", "policy", "metric"]
ON_KEYS = ["experiment_id", "day", "arm", "segment", "reward"]
VALUES = ["n", "sum", "m2", "co_den", "sum_diff", "m2_diff", "co_diff_den", "den_sum", "den_m2"]


@pytest.fixture(scope="module")
def cluster():
    with spark_cluster() as c:
        yield c
    assert not marked_processes(c.marker), "a process of the cluster outlived it"
    assert not c.root.exists()


def test_the_executors_python_lacks_offeval(cluster):
    probe = ("import importlib.util as u, sys; "
             "sys.exit(0 if all(u.find_spec(m) is None for m in ('offeval_core', 'ibis', 'pandas')) else 1)")
    env = cluster.driver_env()
    env.pop("PYTHONPATH", None)
    done = subprocess.run([cluster.executor_python, "-c", probe], cwd=cluster.root, env=env, timeout=60, check=False)
    assert done.returncode == 0


def test_standalone_cluster_reduce_equals_duckdb(cluster, tmp_path, capsys):
    logs = simulate(preset_config("small", n_days=2, n_experiments=2, effects=("positive", "negative")), seed=7).logs
    path = tmp_path / "logs.parquet"
    logs.to_parquet(path, index=False)
    # a binary reward (one sort per session for every clip value) and a graded one (a sort per binding clip)
    argv = ["--rewards", "like,watch_time", "--policies", "treatment,cand_01", "--discounts", "pbm"]
    spark_out = tmp_path / "spark.parquet"
    done = subprocess.run([sys.executable, "-m", "offeval_core.cli", "reduce", str(path), "--engine", "spark",
                           "--spark-master", cluster.master, "--out", str(spark_out), *argv],
                          env=cluster.driver_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert main(["reduce", str(path), "--out", str(tmp_path / "duck.parquet"), *argv]) == 0
    capsys.readouterr()
    settings = json.loads(pq.read_schema(spark_out).metadata[b"offeval"])["settings"]
    assert (settings["engine"], settings["spark_master"]) == ("spark", cluster.master)
    spark, duck = read_moments(spark_out), read_moments(tmp_path / "duck.parquet")
    a = duck.offline.sort_values(OFF_KEYS, kind="stable").reset_index(drop=True)
    b = spark.offline.sort_values(OFF_KEYS, kind="stable").reset_index(drop=True)
    # 16 groups × 2 rewards × 1 discount × 14 clip values × (logging + 2 policies) × 2 metrics
    assert len(a) == len(b) == 16 * 2 * 1 * 14 * 3 * 2
    assert a[OFF_KEYS].astype(str).equals(b[OFF_KEYS].astype(str))
    worst = 0.0
    for col in VALUES:
        x, y = a[col].to_numpy(float), b[col].to_numpy(float)
        assert np.array_equal(np.isnan(x), np.isnan(y)), col
        ok = ~np.isnan(x)
        scale = np.maximum(np.abs(x[ok]), np.abs(y[ok]))
        rel = np.abs(x[ok] - y[ok]) / np.where(scale > 0, scale, 1.0)
        worst = max(worst, float(rel.max(initial=0.0)))
    assert worst <= 1e-9, worst
    assert (a["sum"] > 0).any() and (a["sum_diff"].abs() > 0).any()
    on_a = duck.online.sort_values(ON_KEYS).reset_index(drop=True)
    on_b = spark.online.sort_values(ON_KEYS).reset_index(drop=True)
    assert on_a[ON_KEYS].astype(str).equals(on_b[ON_KEYS].astype(str))
    np.testing.assert_allclose(on_b[["n", "sum", "m2"]].to_numpy(float), on_a[["n", "sum", "m2"]].to_numpy(float),
                               rtol=1e-9)
    # the work ran on the cluster: the worker started an executor for the application
    apps = [p for p in (cluster.root / "work").iterdir() if p.name.startswith("app-")]
    assert len(apps) == 1 and any(apps[0].iterdir())
    print(f"standalone Spark vs DuckDB: {len(b):,} moment rows, max rel diff {worst:.2e}; Spark scan "
          f"{settings['seconds_scan']} s, reduce {settings['seconds_reduce']} s")
