"""The one input boundary: every file offeval reads (logs, moments files, discount tables, qrels and runs) is
opened here or, for Parquet files, directories and globs, in :mod:`offeval_core.inputs_parquet`, which builds
on it.

What it guarantees, whatever the file:

* only regular files (and, for Parquet logs, directories of them) are opened; FIFOs, devices, sockets
  and ``/proc``-like files are refused before a byte is read, so nothing hangs on a pipe or streams
  ``/dev/zero`` forever;
* the limits of :class:`~offeval_core.limits.Limits` hold: CSV and TREC text is decompressed as a stream
  and counted as it is read (bytes and lines), the header is checked for its number of columns before the
  body is parsed, and the memory the data would take once loaded is estimated before they are parsed
  (Parquet: from the footer, then again while decoding);
* every failure is an :class:`~offeval_core.errors.InputError` (``MissingInput``, ``UnreadableInput``,
  ``LimitExceeded``) whose message names the file as the caller named it and never quotes its content;
* the dashboard resolves names in the operator's data directory with :func:`data_file`: a plain file
  name, no separators, no ``..``, no hidden files, no symbolic links leading out of the directory.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

from offeval_core.errors import LimitExceeded, MissingInput, UnreadableInput
from offeval_core.limits import DATA_DIR_ENV, Limits, data_dir, load_memory

__all__ = ["CSV_SUFFIXES", "PARQUET_SUFFIXES", "check_memory", "data_file", "data_files", "file_kind", "open_regular",
           "read_csv_limited", "refuse_special", "text_lines"]

CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".tsv", ".tsv.gz", ".txt")
PARQUET_SUFFIXES = (".parquet", ".pq")
_CHUNK = 1 << 16
_SPECIAL_TREES = ("/proc/", "/sys/", "/dev/")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_DECODE_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, OSError, ValueError)


def file_kind(name: str) -> str | None:
    """``"csv"``, ``"parquet"`` or None from a file name's suffix (case-insensitive).

    >>> file_kind("logs.CSV.gz"), file_kind("m.parquet"), file_kind("notes.xlsx")
    ('csv', 'parquet', None)
    """
    low = name.lower()
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(CSV_SUFFIXES):
        return "csv"
    return None


def refuse_special(path: str | os.PathLike, *, source: str) -> None:
    """UnreadableInput when ``path`` (its real path) lies under /proc, /sys or /dev, whether or not it exists:
    such a name is never opened, listed or globbed."""
    if os.path.realpath(os.fspath(path)).startswith(_SPECIAL_TREES):
        raise UnreadableInput(f"{source}: not a regular file (a /proc, /sys or /dev entry)", source=source,
                              expected="a regular file")


def open_regular(path: str | os.PathLike, *, source: str) -> io.BufferedReader:
    """Open ``path`` for reading if it is a regular file; never blocks on a FIFO, never opens a device.

    Raises MissingInput when it does not exist and UnreadableInput when it is not a regular file or
    cannot be opened (permissions).
    """
    refuse_special(path, source=source)
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise MissingInput(f"{source}: no such file or directory", source=source) from None
    except IsADirectoryError:
        raise UnreadableInput(f"{source}: is a directory, expected a file", source=source) from None
    except OSError as exc:
        raise UnreadableInput(f"{source}: cannot open the file ({exc.strerror or type(exc).__name__})",
                              source=source) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableInput(f"{source}: not a regular file (a directory, pipe, device or socket); "
                                  "expected a file", source=source, expected="a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


class _Counted(io.RawIOBase):
    """A read-only stream that counts the (decompressed) bytes and lines read and stops at the limits."""

    def __init__(self, inner, *, source: str, max_bytes: int, max_lines: int | None):
        self._inner = inner
        self._source = source
        self._max_bytes = max_bytes
        self._max_lines = max_lines
        self.bytes = 0
        self.lines = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        want = min(len(buffer), _CHUNK)
        try:
            data = self._inner.read(want)
        except _DECODE_ERRORS as exc:
            raise UnreadableInput(f"{self._source}: cannot read the file: the compressed data is corrupt or "
                                  f"truncated ({type(exc).__name__})", source=self._source) from None
        n = len(data)
        self.bytes += n
        if self.bytes > self._max_bytes:
            raise LimitExceeded(f"{self._source}: the file holds more than {self._max_bytes:,} bytes (after "
                                "decompression), the limit OFFEVAL_MAX_BYTES / --max-bytes",
                                source=self._source, expected=f"at most {self._max_bytes:,} bytes")
        if self._max_lines is not None:
            self.lines += data.count(b"\n")
            if self.lines > self._max_lines + 1:  # + the header
                raise LimitExceeded(f"{self._source}: the file has more than {self._max_lines:,} rows, the limit "
                                    "OFFEVAL_MAX_ROWS / --max-rows", source=self._source,
                                    expected=f"at most {self._max_lines:,} rows")
        buffer[:n] = data
        return n


def _decompressed(fh, name: str):
    low = name.lower()
    if low.endswith(".gz"):
        return gzip.GzipFile(fileobj=fh, mode="rb")
    if low.endswith(".bz2"):
        return bz2.BZ2File(fh, mode="rb")
    return fh


def _open_text(path, *, source: str, max_bytes: int, max_lines: int | None) -> _Counted:
    fh = open_regular(path, source=source)
    return _Counted(_decompressed(fh, str(path)), source=source, max_bytes=max_bytes, max_lines=max_lines)


def _header(path, *, source: str, sep: str, limits: Limits) -> list[str]:
    """The header's column names, read from at most the first line (itself limited in length)."""
    max_header = max(64 * 1024, limits.max_columns * 256)
    stream = _open_text(path, source=source, max_bytes=limits.max_bytes, max_lines=None)
    try:
        buf = bytearray()
        while b"\n" not in buf and len(buf) <= max_header:
            chunk = stream.read(_CHUNK)  # one bounded chunk at a time
            if not chunk:
                break
            buf += chunk
    finally:
        stream.close()
    line = bytes(buf).split(b"\n", 1)[0]
    if len(line) > max_header:
        raise LimitExceeded(f"{source}: the first line (the header) is longer than {max_header:,} bytes; expected "
                            "a header of column names", source=source, expected="a CSV header line")
    if line.count(sep.encode()) + 1 > limits.max_columns:
        raise LimitExceeded(f"{source}: the file has more than {limits.max_columns:,} columns, the limit "
                            "OFFEVAL_MAX_COLUMNS / --max-columns", source=source,
                            expected=f"at most {limits.max_columns:,} columns")
    text = line.decode("utf-8", errors="replace").lstrip("\ufeff").rstrip("\r")
    if "\r" in text and b"\n" not in buf:
        raise UnreadableInput(f"{source}: the lines end in a carriage return alone (CR, as in classic Mac OS "
                              "files), which CSV readers do not split on; save the file with LF or CRLF line "
                              "ends", source=source, expected="lines ending in LF or CRLF")
    try:
        names = next(csv.reader([text], delimiter=sep), [])
    except csv.Error:
        raise UnreadableInput(f"{source}: cannot read the header line as CSV (a quote or line break inside a "
                              "column name)", source=source, expected="a CSV header line") from None
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UnreadableInput(f"{source}: column {name!r} appears more than once in the header; column names "
                                  "must be unique (rename or drop the copy)", source=source, column=name,
                                  expected="unique column names")
        seen.add(name)
    return names


def _prescan(path, *, source: str, limits: Limits) -> tuple[int, int]:
    """Stream the (decompressed) file once, counting bytes and lines, before anything is parsed: a
    compression bomb or an oversized file stops here in constant memory. Returns (bytes, lines)."""
    stream = _open_text(path, source=source, max_bytes=limits.max_bytes, max_lines=limits.max_rows)
    try:
        while stream.read(1 << 20):
            pass
        return stream.bytes, stream.lines
    finally:
        stream.close()


def check_memory(source: str, rows: int, columns: int, decoded: int, limits: Limits) -> None:
    """LimitExceeded when a table of ``rows`` × ``columns`` decoding to ``decoded`` bytes would take more than
    ``max_memory`` once loaded (:func:`~offeval_core.limits.load_memory`)."""
    need = load_memory(rows, columns, decoded)
    if need > limits.max_memory:
        size = f"{need / 2**30:.1f} GiB" if need >= 2**30 else f"{need / 2**20:,.0f} MiB"
        raise LimitExceeded(f"{source}: the file would take about {size} of memory once loaded "
                            f"({rows:,} rows × {columns:,} columns), more than the limit {limits.max_memory:,} bytes "
                            "(OFFEVAL_MAX_MEMORY / --max-memory); raise the limit if this machine has the memory, or, "
                            "for logs, compute their moments where they lie with `offeval reduce`", source=source,
                            expected=f"at most {limits.max_memory:,} bytes")


def read_csv_limited(path, *, source: str, limits: Limits, text_columns: Iterable[str] = (),
                     as_text: bool = False) -> pd.DataFrame:
    """Read a (possibly gzip / bz2 compressed) CSV or TSV file within ``limits``.

    Columns named in ``text_columns`` (every column with ``as_text``, empty cells then '') are read as text,
    so identifiers such as ``001`` and ``1`` stay distinct. Raises MissingInput, UnreadableInput (empty,
    corrupt, truncated, not text) or LimitExceeded.
    """
    sep = "\t" if ".tsv" in str(path).lower() else ","
    with open_regular(path, source=source) as fh:
        raw_size = os.fstat(fh.fileno()).st_size
    if raw_size == 0:
        raise UnreadableInput(f"{source}: the file is empty (0 bytes); expected a header and data rows",
                              source=source)
    if not str(path).lower().endswith((".gz", ".bz2")) and raw_size > limits.max_bytes:
        raise LimitExceeded(f"{source}: the file holds more than {limits.max_bytes:,} bytes, the limit "
                            "OFFEVAL_MAX_BYTES / --max-bytes", source=source,
                            expected=f"at most {limits.max_bytes:,} bytes")
    header = _header(path, source=source, sep=sep, limits=limits)  # cheap: the first line only
    nbytes, lines = _prescan(path, source=source, limits=limits)
    columns = max(len(header), 1)
    check_memory(source, lines, columns, max(nbytes, lines * columns * 8), limits)  # 8 bytes per parsed number
    wanted = set(text_columns)
    dtype = str if as_text else {c: str for c in header if c in wanted} or None
    stream = _open_text(path, source=source, max_bytes=limits.max_bytes, max_lines=limits.max_rows)
    try:
        return pd.read_csv(io.BufferedReader(stream, buffer_size=_CHUNK), sep=sep, dtype=dtype,
                           low_memory=False, encoding="utf-8", keep_default_na=not as_text)
    except (LimitExceeded, UnreadableInput):
        raise
    except pd.errors.EmptyDataError:
        raise UnreadableInput(f"{source}: cannot read the file: no columns (expected a header and data rows)",
                              source=source) from None
    except pd.errors.ParserError as exc:
        where = re.search(r"line \d+", str(exc))
        detail = f"a row has the wrong number of fields ({where.group(0)})" if where else "malformed CSV"
        raise UnreadableInput(f"{source}: cannot read the file: {detail}", source=source) from None
    except UnicodeDecodeError:
        raise UnreadableInput(f"{source}: cannot read the file: it is not UTF-8 text", source=source) from None
    except MemoryError:
        raise LimitExceeded(f"{source}: the file does not fit in memory; lower its size or raise the memory "
                            "available", source=source) from None
    except (*_DECODE_ERRORS, TypeError, KeyError, IndexError, OverflowError) as exc:
        raise UnreadableInput(f"{source}: cannot read the file: {type(exc).__name__}", source=source) from None
    finally:
        stream.close()


_MAX_LINE = 1 << 16


def text_lines(path, *, source: str, limits: Limits, fields: int) -> Iterator[str]:
    """The lines of a (possibly gzip / bz2 compressed) text file within ``limits``: the file is streamed once
    first, counting bytes and lines, and the memory of keeping ``fields`` values of every line is estimated
    before the first line is returned; a line longer than 65,536 characters stops the reading. Undecodable
    bytes become U+FFFD; messages never quote a line."""
    with open_regular(path, source=source) as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise UnreadableInput(f"{source}: the file is empty (0 bytes)", source=source)
    nbytes, lines = _prescan(path, source=source, limits=limits)
    check_memory(source, lines, fields, max(nbytes, lines * fields * 64), limits)  # a Python str per value
    stream = _open_text(path, source=source, max_bytes=limits.max_bytes, max_lines=limits.max_rows)
    with io.TextIOWrapper(io.BufferedReader(stream, buffer_size=_CHUNK), encoding="utf-8", errors="replace") as text:
        no = 0
        while line := text.readline(_MAX_LINE + 1):
            no += 1
            if len(line) > _MAX_LINE:
                raise LimitExceeded(f"{source}: line {no} is longer than {_MAX_LINE:,} characters", source=source,
                                    rows=[no], expected=f"lines of at most {_MAX_LINE:,} characters")
            yield line


def data_file(name: str, *, kinds: tuple[str, ...], what: str = "file", environ=None) -> Path:
    """The regular file ``name`` in the operator's data directory (``OFFEVAL_DATA_DIR``).

    ``name`` must be a plain file name (letters, digits, ``.``, ``_``, ``-``; no separators, no ``..``, not
    hidden) with one of the suffixes ``kinds``. Messages quote the name, never the directory.
    """
    shown = repr(str(name)[:60])
    root = data_dir(environ)
    if root is None:
        raise MissingInput(f"no data directory is configured, so the {what} {shown} cannot be opened by name; "
                           f"upload it instead (the operator can set {DATA_DIR_ENV})", source=what)
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise UnreadableInput(f"{what} {shown} is not a plain file name (letters, digits, '.', '_', '-'; no "
                              "folders)", source=what, expected="a file name listed in the data directory")
    if not name.lower().endswith(kinds):
        raise UnreadableInput(f"{what} {shown} must end with {' or '.join(kinds)}", source=what)
    root_real = os.path.realpath(root)
    target = os.path.realpath(os.path.join(root_real, name))
    if os.path.dirname(target) != root_real:
        raise UnreadableInput(f"{what} {shown} is outside the data directory", source=what)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise MissingInput(f"{what} {shown} is not in the data directory", source=what) from None
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableInput(f"{what} {shown} is not a regular file", source=what)
    return Path(target)


def data_files(kinds: tuple[str, ...], environ=None) -> list[str]:
    """Names of the regular files with suffixes ``kinds`` in the data directory (empty when none is set)."""
    root = data_dir(environ)
    if root is None:
        return []
    out = []
    for entry in os.scandir(root):
        if _NAME.fullmatch(entry.name) and entry.name.lower().endswith(kinds) and entry.is_file(follow_symlinks=False):
            out.append(entry.name)
    return sorted(out)
