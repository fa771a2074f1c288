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
import glob
import gzip
import io
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from offeval_core.errors import LimitExceeded, MissingInput, UnreadableInput
from offeval_core.limits import DATA_DIR_ENV, Limits, data_dir, load_memory

__all__ = ["CSV_SUFFIXES", "PARQUET_SUFFIXES", "ParquetDataset", "data_file", "data_files", "file_kind",
           "open_regular", "parquet_dataset", "parquet_files", "read_csv_limited", "read_parquet_limited", "text_lines"]

CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".tsv", ".tsv.gz", ".txt")
PARQUET_SUFFIXES = (".parquet", ".pq")
_CHUNK = 1 << 16
_BATCH_ROWS = 1 << 16
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
    return next(csv.reader([text], delimiter=sep), [])


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
    _check_memory(source, lines, columns, max(nbytes, lines * columns * 8), limits)  # 8 bytes per parsed number
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
    _check_memory(source, lines, fields, max(nbytes, lines * fields * 64), limits)  # a Python str per value
    stream = _open_text(path, source=source, max_bytes=limits.max_bytes, max_lines=limits.max_rows)
    with io.TextIOWrapper(io.BufferedReader(stream, buffer_size=_CHUNK), encoding="utf-8", errors="replace") as text:
        no = 0
        while line := text.readline(_MAX_LINE + 1):
            no += 1
            if len(line) > _MAX_LINE:
                raise LimitExceeded(f"{source}: line {no} is longer than {_MAX_LINE:,} characters", source=source,
                                    rows=[no], expected=f"lines of at most {_MAX_LINE:,} characters")
            yield line


def parquet_files(path, *, source: str) -> list[Path]:
    """The Parquet files ``path`` names, in the order they are read: the file itself, every ``.parquet`` /
    ``.pq`` file under a directory, or the files a glob pattern (``logs/day-*.parquet``) matches, sorted.

    Raises MissingInput (no such file, a pattern matching nothing, an empty path) or UnreadableInput (a
    directory without Parquet files).
    """
    text = os.fspath(path)
    if not str(text).strip():
        raise MissingInput("no file named: the path is empty", source=source, expected="a file, directory or pattern")
    p = Path(text)
    if not p.exists() and any(ch in str(text) for ch in "*?["):
        files = sorted(Path(m) for m in glob.glob(str(text), recursive=True)
                       if m.lower().endswith(PARQUET_SUFFIXES) and os.path.isfile(m))
        if not files:
            raise MissingInput(f"{source}: no .parquet file matches this pattern", source=source)
        return files
    if not p.exists():
        raise MissingInput(f"{source}: no such file or directory", source=source)
    if not p.is_dir():
        return [p]
    files = sorted(f for f in p.rglob("*") if f.name.lower().endswith(PARQUET_SUFFIXES) and f.is_file())
    if not files:
        raise UnreadableInput(f"{source}: the directory holds no .parquet files", source=source)
    return files


@dataclass(frozen=True)
class ParquetDataset:
    """Parquet files checked at the boundary (:func:`parquet_dataset`): their one schema (the files' schemas
    unified) and their row counts, all read from the footers."""

    source: str
    files: tuple[Path, ...]
    schema: object  # pyarrow.Schema
    rows: tuple[int, ...]

    @property
    def n_rows(self) -> int:
        return sum(self.rows)

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)


def _file_label(f: Path, files: list[Path], source: str) -> str:
    return source if len(files) == 1 else f.name


def _decoded_bytes(md, schema) -> int:
    """Bytes the values of one file decode to: exact for fixed-width columns (rows × width), the footer's
    uncompressed size plus 8 bytes of offset per value for text and other variable-width columns."""
    total = 0
    for field in schema:
        try:
            width = max(field.type.bit_width // 8, 1)
        except ValueError:  # text, lists, nulls: no fixed width
            width = None
        if width is not None:
            total += md.num_rows * width
            continue
        leaves = [j for j in range(md.num_columns) if md.schema.column(j).path.split(".")[0] == field.name]
        total += md.num_rows * 8 + sum(max(md.row_group(g).column(j).total_uncompressed_size, 0)
                                       for g in range(md.num_row_groups) for j in leaves)
    return total


def _unify(schemas: list, files: list[Path], source: str):
    """One schema for every file, or UnreadableInput naming the first file and column that differ: every file
    must have the same columns; a column's type may differ only by numeric width (int32 / int64 / float)."""
    import pyarrow as pa

    first, names = schemas[0], set(schemas[0].names)
    for f, sch in zip(files[1:], schemas[1:], strict=True):
        lacks = [c for c in first.names if c not in sch.names]
        extra = [c for c in sch.names if c not in names]
        if lacks or extra:
            what = (f"lacks column '{lacks[0]}' that {files[0].name} has" if lacks
                    else f"has column '{extra[0]}' that {files[0].name} lacks")
            raise UnreadableInput(f"{source}: the Parquet files do not have the same columns: {f.name} {what}; "
                                  "every file must have the same columns", source=source,
                                  expected="files with one schema")
    fields = []
    for field in first:
        types = [sch.field(field.name).type for sch in schemas]
        if all(t == field.type for t in types):
            fields.append(field)
            continue
        numeric = all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in types)
        if not numeric:
            k = next(i for i, t in enumerate(types) if t != field.type)
            raise UnreadableInput(f"{source}: column '{field.name}' holds {_kind_of(field.type)} in {files[0].name} but "
                                  f"{_kind_of(types[k])} in {files[k].name}; every file must give a column the same "
                                  "type", source=source, column=field.name, expected="files with one schema")
        common = pa.float64() if any(pa.types.is_floating(t) for t in types) else pa.int64()
        fields.append(pa.field(field.name, common))
    return pa.schema(fields)


def _kind_of(t) -> str:
    """An Arrow type in words: integers, numbers, text, true/false, dates or times, or its Arrow name."""
    import pyarrow as pa

    for test, words in ((pa.types.is_integer, "integers"), (pa.types.is_floating, "numbers"),
                        (pa.types.is_boolean, "true/false"), (pa.types.is_temporal, "dates or times")):
        if test(t):
            return words
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    return str(t)


def parquet_dataset(path, *, source: str, limits: Limits, memory: bool = True, sizes: bool = True) -> ParquetDataset:
    """Check Parquet files from their footers before any value is decoded: regular files, not empty, at most
    ``max_columns`` columns with distinct names, one schema across the files (:func:`_unify`) and, for files to
    be loaded into memory (``sizes``, ``memory``), at most ``max_rows`` rows and ``max_bytes`` bytes in all and
    an estimated load within ``max_memory``. ``offeval reduce`` reads the files out of core, without those."""
    import pyarrow.parquet as pq

    files = parquet_files(path, source=source)
    schemas, rows, nbytes, decoded = [], [], 0, 0
    try:
        for f in files:
            label = _file_label(f, files, source)
            with open_regular(f, source=source) as fh:
                if os.fstat(fh.fileno()).st_size == 0:
                    raise UnreadableInput(f"{label}: the file is empty (0 bytes); expected a Parquet file",
                                          source=source)
                md = pq.ParquetFile(fh).metadata
                schema = md.schema.to_arrow_schema()
            if md.num_columns > limits.max_columns or len(schema) > limits.max_columns:
                raise LimitExceeded(f"{label}: the file has {max(md.num_columns, len(schema)):,} columns, more than "
                                    f"the limit {limits.max_columns:,} (OFFEVAL_MAX_COLUMNS / --max-columns)",
                                    source=source, expected=f"at most {limits.max_columns:,} columns")
            twice = sorted({n for n in schema.names if schema.names.count(n) > 1})
            if twice:
                raise UnreadableInput(f"{label}: column name '{twice[0]}' appears twice; every column needs its own "
                                      "name", source=source, column=twice[0])
            schemas.append(schema)
            rows.append(md.num_rows)
            nbytes += sum(max(md.row_group(i).total_byte_size, 0) for i in range(md.num_row_groups))
            decoded += _decoded_bytes(md, schema)
            if sizes:
                _check_size(source, sum(rows), nbytes, limits)
    except (LimitExceeded, UnreadableInput):
        raise
    except Exception as exc:  # any decoder failure of a corrupt footer
        raise UnreadableInput(f"{source}: cannot read the file: not a valid Parquet file (corrupt or truncated: "
                              f"{type(exc).__name__})", source=source) from None
    unified = _unify(schemas, files, source)
    if memory:
        _check_memory(source, sum(rows), len(unified), decoded, limits)
    return ParquetDataset(source=source, files=tuple(files), schema=unified, rows=tuple(rows))


def _check_size(source: str, rows: int, nbytes: int, limits: Limits) -> None:
    if rows > limits.max_rows:
        raise LimitExceeded(f"{source}: the file has more than {limits.max_rows:,} rows, the limit OFFEVAL_MAX_ROWS / "
                            "--max-rows", source=source, expected=f"at most {limits.max_rows:,} rows")
    if nbytes > limits.max_bytes:
        raise LimitExceeded(f"{source}: the file holds more than {limits.max_bytes:,} bytes (after decompression), "
                            "the limit OFFEVAL_MAX_BYTES / --max-bytes", source=source,
                            expected=f"at most {limits.max_bytes:,} bytes")


def _check_memory(source: str, rows: int, columns: int, decoded: int, limits: Limits) -> None:
    need = load_memory(rows, columns, decoded)
    if need > limits.max_memory:
        size = f"{need / 2**30:.1f} GiB" if need >= 2**30 else f"{need / 2**20:,.0f} MiB"
        raise LimitExceeded(f"{source}: the file would take about {size} of memory once loaded "
                            f"({rows:,} rows × {columns:,} columns), more than the limit {limits.max_memory:,} bytes "
                            "(OFFEVAL_MAX_MEMORY / --max-memory); raise the limit if this machine has the memory, or, "
                            "for logs, compute their moments where they lie with `offeval reduce`", source=source,
                            expected=f"at most {limits.max_memory:,} bytes")


def _conform(batch, schema):
    """A record batch with the unified schema's column order and types."""
    import pyarrow as pa

    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in schema], schema=schema)


def read_parquet_limited(path, *, source: str, limits: Limits) -> pd.DataFrame:
    """Read a Parquet file, a directory of them or a glob within ``limits``: the footers are checked first
    (:func:`parquet_dataset`), then the values are decoded in batches, counted as they come (rows, decoded
    bytes, the memory estimate), and the files are joined under their one schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ds = parquet_dataset(path, source=source, limits=limits)
    batches, rows, decoded = [], 0, 0
    try:
        for f in ds.files:
            with open_regular(f, source=source) as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=_BATCH_ROWS):
                    batch = _conform(batch, ds.schema)
                    rows += batch.num_rows
                    decoded += batch.nbytes
                    _check_size(source, rows, 0, limits)
                    _check_memory(source, rows, len(ds.schema), decoded, limits)
                    batches.append(batch)
        table = pa.Table.from_batches(batches, schema=ds.schema)
        del batches
        return table.to_pandas()
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
