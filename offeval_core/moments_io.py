"""Moments files: one small Parquet file holding every per-group moment of a variant grid.

Everything the dashboard and ``offeval report`` show, except bootstraps, is exact from the moments
(DESIGN.md "Moments are enough"), so a moments file computed where the logs live (``offeval reduce``,
on DuckDB or a Spark cluster) replaces the logs downstream. Layout: the rows of ``Moments.offline``
(``kind = "offline"``) followed by those of ``Moments.online`` (``kind = "online"``; variant columns
empty), and under the Parquet metadata key ``offeval`` a JSON object with the grid, discount labels,
source and the settings of the run (engine, memory limit, timings…).
"""

from __future__ import annotations

import json
import math  # noqa: F401  (the doctest uses math.inf)
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from offeval_core.engine import Grid, Moments
from offeval_core.validation import clip_value, parse_clip

META_KEY = b"offeval"
FORMAT = "offeval-moments/1"
_ONLINE_COLUMNS = ("n", "sum", "sumsq")


def _clip_json(c: float):
    return clip_value(c)


def write_moments(moments: Moments, path: str | Path, *, settings: dict | None = None) -> Path:
    """Write ``moments`` to one Parquet file with the grid and ``settings`` in its metadata.

    >>> import tempfile, os
    >>> off = pd.DataFrame({"experiment_id": ["e"], "day": [1], "arm": ["control"], "segment": ["all"],
    ...                     "reward": ["click"], "discount": ["pbm"], "exposure": ["pbm"], "clip": [math.inf],
    ...                     "policy": ["logging"], "metric": ["dcg"], "n": [4], "sum": [2.0], "sumsq": [1.5]})
    >>> on = off[["experiment_id", "day", "arm", "segment", "reward", "n", "sum", "sumsq"]]
    >>> m = Moments(offline=off, online=on, grid=Grid(rewards=("click",), policies=(), clips=(math.inf,)))
    >>> p = write_moments(m, os.path.join(tempfile.mkdtemp(), "m.parquet"), settings={"engine": "duckdb"})
    >>> r = read_moments(p)
    >>> float(r.offline["sum"].iloc[0] / r.offline["n"].iloc[0])   # mean DCG 2 / 4 sessions
    0.5
    """
    if not isinstance(moments, Moments):
        raise TypeError(f"moments must be offeval_core.engine.Moments, got {type(moments).__name__}")
    path = Path(path)
    off = moments.offline.assign(kind="offline")
    on = moments.online.assign(kind="online")
    frame = pd.concat([off, on], ignore_index=True)
    frame = frame[["kind", *[c for c in frame.columns if c != "kind"]]]
    g = moments.grid
    meta = {
        "format": FORMAT,
        "grid": {"rewards": list(g.rewards), "policies": list(g.policies), "discounts": list(g.discounts),
                 "exposures": list(g.exposures), "clips": [_clip_json(c) for c in g.clips],
                 "ndcg_rule": g.ndcg_rule},
        "discount_labels": dict(moments.discount_labels),
        "source": moments.source,
        "settings": settings or {},
    }
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: json.dumps(meta).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")
    return path


def read_metadata(path: str | Path) -> dict:
    """The ``offeval`` metadata of a moments file (grid, labels, source, settings)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path}: not a Parquet file ({str(exc).splitlines()[0]})") from None
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise ValueError(f"{path}: not an offeval moments file (no '{META_KEY.decode()}' metadata); "
                         "create one with `offeval reduce LOGS --out FILE`")
    meta = json.loads(raw)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: unsupported moments format {meta.get('format')!r}, expected {FORMAT!r}")
    return meta


def is_moments_file(path: str | Path) -> bool:
    """Whether ``path`` is a Parquet file written by :func:`write_moments`."""
    try:
        read_metadata(path)
    except (ValueError, FileNotFoundError):
        return False
    return True


def read_moments(path: str | Path) -> Moments:
    """Read a moments file written by :func:`write_moments` (or ``offeval reduce``)."""
    meta = read_metadata(path)
    frame = pq.read_table(path).to_pandas()
    g = meta["grid"]
    grid = Grid(rewards=tuple(g["rewards"]), policies=tuple(g["policies"]), discounts=tuple(g["discounts"]),
                exposures=tuple(g["exposures"]), clips=tuple(parse_clip(c) for c in g["clips"]),
                ndcg_rule=g["ndcg_rule"])
    off = frame[frame["kind"] == "offline"].drop(columns="kind").reset_index(drop=True)
    on = frame[frame["kind"] == "online"].drop(columns="kind").reset_index(drop=True)
    keys = [c for c in ("experiment_id", "day", "arm", "segment") if c in on.columns]
    on = on[[*keys, "reward", *_ONLINE_COLUMNS]]
    for df in (off, on):
        df["n"] = df["n"].astype("int64")
    return Moments(offline=off, online=on, grid=grid, discount_labels=dict(meta.get("discount_labels", {})),
                   source=meta.get("source", ""))
