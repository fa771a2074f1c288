"""The one input boundary: every file offeval reads (logs, moments files, discount tables) is opened here.

What it guarantees, whatever the file:

* only regular files (and, for Parquet logs, directories of them) are opened; FIFOs, devices, sockets
  and ``/proc``-like files are refused before a byte is read, so nothing hangs on a pipe or streams
  ``/dev/zero`` forever;
* the limits of :class:`~offeval_core.limits.Limits` hold: CSV text is decompressed as a stream and
  counted as it is read (bytes and lines), the header is checked for its number of columns before the
  body is parsed, Parquet sizes come from the footer before any column is decoded;
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
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from offeval_core.errors import LimitExceeded, MissingInput, UnreadableInput
from offeval_core.limits import DATA_DIR_ENV, Limits, data_dir

__all__ = ["CSV_SUFFIXES", "PARQUET_SUFFIXES", "data_file", "data_files", "file_kind", "open_regular",
           "read_csv_limited", "read_parquet_limited"]

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


def open_regular(path: str | os.PathLike, *, source: str) -> io.BufferedReader:
    """Open ``path`` for reading if it is a regular file; never blocks on a FIFO, never opens a device.

    Raises MissingInput when it does not exist and UnreadableInput when it is not a regular file or
    cannot be opened (permissions).
    """
    real = os.path.realpath(os.fspath(path))
    if real.startswith(_SPECIAL_TREES):
        raise UnreadableInput(f"{source}: not a regular file (a /proc, /sys or /dev entry)", source=source,
                              expected="a regular file")
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
                                  "expected a CSV or Parquet file", source=source, expected="a regular file")
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


def _prescan(path, *, source: str, limits: Limits) -> None:
    """Stream the (decompressed) file once, counting bytes and lines, before anything is parsed: a
    compression bomb or an oversized file stops here in constant memory."""
    stream = _open_text(path, source=source, max_bytes=limits.max_bytes, max_lines=limits.max_rows)
    try:
        while stream.read(1 << 20):
            pass
    finally:
        stream.close()


def read_csv_limited(path, *, source: str, limits: Limits, text_columns: Iterable[str] = ()) -> pd.DataFrame:
    """Read a (possibly gzip / bz2 compressed) CSV or TSV file within ``limits``.

    Columns named in ``text_columns`` are read as text, so identifiers such as ``001`` and ``1`` stay
    distinct. Raises MissingInput, UnreadableInput (empty, corrupt, truncated, not text) or LimitExceeded.
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
    _prescan(path, source=source, limits=limits)
    wanted = set(text_columns)
    dtype = {c: str for c in header if c in wanted} or None
    stream = _open_text(path, source=source, max_bytes=limits.max_bytes, max_lines=limits.max_rows)
    try:
        return pd.read_csv(io.BufferedReader(stream, buffer_size=_CHUNK), sep=sep, dtype=dtype,
                           low_memory=False, encoding="utf-8")
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


def _parquet_files(path: Path, source: str) -> list[Path]:
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.name.lower().endswith(PARQUET_SUFFIXES))
    if not files:
        raise UnreadableInput(f"{source}: the directory holds no .parquet files", source=source)
    return files


def read_parquet_limited(path, *, source: str, limits: Limits) -> pd.DataFrame:
    """Read a Parquet file (or a directory of them) within ``limits``: sizes are checked from each file's
    footer before any data is decoded."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise MissingInput(f"{source}: no such file or directory", source=source)
    files = _parquet_files(path, source)
    rows = nbytes = 0
    try:
        for f in files:
            with open_regular(f, source=source) as fh:
                if os.fstat(fh.fileno()).st_size == 0:
                    raise UnreadableInput(f"{source}: the file is empty (0 bytes); expected a Parquet file",
                                          source=source)
                pf = pq.ParquetFile(fh)
                md = pf.metadata
                if md.num_columns > limits.max_columns:
                    raise LimitExceeded(f"{source}: the file has {md.num_columns:,} columns, more than the limit "
                                        f"{limits.max_columns:,} (OFFEVAL_MAX_COLUMNS / --max-columns)",
                                        source=source, expected=f"at most {limits.max_columns:,} columns")
                rows += md.num_rows
                nbytes += sum(max(md.row_group(i).total_byte_size, 0) for i in range(md.num_row_groups))
                if rows > limits.max_rows:
                    raise LimitExceeded(f"{source}: the file has more than {limits.max_rows:,} rows, the limit "
                                        "OFFEVAL_MAX_ROWS / --max-rows", source=source,
                                        expected=f"at most {limits.max_rows:,} rows")
                if nbytes > limits.max_bytes:
                    raise LimitExceeded(f"{source}: the file holds more than {limits.max_bytes:,} bytes (after "
                                        "decompression), the limit OFFEVAL_MAX_BYTES / --max-bytes",
                                        source=source, expected=f"at most {limits.max_bytes:,} bytes")
                if len(files) == 1:
                    return pf.read().to_pandas()
        return pq.read_table(path).to_pandas()
    except (LimitExceeded, UnreadableInput):
        raise
    except MemoryError:
        raise LimitExceeded(f"{source}: the file does not fit in memory", source=source) from None
    except Exception as exc:  # any decoder failure of a corrupt file
        raise UnreadableInput(f"{source}: cannot read the file: not a valid Parquet file (corrupt or truncated: "
                              f"{type(exc).__name__})", source=source) from None


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
