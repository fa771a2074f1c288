"""The persistent moments cache (offeval_core.moments_cache): a hit equals a fresh reduce to the last bit; a changed
byte of the logs or a changed code version misses; concurrent writers leave one valid entry; the byte cap evicts
the least recently used entry; a corrupt, truncated or hostile entry is refused by the moments-file boundary,
removed and computed again."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offeval_core import file_cache, moment_columns, moments_cache
from offeval_core.engine import Grid, reduce, sources
from offeval_core.engine import reduction as reduction_module
from offeval_core.fingerprint import file_digest, logs_fingerprint
from offeval_core.logs import read_logs
from offeval_core.moments_cache import MomentsCache, logs_key, moments_key
from offeval_core.moments_io import META_KEY, read_moments

CLIPS = (1, 4, 64, math.inf)


def small_logs(seed: int = 3, n_sessions: int = 80) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_sessions):
        length = int(rng.integers(1, 8))
        perm = rng.permutation(10) + 1
        for r in range(1, length + 1):
            rows.append({"session_id": f"s{s:03d}", "rank": r, "rank__new": int(perm[r - 1]),
                         "click": float(rng.random() < 0.3), "watch": float(rng.random() < 0.4) * rng.integers(1, 9),
                         "day": s % 3, "arm": "control" if s % 2 else "treatment", "segment": "ab"[s % 2]})
    return pd.DataFrame(rows)


@pytest.fixture
def logs_file(tmp_path) -> Path:
    p = tmp_path / "logs.parquet"
    small_logs().to_parquet(p, index=False)
    return p


@pytest.fixture
def cache(tmp_path) -> MomentsCache:
    return MomentsCache(tmp_path / "cache")


def grid(reward: str = "click") -> Grid:
    return Grid(rewards=(reward,), policies=("new",), discounts=("pbm", "log2"), clips=CLIPS)


def assert_same(a, b) -> None:
    """Every column of both frames equal to the last bit (NaN where NaN), dtypes and order included."""
    for x, y in ((a.offline, b.offline), (a.online, b.online)):
        assert list(x.columns) == list(y.columns)
        assert x.dtypes.to_dict() == y.dtypes.to_dict()
        pd.testing.assert_frame_equal(x, y, check_exact=True)
        for c in x.columns:
            if x[c].dtype.kind == "f":  # bit for bit, not just ==
                assert x[c].to_numpy().tobytes() == y[c].to_numpy().tobytes(), c
    assert a.grid == b.grid and a.discount_labels == b.discount_labels and a.source == b.source


def assert_close(a, b) -> None:
    """Equal up to the order of DuckDB's parallel sums: keys, counts and labels exactly, moments to 1e-13."""
    floats = [c for c in a.offline.columns if c in moment_columns.OFFLINE_ROLES and a.offline[c].dtype.kind == "f"]
    for c in floats:
        np.testing.assert_allclose(a.offline[c], b.offline[c], rtol=1e-13, atol=1e-13, equal_nan=True)
    pd.testing.assert_frame_equal(a.offline.drop(columns=floats), b.offline.drop(columns=floats), check_exact=True)
    pd.testing.assert_frame_equal(a.online, b.online, check_exact=False, rtol=1e-13)
    assert a.grid == b.grid and a.discount_labels == b.discount_labels


def counting_reduce(monkeypatch) -> list:
    calls = []
    real = reduction_module._reduce

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(reduction_module, "_reduce", counted)
    return calls


@pytest.fixture(autouse=True)
def one_thread(request, monkeypatch):
    """DuckDB on one thread: its parallel sums add in a varying order (two reduces of the same logs differ in
    the last bits, relative 1e-15), on one thread the reduce repeats itself bit for bit (the test named
    ``…on_every_thread`` keeps DuckDB's threads)."""
    if "on_every_thread" in request.node.name:
        return
    real = sources.connect
    monkeypatch.setattr(sources, "connect", lambda **kw: real(**(kw | {"threads": 1})))


def test_a_hit_equals_a_fresh_reduce_to_the_last_bit_and_computes_nothing(logs_file, cache, monkeypatch):
    calls = counting_reduce(monkeypatch)
    fresh = reduce(read_logs(logs_file), grid("watch"), cache=None)
    first = reduce(read_logs(logs_file), grid("watch"), cache=cache)  # computed and stored
    assert len(calls) == 2 and len(cache.entries()) == 1
    again = reduce(read_logs(logs_file), grid("watch"), cache=cache)  # another reading of the same file: a hit
    assert len(calls) == 2
    assert_same(fresh, first)
    assert_same(fresh, again)
    assert set(moment_columns.OFFLINE_ROLES) & set(again.offline.columns) >= {"n", "sum", "m2", "co_den", "m2_diff"}


def test_a_hit_is_the_stored_reduce_bit_for_bit_on_every_thread(logs_file, cache):
    stored = reduce(read_logs(logs_file), grid("watch"), cache=cache)
    hit = reduce(read_logs(logs_file), grid("watch"), cache=cache)
    assert_same(stored, hit)  # the file keeps every bit of what was computed
    fresh = reduce(read_logs(logs_file), grid("watch"), cache=None)  # DuckDB's threads: last bits vary
    assert_close(hit, fresh)
    assert (hit.offline["n"] == fresh.offline["n"]).all()


def test_the_logs_name_is_the_callers_not_the_writers(logs_file, cache):
    reduce(read_logs(logs_file, name="first name"), grid(), cache=cache)
    hit = reduce(read_logs(logs_file, name="second name"), grid(), cache=cache)
    assert hit.source == "second name"
    assert len(cache.entries()) == 1


def test_logs_from_a_frame_are_keyed_by_their_columns(cache):
    df = small_logs()
    a = reduce(read_logs(df), grid(), cache=cache)
    b = reduce(read_logs(df.copy()), grid(), cache=cache)
    assert_same(a, b)
    assert len(cache.entries()) == 1
    changed = df.copy()
    changed.loc[5, "click"] = 1.0 - changed.loc[5, "click"]
    assert logs_fingerprint(read_logs(changed)) != logs_fingerprint(read_logs(df))
    c = reduce(read_logs(changed), grid(), cache=cache)
    assert len(cache.entries()) == 2
    assert_same(c, reduce(read_logs(changed), grid(), cache=None))


def test_a_changed_byte_of_the_file_misses(logs_file, cache, monkeypatch):
    before = reduce(read_logs(logs_file), grid(), cache=cache)
    df = small_logs()
    df.loc[0, "click"] = 1.0 - df.loc[0, "click"]  # one reward flipped
    df.to_parquet(logs_file, index=False)
    calls = counting_reduce(monkeypatch)
    changed = reduce(read_logs(logs_file), grid(), cache=cache)
    assert len(calls) == 1 and len(cache.entries()) == 2
    assert_same(changed, reduce(read_logs(logs_file), grid(), cache=None))
    assert not np.array_equal(changed.online["sum"], before.online["sum"])  # the new file's numbers


def test_one_changed_byte_changes_the_digest_of_a_file_and_of_a_directory(tmp_path):
    d = tmp_path / "days"
    d.mkdir()
    (d / "a.parquet").write_bytes(b"x" * 100)
    (d / "b.parquet").write_bytes(b"y" * 100)
    before = file_digest(d)
    (d / "b.parquet").write_bytes(b"y" * 99 + b"z")
    assert file_digest(d) != before and file_digest(d) is not None
    (d / "b.parquet").write_bytes(b"y" * 100)
    assert file_digest(d) == before
    os.rename(d / "b.parquet", d / "c.parquet")  # the same bytes under another name: another dataset
    assert file_digest(d) != before


def test_the_reading_options_are_part_of_the_key(logs_file, cache):
    g = Grid(rewards=("click",), policies=("new",), clips=CLIPS)
    a = logs_key(read_logs(logs_file), g)
    assert a == logs_key(read_logs(logs_file), g)
    assert a != logs_key(read_logs(logs_file, rewards=["click"]), g)
    assert a != logs_key(read_logs(logs_file, arms="control=control,treatment=treatment"), g)


def test_every_part_of_the_grid_is_part_of_the_key():
    base = Grid(rewards=("click",), policies=("new",), discounts=("pbm",), exposures=("pbm",), clips=CLIPS)
    others = [Grid(rewards=("watch",), policies=("new",), clips=CLIPS),
              Grid(rewards=("click",), policies=(), clips=CLIPS),
              Grid(rewards=("click",), policies=("new",), discounts=("log2",), clips=CLIPS),
              Grid(rewards=("click",), policies=("new",), exposures=("log2",), clips=CLIPS),
              Grid(rewards=("click",), policies=("new",), clips=(1, 4, 64)),
              Grid(rewards=("click",), policies=("new",), clips=CLIPS, ndcg_rule="drop")]
    keys = {moments_key("f", g) for g in [base, *others]}
    assert len(keys) == 1 + len(others)
    assert moments_key("f", base, pbm_floor=1e-3) != moments_key("f", base)
    assert moments_key("f", base, engine="pyspark") != moments_key("f", base)


def test_a_changed_code_version_misses(logs_file, cache, monkeypatch):
    reduce(read_logs(logs_file), grid(), cache=cache)
    calls = counting_reduce(monkeypatch)
    monkeypatch.setattr(moments_cache, "MOMENTS_VERSION", moment_columns.MOMENTS_VERSION + 1)
    reduce(read_logs(logs_file), grid(), cache=cache)
    assert len(calls) == 1 and len(cache.entries()) == 2
    monkeypatch.setattr(moments_cache, "MOMENTS_VERSION", moment_columns.MOMENTS_VERSION)
    monkeypatch.setattr(file_cache, "_CODE", ["an edited offeval_core"])  # an edit of the sources
    reduce(read_logs(logs_file), grid(), cache=cache)
    assert len(calls) == 2 and len(cache.entries()) == 3


def test_the_code_digest_covers_the_reduce_sources():
    digest = moments_cache.code_digest()
    assert len(digest) == 64
    assert (file_cache._PACKAGE / "engine" / "reduction.py").exists()


_WRITER = textwrap.dedent("""
    import sys
    from offeval_core.engine import Grid, reduce
    from offeval_core.logs import read_logs
    from offeval_core.moments_cache import MomentsCache
    from pathlib import Path
    logs = read_logs(sys.argv[1])
    cache = MomentsCache(Path(sys.argv[2]))
    g = Grid(rewards=("click",), policies=("new",), discounts=("pbm", "log2"), clips=(1, 4, 64, float("inf")))
    sys.stdin.readline()  # both processes start computing at once
    reduce(logs, g, cache=cache)
    print("done")
""")


def test_two_processes_writing_one_key_leave_one_valid_entry(logs_file, cache):
    env = os.environ | {"OFFEVAL_CACHE": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(logs_file), str(cache.directory)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    outs = [p.communicate("go\n", timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    files = sorted(os.listdir(cache.directory))
    assert len(files) == 1 and files[0].endswith(".moments.parquet")  # no temporary file left behind
    key = logs_key(read_logs(logs_file), grid())
    assert files[0] == f"{key}.moments.parquet"
    read_moments(cache.directory / files[0])  # a whole, valid moments file
    assert_close(cache.get(key, grid(), source=str(logs_file)), reduce(read_logs(logs_file), grid(), cache=None))


def test_a_reader_never_sees_a_partial_entry(logs_file, cache):
    """Entries are written beside their final name and renamed: the directory holds only whole entries."""
    m = reduce(read_logs(logs_file), grid(), cache=None)
    key = "a" * 64
    seen = []
    real = pq.write_table

    def slow_write(table, where, **kw):
        seen.append(sorted(p.name for p in cache.directory.iterdir()))  # during the write
        return real(table, where, **kw)

    try:
        pq.write_table = slow_write
        cache.put(key, m)
    finally:
        pq.write_table = real
    assert seen and all(not n.endswith(".moments.parquet") for n in seen[0])  # only the temporary file
    assert [p.name for p, _, _ in cache.entries()] == [f"{key}.moments.parquet"]


def test_the_byte_cap_evicts_the_least_recently_used(logs_file, tmp_path):
    logs = read_logs(logs_file)
    grids = [Grid(rewards=("click",), policies=("new",), clips=c) for c in ((1, math.inf), (2, math.inf),
                                                                            (4, math.inf))]
    probe = MomentsCache(tmp_path / "probe")
    sizes = [probe.put(str(i) * 64, reduce(logs, g, cache=None)).stat().st_size for i, g in enumerate(grids)]
    cache = MomentsCache(tmp_path / "cache", max_bytes=max(sizes) * 2 + min(sizes) // 2)  # room for two entries
    keys = [logs_key(logs, g) for g in grids]
    reduce(logs, grids[0], cache=cache)
    reduce(logs, grids[1], cache=cache)
    t = 1_700_000_000
    os.utime(cache.path(keys[0]), ns=(t * 10**9, t * 10**9))  # entry 0 written first …
    os.utime(cache.path(keys[1]), ns=((t + 10) * 10**9, (t + 10) * 10**9))
    assert cache.get(keys[0], grids[0]) is not None  # … but used last
    reduce(logs, grids[2], cache=cache)  # a third entry: over the cap
    left = {p.name for p, _, _ in cache.entries()}
    assert left == {f"{keys[0]}.moments.parquet", f"{keys[2]}.moments.parquet"}  # entry 1, least recently used, out
    assert sum(s for _, s, _ in cache.entries()) <= cache.max_bytes


def _entry(cache, logs_file):
    logs = read_logs(logs_file)
    reduce(logs, grid(), cache=cache)
    key = logs_key(logs, grid())
    return key, cache.path(key)


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path):
    path.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")


def _empty(path):
    path.write_bytes(b"")


def _rewrite(path, change):
    """The entry's table with ``change(frame)`` applied, its metadata kept."""
    table = pq.read_table(path)
    frame = change(table.to_pandas())
    out = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(table.schema.metadata)
    pq.write_table(out, path)


def _negative_m2(path):
    def change(f):
        f.loc[f["kind"] == "offline", "m2"] = -1.0
        return f
    _rewrite(path, change)


def _inflated_count(path):
    def change(f):
        f.loc[0, "n"] = f.loc[0, "n"] + 1  # offline n no longer the online n
        return f
    _rewrite(path, change)


def _foreign_key(path):
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[META_KEY] = meta[META_KEY].replace(path.name[:64].encode(), b"b" * 64)
    pq.write_table(table.replace_schema_metadata(meta), path)


def _symlink_elsewhere(path):
    path.unlink()
    os.symlink("/dev/zero", path)


def _symlink_to_a_valid_file(path):
    other = path.parent.parent / "elsewhere.parquet"
    shutil.copy(path, other)
    path.unlink()
    os.symlink(other, path)


@pytest.mark.parametrize("spoil", [_truncate, _garbage, _empty, _negative_m2, _inflated_count, _foreign_key,
                                   _symlink_elsewhere, _symlink_to_a_valid_file])
def test_a_spoilt_entry_is_refused_removed_and_computed_again(logs_file, cache, monkeypatch, spoil):
    key, path = _entry(cache, logs_file)
    fresh = reduce(read_logs(logs_file), grid(), cache=None)
    spoil(path)
    assert cache.get(key, grid()) is None  # refused by the boundary, never used …
    assert not path.exists() and not path.is_symlink()  # … and removed
    spoil_again = _entry(cache, logs_file)[1]
    spoil(spoil_again)
    calls = counting_reduce(monkeypatch)
    again = reduce(read_logs(logs_file), grid(), cache=cache)  # through reduce: computed again, stored again
    assert len(calls) == 1
    assert_same(again, fresh)
    assert_same(cache.get(key, grid(), source=fresh.source), fresh)


def test_an_entry_of_another_grid_under_a_key_is_refused(logs_file, cache):
    key, path = _entry(cache, logs_file)
    assert cache.get(key, grid("watch")) is None
    assert not path.exists()


def test_an_unwritable_cache_directory_only_costs_the_cache(logs_file, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = MomentsCache(blocker / "cache")
    m = reduce(read_logs(logs_file), grid(), cache=cache)
    assert_same(m, reduce(read_logs(logs_file), grid(), cache=None))


def test_the_environment_names_the_cache(logs_file, tmp_path, monkeypatch):
    monkeypatch.setenv("OFFEVAL_CACHE", "1")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(tmp_path / "env-cache"))
    reduce(read_logs(logs_file), grid())
    assert len(list((tmp_path / "env-cache").glob("*.moments.parquet"))) == 1
    monkeypatch.setenv("OFFEVAL_CACHE", "0")
    reduce(read_logs(logs_file), grid("watch"))
    assert len(list((tmp_path / "env-cache").glob("*.moments.parquet"))) == 1
    monkeypatch.delenv("OFFEVAL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert moments_cache.cache_directory() == tmp_path / "xdg" / "offeval" / "moments"


def test_a_key_is_hex_and_never_a_path(cache):
    for bad in ("../" + "a" * 61, "A" * 64, "a" * 63):
        with pytest.raises(ValueError, match="64 hex digits"):
            cache.path(bad)


def test_offeval_reduce_reads_the_cache_for_the_same_files_and_grid(logs_file, tmp_path, monkeypatch, capsys):
    from offeval_core.cli import main
    from offeval_core.commands import reduce as reduce_command

    monkeypatch.setenv("OFFEVAL_CACHE", "1")
    monkeypatch.setenv("OFFEVAL_CACHE_DIR", str(tmp_path / "cli-cache"))
    args = ["reduce", str(logs_file), "--clips", "1,4,inf", "--discounts", "pbm,log2"]
    assert main([*args, "--out", str(tmp_path / "first.parquet")]) == 0
    assert len(list((tmp_path / "cli-cache").glob("*.moments.parquet"))) == 1
    capsys.readouterr()

    def refuse(*a, **kw):
        raise AssertionError("computed although the moments are in the cache")

    monkeypatch.setattr(reduce_command, "reduce", refuse)
    assert main([*args, "--out", str(tmp_path / "second.parquet")]) == 0
    assert "in the moments cache" in capsys.readouterr().err
    assert_same(read_moments(tmp_path / "first.parquet"), read_moments(tmp_path / "second.parquet"))
    with pytest.raises(AssertionError, match="computed although"):  # another grid is computed
        main(["reduce", str(logs_file), "--clips", "1,inf", "--out", str(tmp_path / "third.parquet")])
    df = small_logs()
    df.loc[3, "click"] = 1.0 - df.loc[3, "click"]
    df.to_parquet(logs_file, index=False)  # a changed file is computed again
    with pytest.raises(AssertionError, match="computed although"):
        main([*args, "--out", str(tmp_path / "fourth.parquet")])
