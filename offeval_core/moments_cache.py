"""The persistent moments cache: each reduce computed once per logs content, grid and code version, across
restarts, servers and users of one machine.

An entry is a moments file (:func:`~offeval_core.moments_io.write_moments`) named by its key, the SHA-256 of

- the logs' content fingerprint (:func:`~offeval_core.fingerprint.logs_fingerprint`: their files' bytes and
  reading options, or their validated columns),
- the grid (rewards, policies, discounts, exposures, clips, nDCG rule), the pbm floor and the engine,
- the code's moment version: the moments file format (``FORMAT``), :data:`MOMENTS_VERSION` and a digest of
  the ``offeval_core`` sources (so an upgrade or an edit of the code never reads an older entry).

Entries live in ``$OFFEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/offeval/moments``, else
``~/.cache/offeval/moments``; ``OFFEVAL_CACHE=0`` turns the cache off. They are written to a temporary file in
the same directory and renamed into place, so concurrent servers computing the same key leave one whole
entry and a reader never sees a partial file. An entry is read through the same boundary as any user's
moments file (:func:`~offeval_core.moments_io.read_moments`: every invariant checked) and must name its own
key and the grid asked for; an entry that fails is removed and the moments computed again. Past
``OFFEVAL_CACHE_MAX_BYTES`` (default 1 GiB) the least recently used entries are removed (a hit touches its
entry's modification time).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from offeval_core.engine.grid import Grid, Moments
from offeval_core.errors import InputError, WrongType
from offeval_core.file_cache import (  # the cache settings and key parts, re-exported (__all__)
    DEFAULT_MAX_BYTES,
    ENV_DIR,
    ENV_MAX_BYTES,
    ENV_SWITCH,
    FileCache,
    cache_directory,
    code_digest,
)
from offeval_core.moment_columns import MOMENTS_VERSION

__all__ = ["DEFAULT_MAX_BYTES", "ENV_DIR", "ENV_MAX_BYTES", "ENV_SWITCH", "MomentsCache", "cache_directory",
           "cached", "code_digest", "logs_key", "moments_key", "resolve"]


def _clip(c: float):
    return "inf" if math.isinf(c) else float(c)


def moments_key(fingerprint: str, grid: Grid, *, engine: str = "duckdb", pbm_floor: float | None = None) -> str:
    """The cache key (64 hex digits) of the reduce of the logs with content ``fingerprint`` over ``grid``.

    >>> g = Grid(rewards=("click",), policies=("new",))
    >>> moments_key("file:ab", g) == moments_key("file:ab", g), moments_key("file:ab", g) == moments_key("file:ac", g)
    (True, False)
    """
    from offeval_core.moments_io import FORMAT

    text = json.dumps({
        "format": FORMAT, "version": MOMENTS_VERSION, "code": code_digest(), "logs": fingerprint,
        "grid": {"rewards": list(grid.rewards), "policies": list(grid.policies), "discounts": list(grid.discounts),
                 "exposures": list(grid.exposures), "clips": [_clip(c) for c in grid.clips],
                 "ndcg_rule": grid.ndcg_rule},
        "engine": engine, "pbm_floor": pbm_floor,
    }, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class MomentsCache(FileCache):
    """A directory of moments files named by key, at most ``max_bytes`` in all (least recently used out).

    >>> MomentsCache.from_env({"OFFEVAL_CACHE": "0"}) is None
    True
    >>> MomentsCache.from_env({"OFFEVAL_CACHE_DIR": "/x", "OFFEVAL_CACHE_MAX_BYTES": "1000"}).max_bytes
    1000
    """

    suffix: ClassVar[str] = ".moments.parquet"

    def get(self, key: str, grid: Grid, *, source: str = "") -> Moments | None:
        """The entry of ``key`` read through the moments-file boundary, or None (absent, or refused: then
        removed). ``source`` names the logs the caller holds (an entry is shared by every copy of them)."""
        from offeval_core.moments_io import read_metadata, read_moments

        def read(path):
            meta = read_metadata(path, name=path.name)
            if meta["settings"].get("cache_key") != key:
                raise InputError(f"{path.name}: not the entry of its key")
            m = read_moments(path, name=path.name)
            if m.grid != grid:
                raise InputError(f"{path.name}: not the grid asked for")
            return m

        m = self.read_entry(key, read)
        if m is None:
            return None
        return dataclasses.replace(m, source=source or m.source)

    def put(self, key: str, moments: Moments) -> Path | None:
        """Store ``moments`` under ``key`` (atomically), then evict past the byte cap; None when the directory
        cannot be written (the computation goes on without the cache)."""
        from offeval_core.moments_io import write_moments

        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # private to the user
            path = write_moments(moments, self.path(key), settings={"cache_key": key}, force=True)
        except (OSError, InputError):
            return None
        self.evict()
        return path


def resolve(cache="env") -> MomentsCache | None:
    """A ``cache`` argument as a cache: ``"env"`` → :meth:`MomentsCache.from_env`, None → None."""
    if cache == "env":
        return MomentsCache.from_env()
    if cache is None or isinstance(cache, MomentsCache):
        return cache
    raise WrongType(f"cache must be 'env', None or a MomentsCache, got {type(cache).__name__}")


def logs_key(logs, grid: Grid, *, pbm_floor: float | None = None) -> str:
    """The key of the in-memory reduce (DuckDB) of validated ``logs`` over ``grid``."""
    from offeval_core.fingerprint import logs_fingerprint

    return moments_key(logs_fingerprint(logs), grid, engine="duckdb", pbm_floor=pbm_floor)


def cached(logs, grid: Grid, *, pbm_floor: float | None = None, cache="env") -> Moments | None:
    """The cached reduce of ``logs`` over ``grid`` when the cache holds it (nothing is computed), else None."""
    store = resolve(cache)
    if store is None:
        return None
    return store.get(logs_key(logs, grid, pbm_floor=pbm_floor), grid, source=logs.source)
