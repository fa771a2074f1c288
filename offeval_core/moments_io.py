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
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from offeval_core.engine.grid import Grid, Moments
from offeval_core.errors import InputError, LimitExceeded, MomentsValidationError, UnreadableInput, WrongType
from offeval_core.inputs import file_kind, open_regular
from offeval_core.inputs_parquet import read_parquet_limited
from offeval_core.limits import Limits
from offeval_core.moment_columns import ONLINE_ROLES
from offeval_core.moments_checks import check_grid, check_part, moments_error
from offeval_core.safe_io import atomic_write, check_output
from offeval_core.validation import clip_value, parse_clip

__all__ = [
    "FORMAT", "META_KEY", "is_moments_file", "read_metadata", "read_moments", "write_moments",
]


META_KEY = b"offeval"
FORMAT = "offeval-moments/2"
"""Version 2: centred second moments and co-moments (``m2``, ``co_*``; :mod:`offeval_core.moment_columns`)
instead of version 1's raw sums of squares and products."""
_OLD_FORMATS = {"offeval-moments/1": "raw sums of squares, which lose every digit of a variance when the values "
                                     "share a large offset"}
_ONLINE_COLUMNS = tuple(ONLINE_ROLES)


def _clip_json(c: float):
    return clip_value(c)


def write_moments(moments: Moments, path: str | Path, *, settings: dict | None = None, force: bool = True,
                  inputs=()) -> Path:
    """Write ``moments`` to one Parquet file with the grid and ``settings`` in its metadata.

    The file is written to a temporary file and renamed into place (a failed write leaves any previous
    file intact); ``force=False`` refuses to replace an existing file and ``inputs`` are never overwritten.

    >>> import tempfile, os
    >>> off = pd.DataFrame({"experiment_id": "e", "day": 1, "arm": "control", "segment": "all", "reward": "click",
    ...                     "discount": "pbm", "exposure": "pbm", "clip": math.inf, "policy": "logging",
    ...                     "metric": ["dcg", "ndcg"], "n": 4, "sum": [2.0, 1.0], "m2": [0.5, 0.25]})
    >>> on = off[["experiment_id", "day", "arm", "segment", "reward", "n", "sum", "m2"]].iloc[:1]
    >>> m = Moments(offline=off, online=on, grid=Grid(rewards=("click",), policies=(), clips=(math.inf,)))
    >>> p = write_moments(m, os.path.join(tempfile.mkdtemp(), "m.parquet"), settings={"engine": "duckdb"})
    >>> r = read_moments(p)
    >>> float(r.offline["sum"].iloc[0] / r.offline["n"].iloc[0])   # mean DCG 2 / 4 sessions
    0.5
    """
    if not isinstance(moments, Moments):
        raise WrongType(f"moments must be offeval_core.engine.Moments, got {type(moments).__name__}")
    path = check_output(path, inputs=inputs, force=force)
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
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


_GRID_KEYS = ("rewards", "policies", "discounts", "exposures", "clips", "ndcg_rule")
_KEY_COLUMNS = ("reward",)
_OFFLINE_COLUMNS = ("reward", "discount", "exposure", "clip", "policy", "metric", "n", "sum", "m2")
_bad = moments_error


def _open_parquet(path, source: str, limits: Limits):
    fh = open_regular(path, source=source)
    try:
        if os.fstat(fh.fileno()).st_size == 0:
            raise UnreadableInput(f"{source}: the file is empty (0 bytes); expected a moments file", source=source)
        pf = pq.ParquetFile(fh)
        if pf.metadata.serialized_size > limits.max_bytes:
            raise LimitExceeded(f"{source}: the file's metadata is larger than {limits.max_bytes:,} bytes",
                                source=source)
        return fh, pf
    except (UnreadableInput, LimitExceeded):
        fh.close()
        raise
    except Exception as exc:  # any decoder failure of a corrupt file
        fh.close()
        raise UnreadableInput(f"{source}: cannot read the file: not a valid Parquet file (corrupt or truncated: "
                              f"{type(exc).__name__})", source=source) from None


def read_metadata(path: str | Path, *, name: str | None = None, limits: Limits | None = None) -> dict:
    """The ``offeval`` metadata of a moments file (grid, labels, source, settings), checked for its keys.

    Raises MissingInput, UnreadableInput (not a regular file, not Parquet) or MomentsValidationError (no
    or invalid offeval metadata).
    """
    source = name or str(path)
    fh, pf = _open_parquet(path, source, limits or Limits.from_env())
    with fh:
        raw = (pf.schema_arrow.metadata or {}).get(META_KEY)
    if raw is None:
        raise MomentsValidationError(f"{source}: not an offeval moments file (no '{META_KEY.decode()}' metadata); "
                                     "create one with `offeval reduce LOGS --out FILE`", source=source)
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _bad(source, "its metadata is not JSON") from None
    if not isinstance(meta, dict):
        raise _bad(source, "its metadata is not a JSON object")
    fmt = meta.get("format")
    if isinstance(fmt, str) and fmt in _OLD_FORMATS:
        raise MomentsValidationError(f"{source}: written by an earlier offeval (format {fmt!r}: {_OLD_FORMATS[fmt]}); "
                                     f"compute it again with `offeval reduce LOGS --out FILE` (format {FORMAT!r})",
                                     source=source)
    if fmt != FORMAT:
        shown = repr(fmt[:40]) if isinstance(fmt, str) and fmt.isprintable() else f"of JSON type {type(fmt).__name__}"
        raise MomentsValidationError(f"{source}: unsupported moments format {shown}, expected {FORMAT!r}",
                                     source=source)
    grid = meta.get("grid")
    if not isinstance(grid, dict) or any(k not in grid for k in _GRID_KEYS):
        raise _bad(source, f"its metadata lacks the grid ({', '.join(_GRID_KEYS)})")
    for k in _GRID_KEYS[:4]:
        if not isinstance(grid[k], list) or not all(isinstance(x, str) for x in grid[k]):
            raise _bad(source, f"grid '{k}' must be a list of names")
    if not grid["rewards"] or not grid["discounts"] or not grid["exposures"]:
        raise _bad(source, "the grid must name at least one reward, discount and exposure model")
    if not isinstance(grid["clips"], list) or not grid["clips"] or not all(_clip_ok(c) for c in grid["clips"]):
        raise _bad(source, "grid 'clips' must be a list of numbers ≥ 1 or 'inf'")
    if grid["ndcg_rule"] not in ("zero", "drop"):
        raise _bad(source, "grid 'ndcg_rule' must be 'zero' or 'drop'")
    labels = meta.get("discount_labels", {})
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise _bad(source, "'discount_labels' must map names to labels")
    if not isinstance(meta.get("source", ""), str) or not isinstance(meta.get("settings", {}), dict):
        raise _bad(source, "'source' must be text and 'settings' an object")
    return meta


def _clip_ok(c) -> bool:
    if c == "inf":
        return True
    return isinstance(c, int | float) and not isinstance(c, bool) and math.isfinite(c) and c >= 1


def is_moments_file(path: str | Path) -> bool:
    """Whether ``path`` is a Parquet file that claims to be a moments file: it has the ``offeval`` metadata of
    :func:`write_moments`, or the columns of one (``kind``, ``n``, ``sum``, ``m2``, ``metric``). Reading such
    a file as a moments file then reports what is wrong with it (edited metadata is a moments-file problem,
    not a logs one); False for anything else, including files that cannot be read (reading them as logs
    then says why)."""
    if file_kind(str(path)) != "parquet":
        return False
    try:
        fh, pf = _open_parquet(path, str(path), Limits.from_env())
    except InputError:
        return False
    with fh:
        try:
            names = set(pf.schema_arrow.names)
            meta = pf.schema_arrow.metadata or {}
        except Exception:  # a footer pyarrow cannot turn into a schema
            return False
    return META_KEY in meta or ({"kind", "n", "sum", "metric"} <= names and bool({"m2", "sumsq"} & names))


def read_moments(path: str | Path, *, name: str | None = None, limits: Limits | None = None) -> Moments:
    """Read a moments file written by :func:`write_moments` (or ``offeval reduce``), validated.

    Raises
    ------
    MissingInput, UnreadableInput, LimitExceeded
        The file is missing, not a regular Parquet file, or over the limits.
    MomentsValidationError
        Metadata missing or malformed (or an earlier format), missing columns, or any invariant of
        :mod:`offeval_core.moments_checks` broken: counts that are not positive integers, non-finite or negative
        sums of non-negative values, negative second moments (Σ(x − x̄)² < 0), co-moments beyond
        Cauchy-Schwarz, repeated or missing rows, offline n not the online n.
    """
    source = name or str(path)
    limits = limits or Limits.from_env()
    meta = read_metadata(path, name=source, limits=limits)
    frame = read_parquet_limited(path, source=source, limits=limits)
    g = meta["grid"]
    grid = Grid(rewards=tuple(g["rewards"]), policies=tuple(g["policies"]), discounts=tuple(g["discounts"]),
                exposures=tuple(g["exposures"]), clips=tuple(parse_clip(c) for c in g["clips"]),
                ndcg_rule=g["ndcg_rule"])
    if "kind" not in frame.columns:
        raise _bad(source, "no 'kind' column (offline / online rows)")
    is_off, is_on = ((frame["kind"] == k).to_numpy(dtype=bool, na_value=False) for k in ("offline", "online"))
    if not (is_off | is_on).all():
        raise _bad(source, "column 'kind' must be 'offline' or 'online'", column="kind")
    n_off = int(is_off.sum())
    if is_off[:n_off].all():  # written offline rows first (write_moments): two slices, no row copied
        off, on = frame.iloc[:n_off], frame.iloc[n_off:]
    else:
        off, on = frame[is_off], frame[is_on]
    off = off.drop(columns="kind").reset_index(drop=True)
    on = on.drop(columns="kind").reset_index(drop=True)
    if off.empty:
        raise _bad(source, "no offline rows")
    missing = [c for c in _OFFLINE_COLUMNS if c not in off.columns]
    missing += [c for c in ("reward", *_ONLINE_COLUMNS) if c not in on.columns and c not in missing]
    if missing:
        raise _bad(source, f"missing column(s) {', '.join(missing)}")
    keys = [c for c in ("experiment_id", "day", "arm", "segment") if c in on.columns]
    on = on[[*keys, "reward", *_ONLINE_COLUMNS]]
    for part, df in (("offline", off), ("online", on)):
        check_part(df, part, source, ndcg_rule=grid.ndcg_rule)
    for df in (off, on):
        df["n"] = df["n"].astype("int64")
    clips = pd.to_numeric(off["clip"], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~(clips >= 1))
    if len(bad):
        raise _bad(source, f"offline column 'clip' must be ≥ 1 or inf; rows {', '.join(str(i + 1) for i in bad[:5])}",
                   column="clip", rows=bad[:5] + 1)
    check_grid(off, on, grid, source)
    return Moments(offline=off, online=on, grid=grid, discount_labels=dict(meta.get("discount_labels", {})),
                   source=meta.get("source", ""))
