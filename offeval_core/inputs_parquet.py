"""Parquet at the input boundary: a file, a directory of files or a glob, checked from the footers before any
value is decoded, then decoded in batches that are counted as they come (:mod:`offeval_core.inputs` for the
rest of the boundary).

What holds, whatever the files: regular files only, at most ``max_columns`` columns with distinct names,
one schema across the files (the same columns in each; a column's type may differ only by numeric width,
never first-file-wins), and for files loaded into memory at most ``max_rows`` rows, ``max_bytes`` bytes and
the estimated ``max_memory`` (:func:`~offeval_core.limits.load_memory`) — checked from the footers, and
again on the decoded batches.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from offeval_core.errors import LimitExceeded, MissingInput, UnreadableInput
from offeval_core.inputs import PARQUET_SUFFIXES, check_memory, open_regular, refuse_special
from offeval_core.limits import Limits

__all__ = ["ParquetDataset", "conform", "parquet_dataset", "parquet_files", "read_parquet_limited"]

_BATCH_ROWS = 1 << 16


def parquet_files(path, *, source: str) -> list[Path]:
    """The Parquet files ``path`` names, in the order they are read: the file itself, every ``.parquet`` /
    ``.pq`` file under a directory, or the files a glob pattern (``logs/day-*.parquet``) matches, sorted.

    Raises MissingInput (no such file, a pattern matching nothing, an empty path) or UnreadableInput (a
    directory without Parquet files).
    """
    text = os.fspath(path)
    if not str(text).strip():
        raise MissingInput("no file named: the path is empty", source=source, expected="a file, directory or pattern")
    refuse_special(text, source=source)
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
    """Bytes the values of one file decode to, from its footer: exact for fixed-width columns (rows × width),
    8 bytes of offset per value for text and other variable-width columns, and at least the footer's
    uncompressed size of every column chunk (which holds the text). Only row-group totals are read: pyarrow
    aborts the process on some damaged column-chunk entries, so they are not touched before decoding, where
    the batches are counted again."""
    fixed = 0
    for field in schema:
        try:
            fixed += md.num_rows * max(field.type.bit_width // 8, 1)
        except ValueError:  # text, lists, nulls: no fixed width
            fixed += md.num_rows * 8
    stored = sum(max(md.row_group(g).total_byte_size, 0) for g in range(md.num_row_groups))
    return max(fixed, stored)


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
    label = source
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
    except Exception as exc:  # any decoder failure of a corrupt footer (named: the file of a directory or glob)
        raise UnreadableInput(f"{label}: cannot read the file: not a valid Parquet file (corrupt or truncated: "
                              f"{type(exc).__name__})", source=source) from None
    unified = _unify(schemas, files, source)
    if memory:
        check_memory(source, sum(rows), len(unified), decoded, limits)
    return ParquetDataset(source=source, files=tuple(files), schema=unified, rows=tuple(rows))


def _check_size(source: str, rows: int, nbytes: int, limits: Limits) -> None:
    if rows > limits.max_rows:
        raise LimitExceeded(f"{source}: the file has more than {limits.max_rows:,} rows, the limit OFFEVAL_MAX_ROWS / "
                            "--max-rows", source=source, expected=f"at most {limits.max_rows:,} rows")
    if nbytes > limits.max_bytes:
        raise LimitExceeded(f"{source}: the file holds more than {limits.max_bytes:,} bytes (after decompression), "
                            "the limit OFFEVAL_MAX_BYTES / --max-bytes", source=source,
                            expected=f"at most {limits.max_bytes:,} bytes")


def conform(batch, schema):
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
                    batch = conform(batch, ds.schema)
                    rows += batch.num_rows
                    decoded += batch.nbytes
                    _check_size(source, rows, 0, limits)
                    check_memory(source, rows, len(ds.schema), decoded, limits)
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
