"""The persistent cache of validated logs (offeval_core.logs_cache): a second read of the same bytes with the same
options returns what validation returned the first time (frames to the last bit, dtypes, the reading) without
validating again; any change of the bytes, the options, the name, the limits or the code misses; logs that fail
validation or ask a question are never stored; a spoilt or hostile entry is refused, removed and the file read
again; ``OFFEVAL_CACHE=0`` writes nothing."""

from __future__ import annotations

import json
import math
import os
import zipfile

import numpy as np
import pandas as pd
import pytest
from export_fixtures import demo_sample, open_bandit_like, team_export
from test_moments_cache import small_logs

from offeval_core import file_cache, logs_cache
from offeval_core import logs as logs_module
from offeval_core.errors import LogValidationError, NeedsAnswers
from offeval_core.fingerprint import logs_fingerprint
from offeval_core.limits import Limits
from offeval_core.logs import read_logs
from offeval_core.logs_cache import LogsCache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """The environment's cache on, in a fresh directory (the suite turns it off)."""
    monkeypatch.setenv("OFFEVAL_CACHE", "1")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "logs"


@pytest.fixture
def validations(monkeypatch) -> list:
    """Count the validations read_logs runs."""
    calls = []
    real = logs_module.validate

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(logs_module, "validate", counted)
    return calls


def assert_same_logs(a, b) -> None:
    for x, y in ((a.frame, b.frame), (a.sessions, b.sessions)):
        assert x.dtypes.to_dict() == y.dtypes.to_dict()
        pd.testing.assert_frame_equal(x, y, check_exact=True)
        for c in x.columns:
            if x[c].dtype.kind == "f":
                assert x[c].to_numpy().tobytes() == y[c].to_numpy().tobytes(), c
    assert (a.rewards, a.policies, a.source, a.notes) == (b.rewards, b.policies, b.source, b.notes)
    assert dict(a.columns) == dict(b.columns)
    assert a.reading == b.reading


def _files(tmp_path):
    """(path, read_logs options) of files shaped like real exports."""
    small = tmp_path / "small.parquet"
    small_logs().to_parquet(small, index=False)
    team = tmp_path / "team.csv"
    team_export(demo_sample(every=400), labels="01")[0].to_csv(team, index=False)
    obd = tmp_path / "obd.csv"
    open_bandit_like(600, seed=1)[0].to_csv(obd, index=False)
    obd2 = tmp_path / "obd2.csv"
    open_bandit_like(500, seed=2, both=True)[0].to_csv(obd2, index=False)
    return [(small, {}), (team, {"guess": True, "name": "team.csv"}), (obd, {"guess": True}),
            (obd2, {"guess": True, "columns": {"arm": "policy"}, "arms": "control=random,treatment=bts"})]


def test_a_second_read_is_the_first_validation_without_validating(tmp_path, cache_dir, validations):
    for path, options in _files(tmp_path):
        fresh = read_logs(path, **options)
        n = len(validations)
        again = read_logs(path, **options)
        assert len(validations) == n  # nothing validated …
        assert again is not fresh
        assert_same_logs(again, fresh)  # … and the same logs: frames to the last bit, reading, names
        assert logs_fingerprint(again) == logs_fingerprint(fresh)  # the moments cache's key too
    assert len(list(cache_dir.iterdir())) == 4
    assert oct(cache_dir.stat().st_mode & 0o777) == "0o700"


def test_the_reading_survives_with_its_guesses_and_arm_labels(tmp_path, cache_dir):
    path, options = _files(tmp_path)[1]
    fresh = read_logs(path, **options)
    again = read_logs(path, **options)
    assert again.reading.arm_values.describe() == "0 → control, 1 → treatment"
    assert again.reading.guesses == fresh.reading.guesses and again.reading.guesses
    assert again.columns["item_id"] == "video" and again.policies == ("current", "ranker_v2", "ranker_v3")


def test_every_part_of_the_key_misses_when_changed(tmp_path, cache_dir, validations, monkeypatch):
    path = tmp_path / "small.parquet"
    small_logs().to_parquet(path, index=False)
    read_logs(path)
    for options in ({"guess": True}, {"rewards": ["click"]}, {"name": "another name"}, {"columns": {"rank": "rank"}},
                    {"ask": "never"}, {"limits": Limits(max_rows=10_000)}):
        n = len(validations)
        read_logs(path, **options)
        assert len(validations) == n + 1, options
    assert len(list(cache_dir.iterdir())) == 7
    n = len(validations)
    small_logs(seed=4).to_parquet(path, index=False)  # other bytes
    read_logs(path)
    monkeypatch.setattr(file_cache, "_CODE", ["an edited offeval_core"])  # an edit of the sources
    read_logs(path)
    assert len(validations) == n + 2 and len(list(cache_dir.iterdir())) == 9


def test_the_key_covers_each_part():
    base = {"digest": "ab", "options": {"guess": False}, "name": "x", "limits": Limits()}

    def key(**change):
        kw = base | change
        return logs_cache.logs_cache_key(kw["digest"], kw["options"], name=kw["name"], limits=kw["limits"])

    keys = {key(), key(digest="ac"), key(options={"guess": True}), key(name="y"),
            key(limits=Limits(max_rank=99))}
    assert len(keys) == 5 and all(len(k) == 64 and set(k) <= set("0123456789abcdef") for k in keys)


def test_logs_that_fail_or_ask_are_never_stored(tmp_path, cache_dir):
    bad = small_logs()
    bad.loc[3, "click"] = np.nan
    path = tmp_path / "bad.parquet"
    bad.to_parquet(path, index=False)
    for _ in range(2):  # the second read finds nothing and reports the same problem
        with pytest.raises(LogValidationError, match="NaN"):
            read_logs(path)
    ask = tmp_path / "ask.csv"
    open_bandit_like(300, seed=2, both=True)[0].to_csv(ask, index=False)
    with pytest.raises(NeedsAnswers):
        read_logs(ask, guess=True, ask="ambiguous")
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def test_a_frame_is_never_stored(cache_dir):
    read_logs(small_logs())
    assert not cache_dir.exists()


def test_the_cache_off_writes_nothing(tmp_path, cache_dir, monkeypatch, validations):
    monkeypatch.setenv("OFFEVAL_CACHE", "0")
    path = tmp_path / "small.parquet"
    small_logs().to_parquet(path, index=False)
    read_logs(path)
    read_logs(path)
    assert len(validations) == 2 and not cache_dir.exists()


def test_a_file_changed_while_read_is_not_stored(tmp_path, cache_dir, monkeypatch):
    path = tmp_path / "small.parquet"
    small_logs().to_parquet(path, index=False)
    signatures = iter([("before",), ("after",)])
    monkeypatch.setattr(logs_module, "file_signature", lambda p: next(signatures))
    read_logs(path)
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def _entry(tmp_path, cache_dir):
    path = tmp_path / "small.parquet"
    small_logs().to_parquet(path, index=False)
    fresh = read_logs(path)
    (entry,) = cache_dir.iterdir()
    return path, fresh, entry


def _rewrite(entry, change):
    with zipfile.ZipFile(entry) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(parts["meta.json"])
    change(meta, parts)
    parts["meta.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(entry, "w") as z:
        for n, data in parts.items():
            z.writestr(n, data)


def _truncate(entry, fresh):
    entry.write_bytes(entry.read_bytes()[:1000])


def _garbage(entry, fresh):
    entry.write_bytes(os.urandom(5000))


def _foreign_key(entry, fresh):
    _rewrite(entry, lambda meta, parts: meta.update(key="b" * 64))


def _foreign_class(entry, fresh):  # only the reading's own classes are ever made from an entry
    _rewrite(entry, lambda meta, parts: meta.update(reading={"__class__": "Popen", "args": ["true"]}))


def _other_frame(entry, fresh):
    other = small_logs(seed=9)
    logs = read_logs(other)
    _rewrite(entry, lambda meta, parts: parts.update({"frame.arrow": logs_cache._arrow(logs.frame)}))


def _lost_columns(entry, fresh):
    _rewrite(entry, lambda meta, parts: parts.update({"frame.arrow": logs_cache._arrow(fresh.frame.iloc[:, :3])}))


def _symlink(entry, fresh):
    entry.unlink()
    os.symlink("/dev/zero", entry)


@pytest.mark.parametrize("spoil", [_truncate, _garbage, _foreign_key, _foreign_class, _other_frame, _lost_columns,
                                   _symlink])
def test_a_spoilt_entry_is_refused_removed_and_read_again(tmp_path, cache_dir, validations, spoil):
    path, fresh, entry = _entry(tmp_path, cache_dir)
    spoil(entry, fresh)
    n = len(validations)
    again = read_logs(path)
    assert len(validations) == n + 1  # validated again …
    assert_same_logs(again, fresh)  # … from the file
    (stored,) = cache_dir.iterdir()  # and stored again in place of the spoilt entry
    assert stored.name == entry.name and not stored.is_symlink()
    assert_same_logs(read_logs(path), fresh)
    assert len(validations) == n + 1


def test_an_unwritable_cache_directory_only_costs_the_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("OFFEVAL_CACHE", "1")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(blocker / "cache"))
    path = tmp_path / "small.parquet"
    small_logs().to_parquet(path, index=False)
    assert_same_logs(read_logs(path), read_logs(path))


def test_the_byte_cap_evicts_the_least_recently_used(tmp_path, cache_dir, monkeypatch):
    paths = []
    for seed in (1, 2):
        p = tmp_path / f"s{seed}.parquet"
        small_logs(seed=seed).to_parquet(p, index=False)
        paths.append(p)
    read_logs(paths[0])
    (first,) = cache_dir.iterdir()
    first_size = first.stat().st_size
    monkeypatch.setenv("OFFEVAL_CACHE_MAX_BYTES", str(first_size + 10))  # room for one entry
    read_logs(paths[1])
    (kept,) = cache_dir.iterdir()
    assert kept != first and not first.exists()
    assert LogsCache.from_env().max_bytes == first_size + 10


def test_the_reading_round_trips_through_json_only():
    reading = read_logs(small_logs()).reading
    text = json.dumps(logs_cache._encode(reading))
    assert logs_cache._decode(json.loads(text)) == reading
    with pytest.raises(TypeError, match="cannot store a complex"):
        logs_cache._encode((1 + 2j,))
    assert logs_cache._decode(json.loads(json.dumps(logs_cache._encode({"a": (1, math.inf)})))) == {
        "a": (1, math.inf)}


def test_a_folder_of_parquet_files_is_one_entry_and_any_changed_file_misses(tmp_path, cache_dir, validations):
    folder = tmp_path / "days"
    folder.mkdir()
    frame = small_logs()
    for day, part in frame.groupby("day"):
        part.to_parquet(folder / f"day-{day}.parquet", index=False)
    fresh = read_logs(folder)
    again = read_logs(folder)
    assert len(validations) == 1
    assert_same_logs(again, fresh)
    assert again.n_rows == len(frame)
    other = small_logs(seed=5)
    other[other["day"] == 2].to_parquet(folder / "day-2.parquet", index=False)  # one file rewritten
    changed = read_logs(folder)
    assert len(validations) == 2 and changed.n_rows != fresh.n_rows
    assert len(list(cache_dir.iterdir())) == 2
