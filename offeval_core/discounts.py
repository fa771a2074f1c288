"""Discount (position-bias) models: rank → P(V = 1 | R = rank), vectorised over rank arrays.

KDD'24 Sec. 4 (Asm. 2, Eq. 6): the exposure of an item is the probability that the user views its rank.
A cut-off ``@n`` sets P = 0 beyond rank n, which replaces DCG@n (KDD'24 Sec. 4, after Eq. 6).

Specs (the same strings on the command line, in the dashboard and in the URL):
``log2`` · ``reciprocal`` · ``exponential:0.9`` · ``pbm`` (learnt from the logs) · ``table:FILE.csv`` —
each optionally followed by ``@n``, e.g. ``log2@10``.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from offeval_core.arms import offline_rows
from offeval_core.errors import InputError, LimitExceeded, MissingInput, SpecError
from offeval_core.inputs import data_file, read_csv_limited
from offeval_core.limits import Limits

__all__ = [
    "KINDS", "PBM_FLOOR", "DiscountModel", "check_exposure_cutoff", "learn_pbm", "parse_discount", "read_discount_table",
    "survival_curve", "survival_from_counts",
]

PBM_FLOOR = 1e-4
"""Default floor of the learnt position-bias curve: 1 / P(V | R) is then at most 10 000."""

KINDS = ("log2", "reciprocal", "exponential", "pbm", "table")


@dataclass(frozen=True)
class DiscountModel:
    """A position-bias model. ``values`` holds the curve for ranks 1..len(values) of table-like models.

    For ``pbm`` ranks beyond the table get the floor; for ``table`` they get 0 (never viewed).
    """

    kind: str
    param: float | None = None
    cutoff: int | None = None
    values: tuple[float, ...] | None = None
    source: str | None = None

    @property
    def spec(self) -> str:
        base = {
            "exponential": f"exponential:{self.param:g}" if self.param is not None else "exponential",
            "table": f"table:{self.source}",
        }.get(self.kind, self.kind)
        return base + (f"@{self.cutoff}" if self.cutoff is not None else "")

    @property
    def label(self) -> str:
        """Human label for legends: e.g. ``1/log2(r+1)``."""
        base = {
            "log2": "1/log₂(r+1)",
            "reciprocal": "1/r",
            "exponential": f"{self.param:g}^(r−1)" if self.param is not None else "p^(r−1)",
            "pbm": "learnt PBM (session survival)",
            "table": f"table {Path(self.source or '').name}",
        }[self.kind]
        return base + (f", cut at {self.cutoff}" if self.cutoff is not None else "")

    def __call__(self, ranks) -> np.ndarray:
        """P(V = 1 | R = r) for an array of 1-based ranks (ranks < 1, e.g. -1 = not shown, give 0).

        >>> round(float(parse_discount("log2")(np.array([3]))[0]), 4)  # 1 / log2(4) = 0.5
        0.5
        """
        r = np.asarray(ranks, dtype=np.float64)
        valid = r >= 1
        rr = np.where(valid, r, 1.0)
        if self.kind == "log2":
            out = 1.0 / np.log2(rr + 1.0)
        elif self.kind == "reciprocal":
            out = 1.0 / rr
        elif self.kind == "exponential":
            out = np.power(self.param, rr - 1.0)
        else:
            table = np.asarray(self.values, dtype=np.float64)
            idx = rr.astype(np.int64) - 1
            inside = idx < len(table)
            beyond = self.param if self.kind == "pbm" else 0.0  # pbm: no session reaches it → floor
            out = np.where(inside, table[np.minimum(idx, len(table) - 1)], beyond)
        if self.cutoff is not None:
            out = np.where(rr <= self.cutoff, out, 0.0)
        return np.where(valid, out, 0.0)

    def table(self, max_rank: int) -> np.ndarray:
        """The curve for ranks 1..max_rank as an array (index 0 = rank 1)."""
        return self(np.arange(1, max_rank + 1))

    @classmethod
    def learnt(cls, curve, *, floor: float = PBM_FLOOR, cutoff: int | None = None) -> DiscountModel:
        """The ``pbm`` model of a learnt curve P̂(V = 1 | R = r), r = 1..len(curve), floored at ``floor``.

        Ranks beyond the curve get the floor (no session reached them). The curve comes from
        :func:`learn_pbm` (in-memory logs) or :func:`survival_from_counts` (a session-length histogram).

        >>> m = DiscountModel.learnt([1.0, 0.5, 0.0], floor=0.01)
        >>> m(np.array([1, 3, 9])).tolist()  # rank 3 and ranks beyond the curve get the floor 0.01
        [1.0, 0.01, 0.01]
        """
        if not 0 < floor <= 1:
            raise SpecError(f"floor must be in (0, 1], got {floor!r}")
        values = np.maximum(np.asarray(curve, dtype=np.float64), floor)
        if values.ndim != 1 or values.size == 0 or not np.isfinite(values).all() or (values > 1).any():
            raise InputError("a learnt position-bias curve must be a non-empty sequence of probabilities in [0, 1]")
        return cls("pbm", param=floor, cutoff=cutoff, values=tuple(values.tolist()))


def check_exposure_cutoff(exposure: DiscountModel) -> None:
    """Refuse a cut-off on an exposure model D0 (a curve, not a table): logged items were viewed, so D0 is the
    probability of viewing a logged rank, and a cut-off belongs to the target discount D. One rule for the reduce
    and the importance weights."""
    if exposure.kind != "table" and exposure.cutoff is not None:
        raise SpecError(f"exposure model {exposure.spec!r} has a cut-off; a cut-off belongs to the target discount "
                        "D, not to the exposure model D0 of logged (viewed) ranks")


_CUTOFF = re.compile(r"(.*)@([^@/]*)")
"""A spec's cut-off: ``model@n`` (the model's text cannot hold '@' and a table file's path cannot end in one)."""


def has_cutoff(spec: str) -> bool:
    """Whether a discount spec ends in a cut-off ``@n`` (then it can be the target discount D, never an exposure
    model D0 at m = ∞: logged items were viewed).

    >>> has_cutoff("log2@10"), has_cutoff("exponential:0.8"), has_cutoff(" pbm@3 ")
    (True, False, True)
    """
    return _CUTOFF.fullmatch(spec.strip()) is not None


def parse_discount(spec: str, *, logs=None, floor: float = PBM_FLOOR, curve=None) -> DiscountModel:
    """Build a discount model from its spec string.

    ``pbm`` is learnt from ``logs`` (see :func:`learn_pbm`), so it needs them, or the learnt ``curve``
    itself (e.g. from a session-length histogram; see :meth:`DiscountModel.learnt`).

    >>> parse_discount("exponential:0.8@3")(np.array([1, 2, 3, 4])).round(2).tolist()
    [1.0, 0.8, 0.64, 0.0]
    """
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError(
            f"discount must be a spec like 'log2', 'reciprocal', 'exponential:0.9', 'pbm', "
            f"'table:FILE.csv' (optionally '@n'), got {spec!r}"
        )
    text = spec.strip()
    cutoff = None
    match = _CUTOFF.fullmatch(text)
    if match:
        text, cut = match.group(1), match.group(2)
        if not re.fullmatch(r"[0-9]{1,9}", cut.strip()) or int(cut) < 1:  # str.isdigit() also takes '²'
            raise SpecError(f"discount cut-off must be a positive integer after '@', got {spec!r} (digits 0-9, "
                            "e.g. 'log2@10')")
        cutoff = int(cut)
    kind, _, arg = text.partition(":")
    kind = kind.strip().lower()
    if kind == "log2" and not arg:
        return DiscountModel("log2", cutoff=cutoff)
    if kind == "reciprocal" and not arg:
        return DiscountModel("reciprocal", cutoff=cutoff)
    if kind == "exponential":
        try:
            p = float(arg)
        except ValueError:
            raise SpecError(f"exponential discount needs a parameter p in (0, 1], e.g. 'exponential:0.9', got {spec!r}") from None
        if not 0 < p <= 1:
            raise SpecError(f"exponential discount parameter must be in (0, 1], got {p!r} in {spec!r}")
        return DiscountModel("exponential", param=p, cutoff=cutoff)
    if kind == "pbm" and not arg:
        if curve is None and logs is None:
            raise SpecError("discount 'pbm' is learnt from the logs, so logs must be given")
        return DiscountModel.learnt(learn_pbm(logs, floor=floor) if curve is None else curve, floor=floor,
                                    cutoff=cutoff)
    if kind == "table" and arg:
        return DiscountModel("table", cutoff=cutoff, values=tuple(read_discount_table(arg).tolist()), source=arg)
    raise SpecError(
        f"unknown discount {spec!r}; expected one of 'log2', 'reciprocal', 'exponential:p', 'pbm', "
        "'table:FILE.csv', optionally followed by a cut-off '@n' (e.g. 'log2@10')"
    )


def learn_pbm(logs, *, floor: float = PBM_FLOOR, arm: str | None = "control") -> np.ndarray:
    """Learn P̂(V = 1 | R = r) as the survival curve of session lengths, floored.

    With only viewed items logged, a session that stops at rank t has rows for ranks 1..t, so the
    share of sessions reaching rank r estimates P(V | R = r) (DESIGN.md "Discount models"; KDD'24 Asm. 2).
    The curve is non-increasing by construction; values below ``floor`` are raised to it so importance
    weights 1 / P̂ stay finite (≤ 1 / floor). Estimated on the logging policy's sessions
    (``arm == "control"``) when the logs have a control arm, else on all sessions.

    >>> import pandas as pd
    >>> from offeval_core.logs import read_logs
    >>> logs = read_logs(pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [0, 1, 0]}))
    >>> learn_pbm(logs, floor=0.01).tolist()  # both sessions reach rank 1, one of two reaches rank 2
    [1.0, 0.5]
    """
    if not 0 < floor <= 1:
        raise SpecError(f"floor must be in (0, 1], got {floor!r}")
    sessions = logs.sessions
    sessions = offline_rows(sessions, arm)
    lengths = sessions["length"].to_numpy()
    return survival_curve(lengths, floor=floor)


def survival_curve(lengths: np.ndarray, *, floor: float = PBM_FLOOR) -> np.ndarray:
    """Share of sessions with length ≥ r for r = 1..max(lengths), floored at ``floor``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        raise InputError("cannot learn a position-bias curve from zero sessions")
    return survival_from_counts(np.bincount(lengths, minlength=int(lengths.max()) + 1)[1:], floor=floor)


def survival_from_counts(counts: np.ndarray, *, floor: float = PBM_FLOOR) -> np.ndarray:
    """The floored survival curve from ``counts[r - 1]`` = number of sessions of length r.

    >>> survival_from_counts(np.array([1, 1]), floor=0.01).tolist()  # lengths 1 and 2
    [1.0, 0.5]
    """
    counts = np.asarray(counts, dtype=np.int64)
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        raise InputError("cannot learn a position-bias curve from zero sessions")
    counts = counts[: nonzero[-1] + 1]
    reach = counts[::-1].cumsum()[::-1] / counts.sum()
    return np.maximum(reach, floor)


# ----------------------------------------------------------------------------- table: specs, safely


_ACCESS = threading.local()
_REGISTERED: OrderedDict[str, np.ndarray] = OrderedDict()  # the uploaded tables, most recently used last
_REGISTERED_LOCK = threading.Lock()
MAX_REGISTERED = 32
"""Uploaded discount tables kept in memory (at most 32 × 100,000 ranks × 8 bytes = 25.6 MB); the least
recently used one is forgotten first, and a view naming it asks for the upload again."""
_REGISTERED_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}-[0-9a-f]{12}\.csv")
_TABLE_KINDS = (".csv",)


def restrict_table_files(restricted: bool = True) -> None:
    """In the calling thread, let ``table:NAME`` name only a registered (uploaded) table or a file of the
    operator's data directory by plain name, never a path. The dashboard calls it on every run; the
    command line and library keep the default (the user's own files, read within the limits)."""
    _ACCESS.restricted = bool(restricted)


def table_files_restricted() -> bool:
    """Whether ``table:`` specs in this thread are limited to registered tables and the data directory."""
    return bool(getattr(_ACCESS, "restricted", False))


def register_table(data: bytes, *, name: str = "upload") -> str:
    r"""Validate an uploaded discount table (CSV bytes) and register it under a content-derived name;
    returns the name to use in ``table:NAME``. The name is ``<stem>-<12 hex digits of its SHA-256>.csv``.

    >>> register_table(b"rank,probability\n1,1\n2,0.5\n", name="my bias.csv")
    'my-bias-d869969b4d77.csv'
    """
    import hashlib

    limits = Limits.from_env()
    if len(data) > limits.max_table_bytes:
        raise LimitExceeded(f"discount table {name[:60]!r} is larger than {limits.max_table_bytes:,} bytes "
                            "(OFFEVAL_MAX_TABLE_BYTES)", source=name)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(name).stem)[:40].strip("-") or "table"
    key = f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.csv"
    with tempfile.TemporaryDirectory(prefix="offeval-table-") as tmp:
        path = Path(tmp) / "table.csv"
        path.write_bytes(data)
        values = _read_table_file(path, shown=name)
    values.setflags(write=False)
    with _REGISTERED_LOCK:
        _REGISTERED[key] = values
        _REGISTERED.move_to_end(key)
        while len(_REGISTERED) > MAX_REGISTERED:
            _REGISTERED.popitem(last=False)
    return key


def read_discount_table(path: str) -> np.ndarray:
    """Read a (rank, probability) CSV into an array for ranks 1..max; missing ranks are an error.

    ``path`` is a table registered with :func:`register_table`, else (in a restricted thread, see
    :func:`restrict_table_files`) a plain file name in the data directory, else a path to the user's own
    file. Errors never quote the file's content.
    """
    with _REGISTERED_LOCK:
        if path in _REGISTERED:
            _REGISTERED.move_to_end(path)
            return _REGISTERED[path].copy()
    if table_files_restricted():
        try:
            resolved = data_file(path, kinds=_TABLE_KINDS, what="discount table")
        except MissingInput:
            if isinstance(path, str) and _REGISTERED_NAME.fullmatch(path):
                raise MissingInput(f"the uploaded discount table {path!r} is no longer in memory; upload it again in "
                                   "the sidebar", source="discount table") from None
            raise
        return _read_table_file(resolved, shown=path)
    return _read_table_file(path, shown=path)


def _read_table_file(path, *, shown: str) -> np.ndarray:
    base = Limits.from_env()
    limits = dataclasses.replace(base, max_bytes=base.max_table_bytes, max_rows=base.max_rank, max_columns=16)
    label = f"discount table {shown}"
    df = read_csv_limited(path, source=label, limits=limits)
    cols = [str(c).strip().lower() for c in df.columns]
    if "rank" not in cols or "probability" not in cols:
        raise InputError(
            f"{label} must have the columns 'rank' and 'probability' (a header line 'rank,probability'); "
            f"its header has {len(cols)} column(s) without them", source=shown, expected="rank,probability"
        )
    df.columns = cols
    ranks = pd.to_numeric(df["rank"], errors="coerce").to_numpy(dtype=float)
    probs = pd.to_numeric(df["probability"], errors="coerce").to_numpy(dtype=float)
    n = len(df)
    if n == 0 or np.isnan(ranks).any() or (np.sort(ranks) != np.arange(1, n + 1)).any():
        raise InputError(f"{label}: column 'rank' must list every rank 1..n exactly once", source=shown,
                         column="rank")
    bad = np.flatnonzero(~((probs >= 0) & (probs <= 1)))
    if len(bad):  # (text that is not a number is told apart from a number outside the range)
        outside, text = bad[~np.isnan(probs[bad])][:5], bad[np.isnan(probs[bad])][:5]
        said = [f"rows {', '.join(str(i + 1) for i in rows)} {what}"
                for rows, what in ((outside, "are outside it"), (text, "are not numbers")) if len(rows)]
        raise InputError(f"{label}: column 'probability' must hold numbers in [0, 1]; {' and '.join(said)}",
                         source=shown, column="probability", rows=[int(i) + 1 for i in bad[:5]])
    out = np.empty(n)
    out[ranks.astype(int) - 1] = probs
    return out
