"""The background preparation computes exactly what each page computes at its default settings: after it
has run, opening a page at its defaults computes nothing heavy anew (no reduce, no analysis). If a page's
default call and the preparation's copy of it drift apart (another argument, another order), the page would
compute again behind a progress message and this test names the call."""

from __future__ import annotations

import time

import pytest
from dashboard_support import environment, open_page

from offeval_core.simulate import preset_config, write_world

PAGES = ("sensitivity", "correlation", "dcg_vs_ndcg", "decisions", "clip_tuning")
HEAVY = ("sensitivity", "offline_online_correlation", "correlation_by_clip", "dcg_vs_ndcg", "decision_boxes",
         "clip_tuning")


@pytest.fixture
def prepared(tmp_path, monkeypatch):
    """A fresh small world (its own dataset key: nothing of it is cached yet) opened once with the background
    preparation on, waited for until it has finished."""
    from dashboard.data import warmup

    write_world(preset_config("small"), tmp_path, seed=23)
    monkeypatch.setattr(warmup, "_serving", lambda: True)
    monkeypatch.setenv("OFFEVAL_PREPARE", "1")
    with environment(OFFEVAL_DEMO_DIR=str(tmp_path)):
        open_page()
        jobs = [j for j in warmup._JOBS.values() if j.running or j.done]
        assert jobs, "the preparation did not start"
        deadline = time.monotonic() + 300
        while any(j.running for j in jobs) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(j.running for j in jobs), "the preparation did not finish within 300 s"
        job = max(jobs, key=lambda j: len(j.steps))
        assert job.failed == [], job.failed
        yield job


def test_pages_at_their_defaults_read_what_the_preparation_computed(prepared, monkeypatch):
    import offeval_core.analyses as analyses
    from dashboard.data import dataset_moments
    from offeval_core.logs import Logs

    calls: list[str] = []

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            if name != "dcg_vs_ndcg" or isinstance(args[0], Logs):  # not KDD'24 Table 1's two hand-made sessions
                calls.append(name)
            return fn(*args, **kwargs)
        return wrapped

    for name in HEAVY:
        monkeypatch.setattr(analyses, name, counting(name, getattr(analyses, name)))
    monkeypatch.setattr(dataset_moments, "reduce", counting("reduce", dataset_moments.reduce))
    assert set(prepared.steps) >= {"sensitivity", "correlation", "Table 2 across clips", "DCG vs nDCG", "decisions",
                                   "clip tuning"}
    for page in PAGES:
        calls.clear()
        open_page(page)
        assert calls == [], f"{page}: computed {calls} although the preparation had run"
