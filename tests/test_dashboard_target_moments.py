"""A page of one target policy on a (D, D0) no page has used yet reduces that policy alone
(``dashboard.data.target_moments``), and reads the reduce over every policy whenever it is at hand: computed, in the
persistent moments cache, or planned by the background preparation. Either way the numbers are the same."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from dashboard_support import environment, open_page, write_small_world

from offeval_core.analyses import sensitivity
from offeval_core.estimators import subset

NEW_D = "exponential:0.8"
GROUP = ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip", "policy", "metric"]


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A small world of its own (nothing of it cached), its persistent moments cache in ``tmp_path``, and the
    reduces of the dashboard recorded by their policies."""
    from dashboard.data import dataset_moments, datasets

    out = write_small_world(tmp_path / "world")
    monkeypatch.setenv("OFFEVAL_CACHE", "1")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(datasets, "_READY", set())
    monkeypatch.setattr(dataset_moments, "_PLANNED", set())
    st.cache_resource.clear()
    st.cache_data.clear()
    reduces: list[tuple[str, ...]] = []
    real = dataset_moments.reduce

    def recording(logs, grid, **kwargs):
        reduces.append(tuple(grid.policies))
        return real(logs, grid, **kwargs)

    monkeypatch.setattr(dataset_moments, "reduce", recording)
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield f"demo:{out}", reduces
    st.cache_resource.clear()
    st.cache_data.clear()


def same_moments(one, every, policy: str) -> None:
    """The one-policy moments equal the every-policy moments' rows of that policy (and of the logging policy)."""
    want = subset(every, policies=(policy,))
    assert one.grid == want.grid
    for a, b in ((one.offline, want.offline), (one.online, want.online)):
        keys = [k for k in GROUP if k in a.columns]
        a = a.sort_values(keys).reset_index(drop=True)
        b = b.sort_values(keys).reset_index(drop=True)[a.columns]
        assert len(a) == len(b) > 0
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12, atol=1e-12)


def test_a_new_discount_reduces_the_target_policy_alone_with_the_same_moments(world):
    from dashboard import data

    key, reduces = world
    ds = data.load(key)
    assert len(ds.policies) > 2
    one = data.target_moments(key, "like", NEW_D, NEW_D, "treatment")
    assert reduces == [("treatment",)]
    assert data.moments_ready(key, "like", NEW_D, NEW_D, "treatment")
    assert not data.moments_ready(key, "like", NEW_D, NEW_D, "cand_01")
    every = data.moments(key, "like", NEW_D, NEW_D)
    assert reduces == [("treatment",), tuple(ds.policies)]
    same_moments(one, every, "treatment")
    # the reduce over every policy is at hand now: a page of another policy reads it, nothing is reduced
    assert data.target_moments(key, "like", NEW_D, NEW_D, "cand_01") is every
    assert data.target_moments(key, "like", NEW_D, NEW_D, None) is every
    assert len(reduces) == 2


def test_the_reduce_over_every_policy_is_read_when_cached_or_planned(world, monkeypatch):
    from dashboard import data
    from dashboard.data import datasets

    key, reduces = world
    ds = data.load(key)
    every = data.moments(key, "like", NEW_D, NEW_D)  # computed and stored in the persistent cache
    st.cache_resource.clear()  # a restart: the persistent cache holds it, this process does not
    monkeypatch.setattr(datasets, "_READY", set())
    reduces.clear()
    got = data.target_moments(key, "like", NEW_D, NEW_D, "treatment")
    assert reduces == []  # read from the cache, not reduced
    pd.testing.assert_frame_equal(got.offline, every.offline)

    # planned by the background preparation: the page waits for the reduce over every policy
    data.note_prepared_later(key, "like", "log2", "log2")
    data.target_moments(key, "like", "log2", "log2", "treatment")
    assert reduces == [tuple(ds.policies)]
    # neither: the target policy alone
    data.target_moments(key, "like", "exponential:0.7", "exponential:0.7", "treatment")
    assert reduces[1:] == [("treatment",)]


def test_a_policy_the_logs_lack_reads_the_reduce_over_every_policy(world):
    """(whose analysis then names the policy as unknown, as before)"""
    from dashboard import data

    key, reduces = world
    ds = data.load(key)
    got = data.target_moments(key, "like", NEW_D, NEW_D, "nobody")
    assert reduces == [tuple(ds.policies)] and got.grid.policies == tuple(ds.policies)


def test_sensitivity_on_a_new_discount_shows_the_numbers_of_the_every_policy_moments(world):
    """The page, opened by URL on a new discount, reduces the target policy alone for each reward it pools; the
    offline effects, standard errors and p-values it shows per setting equal the core's analysis of the moments over
    every policy."""
    from dashboard import data
    from offeval_core.defaults import LEVEL

    key, reduces = world
    at = open_page("sensitivity", discount=NEW_D, exposure=NEW_D)
    at.select_slider(key="w_sens_alpha").set_value(0.05).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ds = data.load(key)
    pooled = data.sensitivity_rewards(ds, ds.rewards[0], True)
    assert len(pooled) >= 2 and reduces == [("treatment",)] * len(pooled)
    shown = next(d.value for d in at.dataframe if "std. error" in d.value.columns)

    every = data.moments_many(key, [(r, NEW_D, NEW_D) for r in pooled])
    assert len(reduces) == 2 * len(pooled)
    want = sensitivity(every, policy="treatment", metrics=("dcg", "ndcg"), discount=NEW_D, exposure=NEW_D,
                       level=LEVEL, online_alpha=0.05, rewards=pooled).per_setting
    clips = {float("inf") if m == "∞" else float(m) for m in shown["m"]}  # the rows at the sidebar's clip value
    want = want[want["clip"].isin(clips)]
    assert len(clips) == 1 and len(shown) == len(want) > 0
    for column, name in (("std. error", "stderr"), ("p-value", "p_value"), ("effect", "effect")):
        got = np.sort(shown[column].astype(float).to_numpy())
        np.testing.assert_allclose(got, np.sort(want[name].to_numpy(dtype=float)), rtol=5e-3)


def test_candidates_on_a_new_discount_reduce_every_policy_once(world):
    """The Candidates page tunes a clip per candidate: one reduce over every policy serves them all, not one
    reduce per candidate."""
    from dashboard import data

    key, reduces = world
    ds = data.load(key)
    res = data.candidates_result(key, "like", NEW_D, NEW_D, 0.95, "none", "recommended", 64.0)
    assert reduces == [tuple(ds.policies)]
    assert len(res.table) == len(data.candidate_policies(key)) > 2
