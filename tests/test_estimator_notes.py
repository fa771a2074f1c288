"""Estimator notes reach the user: ``errors.estimator_notes`` collects the EstimatorWarnings of a block (per thread),
``dashboard.data.notes.keeps_notes`` stores them with a cached result and says them again at every call, and a
page shows them under the numbers they qualify (AppTest on an export whose reward has a large common offset, the
shape of an id or a timestamp taken as a reward)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from dashboard_support import open_page, upload

from dashboard.data.notes import Noted, keeps_notes
from offeval_core import stats
from offeval_core.errors import EstimatorWarning, estimator_notes, warn_estimator

PRECISION = "the delta-method standard error of a ratio is below the precision of its moments"


def _cancelling_ratio():
    """Σx / Σy on x = 2y exactly (y = 1, 2, 3): Var(x − R y) = 0 while its terms are not, the rule's warning."""
    return stats.ratio_estimate(3, 12.0, 8.0, 6.0, 2.0, 4.0, level=0.95)


def test_the_block_collects_instead_of_warning():
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        with estimator_notes() as notes:
            e = _cancelling_ratio()
    assert e.value == 2.0 and np.isnan(e.stderr)
    assert len(notes) == 1 and notes[0].startswith(PRECISION)
    assert raised == []
    with pytest.warns(EstimatorWarning, match=PRECISION):  # outside a block: a warning, as before
        _cancelling_ratio()


def test_blocks_nest_and_threads_keep_their_own():
    with estimator_notes() as outer:
        warn_estimator("outer 1")
        with estimator_notes() as inner:
            warn_estimator("inner")
        warn_estimator("outer 2")
        other: list[list[str]] = []

        def elsewhere():
            with estimator_notes() as mine:
                warn_estimator("thread")
            other.append(mine)

        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
    assert inner == ["inner"]
    assert outer == ["outer 1", "outer 2"]
    assert other == [["thread"]]


def test_a_cached_result_says_its_notes_at_every_call():
    calls = []

    @keeps_notes(st.cache_data(show_spinner=False))
    def ratio(n: int):
        calls.append(n)
        warn_estimator(f"note of {n}")
        warn_estimator(f"note of {n}")  # said twice: kept once
        return n * 2

    ratio.clear()
    for _ in range(3):
        with estimator_notes() as notes:
            assert ratio(4) == 8
        assert notes == ["note of 4"]
    assert calls == [4]                               # computed once, noted three times
    with pytest.warns(EstimatorWarning, match="note of 4"):
        assert ratio(4) == 8                          # no block: a warning
    with estimator_notes() as notes:
        assert ratio(5) == 10
    assert notes == ["note of 5"] and calls == [4, 5]


def test_a_result_computed_in_another_thread_brings_its_notes():
    """The background preparation fills the cache in its own thread: the page's call still gets the note."""

    @keeps_notes(st.cache_resource(show_spinner=False))
    def estimate(n: int):
        return _cancelling_ratio().value * n

    estimate.clear()
    t = threading.Thread(target=estimate, args=(3,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t.start()
        t.join()
    with estimator_notes() as notes:
        assert estimate(3) == 6.0
    assert len(notes) == 1 and notes[0].startswith(PRECISION)
    assert Noted(1, ()) == Noted(1, ())


def _offset_export(n: int = 400, offset: float = 1e8) -> pd.DataFrame:
    """A propensity export whose reward has a large common offset (milliseconds since some origin): SNIPS's
    per-session ratios agree to 1e-6, so its delta-method SE is below the moments' precision."""
    rng = np.random.default_rng(3)
    lp = rng.uniform(0.1, 1.0, n)
    return pd.DataFrame({"session_id": np.arange(n) // 2, "rank": np.arange(n) % 2 + 1,
                         "watch_ms": offset + rng.integers(0, 1000, n),
                         "logging_propensity": lp,
                         "target_propensity__new": np.clip(lp * rng.uniform(0.5, 1.5, n), 0.05, 1.0)})


def test_the_page_says_why_a_standard_error_is_undefined_also_from_the_cache():
    at = open_page("data")
    upload(at, _offset_export(), "export.csv", confirm=True)
    for _ in range(2):  # the second run reads every result from the cache
        at.switch_page("views/clip_tuning.py").run()
        assert not at.exception
        said = [w.value for w in at.warning if PRECISION in w.value]
        assert len(said) == 1 and said[0].startswith("**Clip tuning:**")
    at = open_page("data")
    upload(at, _offset_export(offset=0.0), "export.csv", confirm=True)
    at.switch_page("views/clip_tuning.py").run()
    assert not at.exception
    assert not [w.value for w in at.warning if PRECISION in w.value]
