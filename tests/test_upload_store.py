"""Uploads survive other sessions' uploads: the parsed copy is cached a few at a time, the bytes are kept in a
size-bounded store shared by the server's sessions and read again when the parsed copy was pushed out; an upload
pushed out of the store too is reported on the page ("upload it again"), never as a traceback.

Found by ten concurrent browser sessions uploading one file each (tests/test_browser_security.py): the third
session's Data page failed with an uncaught LookupError once seven later uploads had pushed its file out."""

from __future__ import annotations

import pytest
from dashboard_support import environment, open_page, upload, write_small_world
from security_support import small_logs

from dashboard.data.upload_store import UploadStore


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = write_small_world(tmp_path_factory.mktemp("demo"))
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield out


def test_the_store_keeps_the_most_recently_used_bytes_within_its_limit():
    s = UploadStore(limit=10)
    s.put("a", b"aaaa")
    s.put("b", b"bbbb")
    assert s.get("a") == b"aaaa"  # a is now the most recent
    s.put("c", b"cc")  # 4 + 4 + 2 = 10: everything fits (the limit is inclusive)
    assert s.keys() == ["b", "a", "c"]
    s.put("d", b"d")  # 11 > 10: the least recently used (b) goes, a stays
    assert s.keys() == ["a", "c", "d"] and s.get("b") is None
    s.put("e", b"e" * 11)  # larger than the whole store: not kept, and nothing else is dropped for it
    assert s.keys() == ["a", "c", "d"] and s.get("e") is None
    s.put("a", b"A")  # a new value for a key replaces the old one and counts once
    assert s.get("a") == b"A" and sum(len(s.get(k)) for k in s.keys()) == 4


def _report(at) -> list[str]:
    return [h.value for h in at.subheader if h.value.startswith("Validation report")]


def test_an_upload_pushed_out_of_the_caches_is_read_again_from_the_store(world):
    from dashboard import data
    from dashboard.data import datasets

    at = upload(open_page("data", timeout=300), small_logs(n_sessions=60, seed=4), "mine.csv", guess=True)
    assert _report(at) == ["Validation report — uploaded file mine.csv"]
    sessions = at.metric[0].value
    data.upload_raw.clear()  # other sessions' uploads pushed the parsed copies out
    datasets._read_upload.clear()
    at.switch_page("views/decisions.py").run()
    at.switch_page("views/data.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert _report(at) == ["Validation report — uploaded file mine.csv"] and at.metric[0].value == sessions


def test_an_upload_pushed_out_of_the_store_asks_to_upload_again(world):
    from dashboard import data
    from dashboard.data import datasets
    from dashboard.data.upload_store import store

    at = upload(open_page("data", timeout=300), small_logs(n_sessions=60, seed=5), "gone.csv", guess=True)
    assert _report(at) == ["Validation report — uploaded file gone.csv"]
    data.upload_raw.clear()
    datasets._read_upload.clear()
    for key in store.keys():  # and more than the store's limit of other uploads came after it
        store.put(key, b"x" * (store.limit + 1))
    for view in ("data", "decisions", "clip_tuning"):
        at.switch_page(f"views/{view}.py").run()
        assert not at.exception, (view, [e.value for e in at.exception])
        assert any("no longer in memory; upload it again" in e.value for e in at.error), \
            (view, [e.value for e in at.error])
