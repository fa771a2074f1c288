"""The dashboard reads the persistent moments cache first: after ``python -m dashboard.prefill`` (``make data``) a
new process (nothing in memory) serves the pages' default moments without a reduce and without the engine's
preparation, with the moments a fresh reduce gives, and its logs without validating them again (the validated logs
are in the cache too)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from offeval_core import logs as logs_module
from offeval_core.engine import Grid, reduce, sources
from offeval_core.logs import read_logs
from offeval_core.simulate import preset_config, write_world


def test_a_filled_cache_serves_the_default_moments_without_computing(tmp_path, monkeypatch):
    from dashboard import data
    from dashboard.data import dataset_moments
    from dashboard.prefill import prefill

    real_validate = logs_module.validate
    real_connect = sources.connect  # DuckDB on one thread: its reduce then repeats itself bit for bit
    monkeypatch.setattr(sources, "connect", lambda **kw: real_connect(**(kw | {"threads": 1})))
    demo = tmp_path / "demo"
    write_world(preset_config("small"), demo, seed=3)
    monkeypatch.setenv("OFFEVAL_CACHE", "1")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    done = prefill(demo)
    assert done[-1].endswith("(log2)") and all(d.startswith("moments of ") for d in done)
    assert len(list((tmp_path / "cache").glob("*.moments.parquet"))) == len(done)
    assert len(list((tmp_path / "cache" / "logs").iterdir())) == 1  # the demo's validated logs

    st.cache_resource.clear()  # a restart: nothing in memory, only the cache on disk

    def refuse(*args, **kwargs):
        raise AssertionError("computed although the moments are in the cache")

    monkeypatch.setattr(dataset_moments, "reduce", refuse)
    monkeypatch.setattr(dataset_moments, "engine_ready", refuse)
    monkeypatch.setattr(logs_module, "validate", refuse)  # the logs too: read from the cache, not validated again
    ds = data.load(f"demo:{demo}")
    monkeypatch.setattr(logs_module, "validate", real_validate)
    rewards = [r for r in ds.rewards if ds.reward_rates[r] > 0]
    logs = read_logs(demo / "logs.parquet")
    for r, d in [*((r, "pbm") for r in rewards), (rewards[0], "log2")]:
        got = data.moments(ds.key, r, d, d)
        fresh = reduce(logs, Grid(rewards=(r,), policies=logs.policies, discounts=(d,), exposures=(d,)), cache=None)
        assert got.source == ds.logs.source
        for a, b in ((got.offline, fresh.offline), (got.online, fresh.online)):  # every column, to the last bit
            pd.testing.assert_frame_equal(a, b, check_exact=True)
            for c in a.columns:
                if a[c].dtype.kind == "f":
                    assert a[c].to_numpy().tobytes() == b[c].to_numpy().tobytes(), c

    # a combination not in the cache is computed (with the engine's preparation) and stored
    monkeypatch.undo()
    monkeypatch.setenv("OFFEVAL_CACHE", "1")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    data.moments(ds.key, rewards[0], "exponential:0.7", "pbm")
    assert len(list((tmp_path / "cache").glob("*.moments.parquet"))) == len(done) + 1


def test_with_the_cache_off_nothing_is_written(tmp_path, monkeypatch):
    from dashboard import data

    demo = tmp_path / "demo"
    write_world(preset_config("small"), demo, seed=4)
    monkeypatch.setenv("OFFEVAL_CACHE", "0")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_resource.clear()
    ds = data.load(f"demo:{demo}")
    data.moments(ds.key, ds.rewards[0], "pbm", "pbm")
    assert not (tmp_path / "cache").exists()


def test_prefetch_at_server_start_reads_only_what_the_cache_holds(tmp_path, monkeypatch, caplog):
    """``dashboard.serve.preload`` calls ``warmup.prefetch`` with the default dataset: it loads the dataset, reads
    the default moments (D = D0 = pbm) of exactly the rewards the persistent cache holds into the pages' caches,
    computes nothing itself but the default settings' recommended clip from the default reward's moments when it
    read them, and starts the background preparation with the pages' default reward and policy (which computes the
    rest, pausing while pages run); a dataset that fails to load leaves it to the page."""
    from dashboard import data
    from dashboard.data import dataset_moments, datasets, warmup

    demo = tmp_path / "demo"
    write_world(preset_config("small"), demo, seed=5)
    monkeypatch.setenv("OFFEVAL_CACHE", "1")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    key = f"demo:{demo}"
    st.cache_resource.clear()

    def refuse(*args, **kwargs):
        raise AssertionError("computed by the prefetch")

    real_reduce = dataset_moments.reduce
    monkeypatch.setattr(dataset_moments, "reduce", refuse)
    started = []
    monkeypatch.setattr(warmup, "warm_up", lambda ds, **kw: started.append((ds.key, kw)))
    assert warmup.prefetch(key) == []  # an empty cache: the dataset loaded, no moments computed here
    assert not list((tmp_path / "cache").glob("*.moments.parquet"))
    ds = data.load(key)
    default = (key, {"reward": warmup.default_reward(ds), "policy": ds.targets.default})
    assert started == [default]  # the preparation computes them in the background, from the server's start

    monkeypatch.setattr(dataset_moments, "reduce", real_reduce)
    first, second = ds.rewards[0], ds.rewards[1]
    expected = data.moments(key, second, "pbm", "pbm")  # computed once and stored
    data.moments(key, first, "log2", "log2")  # stored, but not a default (pbm) moment
    assert len(list((tmp_path / "cache").glob("*.moments.parquet"))) == 2

    st.cache_resource.clear()  # a restart
    monkeypatch.setattr(dataset_moments, "reduce", refuse)
    started.clear()
    assert warmup.prefetch(key) == [second]
    assert started == [default]  # the rewards the cache lacks: computed by the preparation, not by the prefetch
    from dashboard.data import analyses
    from dashboard.data.page_defaults import recommendation_args
    from dashboard.state import DEFAULTS

    args = recommendation_args(ds, default[1]["reward"], ds.targets.default, DEFAULTS.discount, DEFAULTS.exposure,
                               DEFAULTS.level)
    assert default[1]["reward"] == first and not datasets.is_ready("clip recommendation", *args)  # not read: left
    real_cached = dataset_moments.cached
    monkeypatch.setattr(dataset_moments, "cached", refuse)  # in memory now: the page reads neither disk nor engine
    got = data.moments(ds.key, second, "pbm", "pbm")
    pd.testing.assert_frame_equal(got.offline, expected.offline, check_exact=True)

    # every reward's default moments cached (an earlier server prepared them): the preparation starts at once, with
    # the pages' default reward and policy
    monkeypatch.setattr(dataset_moments, "cached", real_cached)
    monkeypatch.setattr(dataset_moments, "reduce", real_reduce)
    for r in ds.rewards:
        data.moments(key, r, "pbm", "pbm")
    st.cache_resource.clear()
    monkeypatch.setattr(dataset_moments, "reduce", refuse)
    started.clear()
    st.cache_data.clear()
    assert warmup.prefetch(key) == list(ds.rewards)
    assert started == [default]
    assert datasets.is_ready("clip recommendation", *args)  # the sidebar's recommendation, from the moments read
    import offeval_core.analyses as core_analyses

    real_tuning = core_analyses.clip_tuning
    monkeypatch.setattr(core_analyses, "clip_tuning", refuse)  # a page asking for it now reads the cache
    got_rec = analyses.clip_recommendation(*args)
    monkeypatch.setattr(core_analyses, "clip_tuning", real_tuning)
    st.cache_data.clear()
    assert got_rec == analyses.clip_recommendation(*args)  # what a page computing it itself finds
    monkeypatch.setattr(analyses, "clip_recommendation", refuse)  # a recommendation that fails: the rest goes on
    st.cache_resource.clear()
    started.clear()
    with caplog.at_level("INFO", logger="dashboard.data.warmup"):
        assert warmup.prefetch(key) == list(ds.rewards)
    assert started == [default] and "no prefetched recommendation" in caplog.text
    monkeypatch.setenv("OFFEVAL_CACHE", "0")  # no persistent cache: nothing to read, the preparation still starts
    started.clear()
    assert warmup.prefetch(key) == [] and started == [default]

    with caplog.at_level("INFO", logger="dashboard.data.warmup"):
        assert warmup.prefetch("served:0000") == []
    assert "no prefetch of served:0000" in caplog.text
