"""Hostile and broken input files shared by the security, fuzz and resource tests.

Every builder writes into a given directory and returns the path; the files are small (kilobytes) except
where the point is size, and then the size is in the decompressed stream, not on disk.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SECRET = "S3CRET-TOKEN-7f1c"
"""A marker written into files whose content must never appear in a message."""


def small_logs(n_sessions: int = 30, seed: int = 0) -> pd.DataFrame:
    """Valid logs: string session ids with leading zeros, two arms, two days, one target policy."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_sessions):
        length = int(rng.integers(1, 5))
        arm = "treatment" if s % 2 else "control"
        for r in range(1, length + 1):
            rows.append({"session_id": f"{s:03d}", "rank": r, "like": int(rng.random() < 0.3),
                         "watch": float(rng.random()), "arm": arm, "day": 1 + s % 2, "experiment_id": "e1",
                         "rank__treatment": length + 1 - r})
    return pd.DataFrame(rows)


def write_csv(directory: Path, name: str, text: str | bytes) -> Path:
    path = Path(directory) / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def gzip_bomb(directory: Path, *, rows: int = 40_000_000, name: str = "bomb.csv.gz") -> Path:
    """A small gzip file that decompresses to ``rows`` × 6 bytes of CSV (240 MB by default, ~0.5 MB on disk)."""
    path = Path(directory) / name
    line = b"1,1,0\n"
    chunk = line * 200_000
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b"session_id,rank,like\n")
        for _ in range(rows // 200_000):
            fh.write(chunk)
    return path


def parquet_bomb(path: Path, *, rows: int = 19_000_000, names=("session_id", "rank", "like")) -> Path:
    """A Parquet file of ``rows`` rows of three numbers, delta-encoded: about 0.4 MB on disk, 456 MB decoded
    (the footer's sizes are small too)."""
    i = np.arange(rows, dtype=np.int64)
    table = pa.table({names[0]: i // 10, names[1]: i % 10 + 1, names[2]: np.zeros(rows)})
    pq.write_table(table, path, compression="zstd", use_dictionary=False,
                   column_encoding={names[0]: "DELTA_BINARY_PACKED", names[1]: "DELTA_BINARY_PACKED"})
    return path


def wide_csv(directory: Path, *, columns: int = 10_000, rows: int = 20) -> Path:
    path = Path(directory) / f"wide{columns}.csv"
    header = ",".join(["session_id", "rank", "click", *(f"c{i}" for i in range(columns))])
    body = "\n".join(",".join([str(s), "1", str(s % 2), *(["0"] * columns)]) for s in range(rows))
    path.write_text(header + "\n" + body + "\n")
    return path


def big_rank_csv(directory: Path, *, rank: int = 2**31) -> Path:
    path = Path(directory) / f"rank{rank}.csv"
    path.write_text(f"session_id,rank,like,rank__treatment\n1,1,0,1\n1,{rank},1,2\n2,1,1,1\n")
    return path


def sparse_file(directory: Path, *, size: int = 8 * 1024**3, name: str = "zeros.csv") -> Path:
    """A /dev/zero-like regular file: ``size`` bytes of NUL on disk as a sparse file."""
    path = Path(directory) / name
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def moments_file(directory: Path, name: str = "moments.parquet") -> Path:
    """A valid moments file (``offeval reduce`` format) from :func:`small_logs`."""
    from offeval_core.engine import Grid, reduce
    from offeval_core.logs import read_logs
    from offeval_core.moments_io import write_moments

    logs = read_logs(small_logs())
    m = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("log2",), exposures=("log2",),
                          clips=(1.0, math.inf)))
    return write_moments(m, Path(directory) / name, settings={"engine": "test"})


def rewrite_moments(src: Path, dst: Path, *, frame=None, meta=None, drop_meta: bool = False,
                    raw_meta: bytes | None = None) -> Path:
    """Copy a moments file with its frame changed by ``frame(df)`` and/or metadata by ``meta(dict)``."""
    table = pq.read_table(src)
    md = dict(table.schema.metadata or {})
    df = table.to_pandas()
    if frame is not None:
        df = frame(df)
    doc = json.loads(md[b"offeval"])
    if meta is not None:
        doc = meta(doc)
    md[b"offeval"] = json.dumps(doc).encode() if raw_meta is None else raw_meta
    if drop_meta:
        md.pop(b"offeval")
    out = pa.Table.from_pandas(df, preserve_index=False)
    out = out.replace_schema_metadata({**(out.schema.metadata or {}), **md} if not drop_meta else
                                      {k: v for k, v in {**(out.schema.metadata or {}), **md}.items()
                                       if k != b"offeval"})
    pq.write_table(out, dst)
    return dst


def fifo(directory: Path, name: str) -> Path:
    path = Path(directory) / name
    os.mkfifo(path)
    return path
