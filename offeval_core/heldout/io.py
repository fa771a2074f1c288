"""Readers for qrels (user, item, relevance) and runs (user, item, score or rank).

Formats (DESIGN.md, "Log schema"; the layouts trec_eval, ranx and ir_measures read):

- TREC qrels: whitespace-separated ``qid iter doc rel`` (the iteration field is ignored);
- TREC run: whitespace-separated ``qid Q0 doc rank score tag`` — ordered by ``score`` like trec_eval, the
  file's rank field is not used; the run name is the ``tag`` (one run per tag);
- CSV / Parquet tables with columns (aliases accepted, case-insensitive)
  user: ``user``, ``user_id``, ``qid``, ``query``, ``query_id``;
  item: ``item``, ``item_id``, ``doc``, ``docno``, ``doc_id``;
  qrels: ``relevance`` / ``rel`` / ``label``;
  runs: ``score`` and/or ``rank``, optionally ``run`` / ``tag`` / ``model`` naming several runs in one table.

User and item ids are kept as strings. Lines starting with ``#`` and blank lines of TREC files are skipped.

Files are read through the input boundary (:mod:`offeval_core.inputs`): regular files only (no FIFO, device
or directory), within the limits of :class:`~offeval_core.limits.Limits` (bytes, rows, columns, the memory
the data decodes to). Every problem is an :class:`~offeval_core.errors.InputError`
(:class:`~offeval_core.errors.HeldoutValidationError` for the layout) naming the file, the column and the
first offending lines or rows, never their content.

**Ordering and ties (documented rule).** Within a user, a run is ordered by score descending, ties broken
by item id ascending (string order). A run given with ranks only is ordered by rank ascending, ties broken
by item id. The resulting 1-based positions are the ``rank`` column every metric uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from offeval_core.errors import HeldoutValidationError, MissingInput, SpecError, WrongType
from offeval_core.inputs import read_csv_limited, text_lines
from offeval_core.inputs_parquet import read_parquet_limited
from offeval_core.limits import Limits

__all__ = [
    "FORMATS", "ITEM_ALIASES", "REL_ALIASES", "RUN_NAME_ALIASES", "USER_ALIASES", "Qrels", "Run",
    "qrels_from_frame", "read_qrels", "read_run", "read_runs", "run_from_frame",
]


USER_ALIASES = ("user", "user_id", "qid", "query", "query_id")
ITEM_ALIASES = ("item", "item_id", "doc", "docno", "doc_id")
REL_ALIASES = ("relevance", "rel", "label")
RUN_NAME_ALIASES = ("run", "tag", "model")
FORMATS = ("auto", "trec", "csv", "parquet")


@dataclass(frozen=True, eq=False)
class Qrels:
    """Relevance judgments: ``frame`` has columns ``user`` (str), ``item`` (str), ``relevance`` (float ≥ 0)."""

    frame: pd.DataFrame
    source: str = "<table>"

    @property
    def users(self) -> np.ndarray:
        return self.frame["user"].unique()


@dataclass(frozen=True, eq=False)
class Run:
    """One model's ranked lists: ``frame`` has ``user``, ``item`` (str), ``score`` (float, NaN when the
    run gave ranks only) and ``rank`` (1-based position after the tie rule), sorted by (user, rank)."""

    name: str
    frame: pd.DataFrame
    source: str = "<table>"
    meta: dict = field(default_factory=dict)

    @property
    def users(self) -> np.ndarray:
        return self.frame["user"].unique()


def _detect_format(path: Path, fmt: str) -> str:
    if fmt not in FORMATS:
        raise SpecError(f"fmt must be one of {', '.join(map(repr, FORMATS))}; got {fmt!r}", source="fmt")
    if fmt != "auto":
        return fmt
    low = path.name.lower()
    if low.endswith((".csv", ".tsv", ".csv.gz", ".tsv.gz", ".csv.bz2")):
        return "csv"
    if low.endswith((".parquet", ".pq")):
        return "parquet"
    return "trec"


def _bad(source: str, message: str, **kw) -> HeldoutValidationError:
    return HeldoutValidationError(f"{source}: {message}", source=source, **kw)


def _read_trec_lines(path: Path, n_fields: int, layout: str, keep: tuple[int, ...], *, source: str,
                     limits: Limits) -> tuple[list[list[str]], list[int]]:
    """The ``keep`` fields of every judgment / ranking line (columns), and the lines' 1-based numbers."""
    cols: list[list[str]] = [[] for _ in keep]
    lines: list[int] = []
    for no, line in enumerate(text_lines(path, source=source, limits=limits, fields=len(keep)), start=1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        parts = s.split()
        if len(parts) != n_fields:
            raise _bad(source, f"line {no}: expected {n_fields} whitespace-separated fields '{layout}', got "
                               f"{len(parts)}", rows=[no], expected=layout)
        for c, k in zip(cols, keep, strict=True):
            c.append(parts[k])
        lines.append(no)
    if not lines:
        raise _bad(source, f"the file is empty (no '{layout}' lines)", expected=layout)
    return cols, lines


def _read_table(path: Path, fmt: str, *, source: str, limits: Limits) -> pd.DataFrame:
    if fmt == "csv":
        df = read_csv_limited(path, source=source, limits=limits, as_text=True)
    else:
        df = read_parquet_limited(path, source=source, limits=limits)
    if df.shape[0] == 0:
        raise _bad(source, "the file is empty (a header but no rows)")
    return df


def _pick(df: pd.DataFrame, aliases: tuple[str, ...], *, what: str, source: str, required: bool = True,
          from_file: bool = False):
    lower = {str(c).lower(): c for c in df.columns}
    for a in aliases:
        if a in lower:
            return lower[a]
    if required:
        found = (f"its {df.shape[1]} column(s) have none of these names" if from_file
                 else f"found columns {', '.join(map(str, df.columns))}")  # a file's header is its content
        raise _bad(source, f"missing {what} column (expected one of {', '.join(aliases)}); {found}",
                   expected=", ".join(aliases))
    return None


def _numeric(values: pd.Series, *, source: str, column: str, row_labels) -> np.ndarray:
    """Parse a column as float; raise naming the first offending rows (non-numeric or missing)."""
    num = pd.to_numeric(pd.Series(np.asarray(values, dtype=object)), errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(num))
    if bad.size:
        shown = ", ".join(str(row_labels[i]) for i in bad[:3])
        raise _bad(source, f"column '{column}' must be numeric and finite; {bad.size} bad value(s), first: {shown}",
                   column=column)
    return num


def _check_duplicates(df: pd.DataFrame, *, source: str, what: str, row_labels) -> None:
    dup = df.duplicated(subset=["user", "item"], keep="first").to_numpy()
    if dup.any():
        idx = np.flatnonzero(dup)
        shown = ", ".join(str(row_labels[i]) for i in idx[:3])
        raise _bad(source, f"{idx.size} duplicate (user, item) pair(s) in the {what}; each item may appear once per "
                           f"user; first: {shown}")


def qrels_from_frame(df: pd.DataFrame, *, source: str = "<table>", row_labels=None, from_file: bool = False) -> Qrels:
    """Validate a (user, item, relevance) table (column aliases accepted) and build :class:`Qrels`."""
    if not isinstance(df, pd.DataFrame):
        raise WrongType(f"qrels must be a pandas DataFrame or a path, got {type(df).__name__}")
    if df.shape[0] == 0:
        raise _bad(source, "the qrels table is empty")
    if row_labels is None:
        row_labels = [f"row {i + 1}" for i in range(df.shape[0])]
    ucol = _pick(df, USER_ALIASES, what="user", source=source, from_file=from_file)
    icol = _pick(df, ITEM_ALIASES, what="item", source=source, from_file=from_file)
    rcol = _pick(df, REL_ALIASES, what="relevance", source=source, from_file=from_file)
    rel = _numeric(df[rcol], source=source, column=str(rcol), row_labels=row_labels)
    neg = np.flatnonzero(rel < 0)
    if neg.size:
        shown = ", ".join(str(row_labels[i]) for i in neg[:3])
        raise _bad(source, f"column '{rcol}' must be ≥ 0 (graded relevance, 0 = not relevant); {neg.size} negative "
                           f"value(s), first: {shown}", column=str(rcol))
    out = pd.DataFrame(
        {"user": df[ucol].astype(str).to_numpy(), "item": df[icol].astype(str).to_numpy(), "relevance": rel}
    )
    _check_duplicates(out, source=source, what="qrels", row_labels=row_labels)
    return Qrels(out, source)


def run_from_frame(df: pd.DataFrame, *, name: str, source: str = "<table>", row_labels=None,
                   from_file: bool = False) -> Run:
    """Validate a (user, item, score and/or rank) table and build a :class:`Run` with the tie rule applied.

    >>> r = run_from_frame(pd.DataFrame({"user": ["u", "u", "u"], "item": ["b", "a", "c"],
    ...                                  "score": [0.5, 0.5, 0.9]}), name="m")
    >>> r.frame["item"].tolist()  # c has the top score; a and b tie and go in item-id order
    ['c', 'a', 'b']
    """
    if not isinstance(df, pd.DataFrame):
        raise WrongType(f"run must be a pandas DataFrame or a path, got {type(df).__name__}")
    if df.shape[0] == 0:
        raise _bad(source, f"run {name!r} is empty")
    if row_labels is None:
        row_labels = [f"row {i + 1}" for i in range(df.shape[0])]
    ucol = _pick(df, USER_ALIASES, what="user", source=source, from_file=from_file)
    icol = _pick(df, ITEM_ALIASES, what="item", source=source, from_file=from_file)
    scol = _pick(df, ("score",), what="score", source=source, required=False)
    kcol = _pick(df, ("rank",), what="rank", source=source, required=False)
    if scol is None and kcol is None:
        found = (f"its {df.shape[1]} column(s) have neither name" if from_file
                 else f"found columns {', '.join(map(str, df.columns))}")
        raise _bad(source, f"missing score or rank column in run {name!r}; {found}", expected="score and/or rank")
    out = pd.DataFrame({"user": df[ucol].astype(str).to_numpy(), "item": df[icol].astype(str).to_numpy()})
    if scol is not None:
        out["score"] = _numeric(df[scol], source=source, column=str(scol), row_labels=row_labels)
        key = -out["score"].to_numpy()
    else:
        rk = _numeric(df[kcol], source=source, column=str(kcol), row_labels=row_labels)
        bad = np.flatnonzero((rk < 1) | (rk != np.round(rk)))
        if bad.size:
            shown = ", ".join(str(row_labels[i]) for i in bad[:3])
            raise _bad(source, f"column '{kcol}' must hold positive integers (1 = top); first: {shown}",
                       column=str(kcol))
        out["score"] = np.nan
        key = rk
    _check_duplicates(out, source=source, what=f"run {name!r}", row_labels=row_labels)
    out["_key"] = key
    out = out.sort_values(["user", "_key", "item"], kind="mergesort").drop(columns="_key").reset_index(drop=True)
    out["rank"] = out.groupby("user", sort=False).cumcount().to_numpy() + 1
    return Run(str(name), out, source)


def _path(path_or_frame, what: str) -> Path:
    if not str(path_or_frame).strip():
        raise MissingInput(f"no {what} file named: the path is empty", source="")
    return Path(path_or_frame)


def read_qrels(path_or_frame, *, fmt: str = "auto", source: str | None = None, limits: Limits | None = None) -> Qrels:
    """Read qrels from a TREC file (``qid iter doc rel``), a CSV / Parquet table or a DataFrame; a file goes
    through the input boundary within ``limits`` (default: from the environment) and is named ``source``
    (default: the path) in messages."""
    if isinstance(path_or_frame, Qrels):
        return path_or_frame
    if isinstance(path_or_frame, pd.DataFrame):
        return qrels_from_frame(path_or_frame)
    path = _path(path_or_frame, "qrels")
    source = source or str(path)
    limits = limits or Limits.from_env()
    kind = _detect_format(path, fmt)
    if kind == "trec":
        (user, item, rel), lines = _read_trec_lines(path, 4, "qid iter doc rel", (0, 2, 3), source=source,
                                                   limits=limits)
        df = pd.DataFrame({"user": user, "item": item, "relevance": rel})
        return qrels_from_frame(df, source=source, row_labels=[f"line {n}" for n in lines], from_file=True)
    df = _read_table(path, kind, source=source, limits=limits)
    return qrels_from_frame(df, source=source, row_labels=[f"row {i + 1}" for i in range(df.shape[0])],
                            from_file=True)


def read_runs(path_or_frame, *, fmt: str = "auto", name: str | None = None, source: str | None = None,
              limits: Limits | None = None) -> list[Run]:
    """Read every run in a TREC run file (one per ``tag``), a CSV / Parquet table (one per value of a
    ``run`` / ``tag`` / ``model`` column, else one run named after the file) or a DataFrame; a file goes
    through the input boundary within ``limits`` and is named ``source`` (default: the path) in messages."""
    if isinstance(path_or_frame, Run):
        return [path_or_frame]
    from_file = not isinstance(path_or_frame, pd.DataFrame)
    if not from_file:
        rows_df, source, labels = path_or_frame, "<table>", None
        default = name or "run"
    else:
        path = _path(path_or_frame, "run")
        source = source or str(path)
        limits = limits or Limits.from_env()
        kind = _detect_format(path, fmt)
        default = name or Path(source).stem or "run"
        if kind == "trec":
            (user, item, score, tag), lines = _read_trec_lines(path, 6, "qid Q0 doc rank score tag", (0, 2, 4, 5),
                                                               source=source, limits=limits)
            rows_df = pd.DataFrame({"user": user, "item": item, "score": score, "run": tag})
            labels = [f"line {n}" for n in lines]
        else:
            rows_df = _read_table(path, kind, source=source, limits=limits)
            labels = [f"row {i + 1}" for i in range(rows_df.shape[0])]
    if labels is None:
        labels = [f"row {i + 1}" for i in range(rows_df.shape[0])]
    rcol = _pick(rows_df, RUN_NAME_ALIASES, what="run name", source=source, required=False)
    if rcol is None or name is not None:
        return [run_from_frame(rows_df, name=default, source=source, row_labels=labels, from_file=from_file)]
    runs = []
    names = rows_df[rcol].astype(str).to_numpy()
    for run_name in pd.unique(names):
        sel = np.flatnonzero(names == run_name)
        sub = rows_df.iloc[sel].drop(columns=rcol).reset_index(drop=True)
        runs.append(run_from_frame(sub, name=run_name, source=source, row_labels=[labels[i] for i in sel],
                                   from_file=from_file))
    return runs


def read_run(path_or_frame, *, fmt: str = "auto", name: str | None = None, source: str | None = None,
             limits: Limits | None = None) -> Run:
    """Read exactly one run (see :func:`read_runs`); raise if the source holds several."""
    runs = read_runs(path_or_frame, fmt=fmt, name=name, source=source, limits=limits)
    if len(runs) != 1:
        raise HeldoutValidationError(
            f"expected one run, found {len(runs)} ({', '.join(r.name for r in runs[:5])}); use read_runs",
            source=str(source or "")
        )
    return runs[0]
