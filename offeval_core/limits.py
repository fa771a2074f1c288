"""The documented limits of every input offeval reads, and the operator's data directory.

Every file that reaches the core (logs, moments files, discount tables) goes through
:mod:`offeval_core.inputs`, which enforces a :class:`Limits`. The defaults suit a dashboard shared by a
team on a machine with a few GB of memory; an operator raises them with environment variables (read at
each call, so a restart is not needed for the command line) and the command line with flags:

======================  ==========================  ============  =====================================
limit                   environment variable        default       what it bounds
======================  ==========================  ============  =====================================
``max_bytes``           ``OFFEVAL_MAX_BYTES``       1 GiB         decompressed bytes of one file
``max_rows``            ``OFFEVAL_MAX_ROWS``        20 000 000    data rows (lines of a CSV) of one file
``max_columns``         ``OFFEVAL_MAX_COLUMNS``     1 000         columns of one file
``max_rank``            ``OFFEVAL_MAX_RANK``        100 000       largest rank in ``rank`` / ``rank__*``
``max_table_bytes``     ``OFFEVAL_MAX_TABLE_BYTES``  1 MiB         bytes of a discount table (CSV)
``max_memory``          ``OFFEVAL_MAX_MEMORY``      2 GiB         memory one file takes once loaded
======================  ==========================  ============  =====================================

``max_memory`` bounds what the data *decodes to*, not what it takes on disk: a Parquet file of a few hundred
kilobytes can hold tens of millions of rows. :func:`load_memory` estimates the memory of loading and
validating a table from its rows, columns and decoded bytes (the measured cost of ``read_logs``); the input
boundary checks it from the Parquet footer or the CSV line count before anything is decoded, and again
while decoding. Sizes accept a unit: ``512MB``, ``2GiB``. The limits bound files; a pandas DataFrame handed to
``read_logs`` is already in memory, so only the rank ceiling applies to it. The data directory (``OFFEVAL_DATA_DIR``) is where the
dashboard looks up moments files and discount tables *by name* (``?moments=NAME``,
``table:NAME``); without it the dashboard reads such files only from uploads.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from offeval_core.errors import SpecError

__all__ = ["COLUMN_BYTES", "DATA_DIR_ENV", "ENV", "ROW_BYTES", "Limits", "data_dir", "load_memory", "parse_size"]

DATA_DIR_ENV = "OFFEVAL_DATA_DIR"
ENV = {
    "max_bytes": "OFFEVAL_MAX_BYTES",
    "max_rows": "OFFEVAL_MAX_ROWS",
    "max_columns": "OFFEVAL_MAX_COLUMNS",
    "max_rank": "OFFEVAL_MAX_RANK",
    "max_table_bytes": "OFFEVAL_MAX_TABLE_BYTES",
    "max_memory": "OFFEVAL_MAX_MEMORY",
}
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6, "mib": 1024**2,
          "g": 10**9, "gb": 10**9, "gib": 1024**3, "t": 10**12, "tb": 10**12, "tib": 1024**4}


def parse_size(text: str | int, *, name: str = "size") -> int:
    """A positive integer, optionally with a unit (``KB``, ``MiB``, ``GB``…; ``_`` separators allowed).

    >>> parse_size("2GiB"), parse_size("512MB"), parse_size("20_000_000")
    (2147483648, 512000000, 20000000)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = re.fullmatch(r"\s*([0-9][0-9_]*)\s*([A-Za-z]*)\s*", str(text))
        unit = m.group(2).lower() if m else ""
        if not m or unit not in _UNITS:
            raise SpecError(f"{name} must be a positive whole number, optionally with a unit like MB or GiB; "
                            f"got {str(text)[:40]!r}", source=name, expected="e.g. 1000, 512MB, 2GiB")
        value = int(m.group(1).replace("_", "")) * _UNITS[unit]
    if value < 1:
        raise SpecError(f"{name} must be at least 1, got {value}", source=name, expected="a positive number")
    return value


@dataclass(frozen=True)
class Limits:
    """Caps on one input file; every reader stops with :class:`~offeval_core.errors.LimitExceeded` at them.

    >>> Limits().max_columns
    1000
    """

    max_bytes: int = 1024**3
    max_rows: int = 20_000_000
    max_columns: int = 1_000
    max_rank: int = 100_000
    max_table_bytes: int = 1024**2
    max_memory: int = 2 * 1024**3

    @classmethod
    def from_env(cls, environ=None, **overrides) -> Limits:
        """The defaults, replaced by the ``OFFEVAL_MAX_*`` variables that are set, then by ``overrides``
        that are not None (the command line's flags)."""
        environ = os.environ if environ is None else environ
        values = {}
        for field, var in ENV.items():
            raw = environ.get(var)
            if raw not in (None, ""):
                values[field] = parse_size(raw, name=var)
        for field, value in overrides.items():
            if field not in ENV:
                raise TypeError(f"unknown limit {field!r}")
            if value is not None:
                values[field] = parse_size(value, name=f"--{field.replace('_', '-')}")
        return dataclasses.replace(cls(), **values)


ROW_BYTES = 120
COLUMN_BYTES = 16
"""Memory of loading and validating logs beyond the decoded data, per row and per row and column: measured
peaks of ``offeval validate`` (19 M rows × 3 columns: 198 bytes per row; the demo, 1.2 M rows × 22 columns:
530-640 bytes per row) lie under ``ROW_BYTES + COLUMN_BYTES × columns + 2 × decoded bytes per row``."""


def load_memory(rows: int, columns: int, decoded_bytes: int) -> int:
    """Estimated peak memory (bytes) of loading and validating a table of ``rows`` × ``columns`` whose values
    decode to ``decoded_bytes`` (8 bytes per int64 / float64 value, the text's length for text…).

    >>> round(load_memory(19_000_000, 3, 19_000_000 * 24) / 2**30, 2)  # GiB: a 19 M-row file of 3 numbers
    3.82
    """
    return int(rows) * (ROW_BYTES + COLUMN_BYTES * int(columns)) + 2 * int(decoded_bytes)


def data_dir(environ=None) -> Path | None:
    """The operator's data directory (``OFFEVAL_DATA_DIR``), or None when unset or not a directory."""
    environ = os.environ if environ is None else environ
    raw = environ.get(DATA_DIR_ENV)
    if not raw:
        return None
    path = Path(raw).expanduser()
    return path if path.is_dir() else None
