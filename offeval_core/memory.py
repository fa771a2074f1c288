"""Memory sizes as a user writes them (``2GB``, ``512MiB``, ``80%``), and DuckDB's share of a process's budget.

``offeval reduce --memory-limit 2GB`` keeps the whole process within 2 GB: DuckDB spills what does not fit in its
share (:func:`duckdb_memory_limit`), and the rest is room for Python, the imports and the moments frames.
"""

from __future__ import annotations

import os
import re

from offeval_core.errors import SpecError

__all__ = ["DUCKDB_SHARE", "duckdb_memory_limit", "memory_bytes"]

DUCKDB_SHARE = 0.6
"""DuckDB's share of a process's memory budget beyond what the process already holds: DuckDB's own use peaked at
about 1.25 × its limit during the demo's graded query, and the frames the reduce builds after its queries need room
too."""

_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib|%)", re.IGNORECASE)
_MIN_DUCKDB = 128 * 2**20


def memory_bytes(text: str, *, total: int | None = None) -> int:
    """Bytes of a size with a unit (kB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB of 1024) or of a share
    of ``total`` (default: the machine's memory) such as ``80%``.

    >>> memory_bytes("2GB"), memory_bytes("1.5KiB"), memory_bytes("25%", total=8000)
    (2000000000, 1536, 2000)
    """
    m = _SIZE.fullmatch(str(text).strip())
    if not m or float(m.group(1)) <= 0 or (m.group(2) == "%" and float(m.group(1)) > 100):
        raise SpecError(f"a memory size is a positive size with a unit such as 2GB or 512MiB, or a share of the "
                        f"memory such as 80%, got {text!r}")
    value, unit = float(m.group(1)), m.group(2).lower()
    if unit == "%":
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if total is None else total
        return int(value / 100 * total)
    return int(value * _UNITS[unit])


def resident_bytes() -> int:
    """This process's resident memory now (its peak so far where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def duckdb_memory_limit(budget: str, *, held: int | None = None, total: int | None = None) -> str:
    """DuckDB's memory limit, in bytes as DuckDB reads it, for a process that must stay within ``budget``
    (:func:`memory_bytes`): :data:`DUCKDB_SHARE` of what the process does not already hold (``held``: its resident
    memory now).

    >>> duckdb_memory_limit("2GB", held=200 * 10**6)   # 0.6 · (2000 − 200) MB
    '1080000000B'
    """
    size = memory_bytes(budget, total=total)
    held = resident_bytes() if held is None else held
    limit = int(DUCKDB_SHARE * (size - held))
    if limit < _MIN_DUCKDB:
        raise SpecError(f"a memory budget of {budget} leaves DuckDB {max(limit, 0) / 2**20:.0f} MiB beside the "
                        f"{held / 2**20:.0f} MiB this process already holds; give at least "
                        f"{(held + _MIN_DUCKDB / DUCKDB_SHARE) / 2**20:.0f} MiB")
    return f"{limit}B"
