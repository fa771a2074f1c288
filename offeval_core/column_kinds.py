"""What a column looks like, by its name and by its values: named like a reward, an identifier, a feature or a
time; whole numbers that count rows, never repeat within a session or take one value per item; two labels
that split the sessions like an A/B arm. :mod:`offeval_core.reading` uses these to read a file's columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.arm_values import normalise_label

__all__ = ["SessionFrame", "arm_like_labels", "feature_reason", "id_named", "identifier_reason", "numeric_values",
           "reward_named", "session_constant"]

# ------------------------------------------------------------------------------------------- names

_REWARD_STEMS = (
    "click", "like", "purchas", "buy", "bought", "convert", "conversion", "cart", "watch", "view", "play",
    "complet", "finish", "engag", "reward", "revenue", "gmv", "dwell", "spent", "share", "save", "comment",
    "follow", "subscrib", "rating", "rated", "relevan", "gain", "label", "listen", "read", "open", "install",
    "signup", "vote", "favo", "bookmark", "repl", "respon", "success", "hit", "ctr", "outcome", "book",
    "download", "sale", "sold", "spend", "dislike", "retain", "retention", "order", "add",
)
_FEATURE_WORDS = {"feature", "features", "feat", "affinity", "embedding", "embed", "emb", "score", "scores",
                  "logit", "pred", "prediction", "predicted", "prob", "probability", "propensity", "context",
                  "ctx", "covariate", "bias"}
_TIME_NAMES = {"timestamp", "ts", "time", "epoch", "datetime", "hour", "minute", "second", "weekday", "dow",
               "created", "updated", "unix_time", "event_time"}
_ID_NAMES = {"id", "uuid", "guid", "key", "index", "idx", "row", "rownum", "row_number", "hash", "level_0", ""}
_ID_SUFFIXES = ("_id", "-id", " id", ".id", "_uuid", "_guid", "_key", "_idx", "_index", "_hash")
_ENTITY_WORDS = ("user", "item", "video", "session", "doc", "product", "request", "query", "visit", "content",
                 "ad", "campaign", "event", "page", "movie", "track", "article", "customer", "account", "device",
                 "record", "impression", "creative", "offer", "song", "post", "shop", "store", "order", "row")
_UNNAMED = re.compile(r"unnamed: ?\d+(\.\d+)?\Z")


def _tokens(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", str(name))
    return [t for t in re.split(r"[^0-9a-zA-Z]+", spaced.lower()) if t]


def id_named(name: str) -> bool:
    low = str(name).strip().lower()
    if low in _ID_NAMES or _UNNAMED.match(low) or low.endswith(_ID_SUFFIXES):
        return True
    if re.search(r"[a-z0-9](Id|ID)\Z", str(name).strip()):  # userId, videoID
        return True
    return low.endswith("id") and low[:-2].rstrip("_-") in _ENTITY_WORDS


def reward_named(name: str) -> bool:
    """Whether a column's name says it is a reward (a click, a like, watch time, a purchase…).

    >>> reward_named("clicked"), reward_named("watch_time"), reward_named("video"), reward_named("click_id")
    (True, True, False, False)
    """
    if id_named(name):
        return False
    return any(t.startswith(_REWARD_STEMS) for t in _tokens(name))


def feature_reason(name: str) -> str:
    """'a feature' / 'a time' when the name says so, else ''."""
    low = str(name).strip().lower()
    toks = _tokens(name)
    if low in _TIME_NAMES or low.endswith(("_ts", "_at", "timestamp", "_epoch", "_time_ms")):
        return "named like a time, not a reward"
    if any(t in _FEATURE_WORDS for t in toks):
        return "named like a feature or a model output, not a reward"
    return ""


# ------------------------------------------------------------------------------------------- values


def _int_like(v: np.ndarray) -> bool:
    return len(v) > 0 and bool(np.all(np.isfinite(v))) and bool(np.all(v == np.round(v)))


@dataclass
class SessionFrame:
    """The mapped frame with the session codes computed on first use."""

    df: pd.DataFrame
    _codes: np.ndarray | None = None
    _multi: np.ndarray | None = None
    _items: np.ndarray | None = None

    @property
    def codes(self) -> np.ndarray:
        if self._codes is None:
            self._codes = pd.factorize(self.df["session_id"])[0].astype(np.int64)
        return self._codes

    @property
    def items(self) -> np.ndarray | None:
        """Integer codes of the item column (None without one), computed on first use."""
        if "item_id" not in self.df.columns:
            return None
        if self._items is None:
            self._items = pd.factorize(self.df["item_id"])[0]
        return self._items

    @property
    def n_sessions(self) -> int:
        return int(self.codes.max()) + 1 if len(self.codes) else 0

    @property
    def multi_row(self) -> np.ndarray:
        """Mask of rows in sessions with at least two rows."""
        if self._multi is None:
            counts = np.bincount(self.codes)
            self._multi = counts[self.codes] >= 2
        return self._multi

    def constant_in_sessions(self, values) -> bool:
        codes, _ = pd.factorize(pd.Series(values), use_na_sentinel=False)
        pairs = pd.DataFrame({"s": self.codes, "v": codes}).drop_duplicates()
        return len(pairs) == self.n_sessions

    def unique_in_sessions(self, values: np.ndarray) -> bool:
        mask = self.multi_row
        if mask.sum() < 20:
            return False
        pairs = pd.DataFrame({"s": self.codes[mask], "v": values[mask]})
        return not pairs.duplicated().any()


def identifier_reason(name: str, values: np.ndarray, frame: SessionFrame | None = None, *,
                      items: np.ndarray | None = None) -> str:
    """Why a numeric column is an identifier or a counter rather than a reward ('' when it is not).

    >>> identifier_reason("visit_id", np.zeros(3))
    'named like an identifier'
    >>> identifier_reason("n", np.arange(100.0))
    'a counter: whole numbers that increase on every row'
    """
    if id_named(name):
        return "named like an identifier"
    if not _int_like(values) or len(values) < 20:
        return ""
    distinct = len(np.unique(values))
    if np.all(np.diff(values) > 0):
        return "a counter: whole numbers that increase on every row"
    if distinct >= 0.9 * len(values):
        return f"an identifier: a different whole number on almost every row ({distinct:,} values in {len(values):,} rows)"
    if frame is not None and distinct >= 20 and frame.unique_in_sessions(values):
        return f"an identifier: no value repeats within a session ({distinct:,} distinct whole numbers)"
    if items is not None and distinct >= 20:
        pairs = pd.DataFrame({"i": items, "v": values}).drop_duplicates()
        if len(pairs) == len(pd.unique(items)):
            return f"one value per item ({distinct:,} distinct values): an item attribute, not a reward"
    return ""


def arm_like_labels(series: pd.Series, frame: SessionFrame) -> tuple[str, ...]:
    """The two labels of a column that looks like an A/B arm: constant within sessions, two labels, each on
    40-60 % of the sessions (at least 20 sessions); () otherwise."""
    if frame.n_sessions < 20 or series.head(200_000).nunique(dropna=True) > 2:
        return ()
    if series.isna().any() or series.nunique() != 2:
        return ()
    if not frame.constant_in_sessions(series.to_numpy()):
        return ()
    first = pd.Series(series.to_numpy()).groupby(frame.codes).first()
    share = first.value_counts(normalize=True)
    if share.min() < 0.4:
        return ()
    return tuple(str(v) for v in sorted(share.index, key=normalise_label))


def numeric_values(col: pd.Series) -> np.ndarray | None:
    """The values as float64 when the column is numeric (or mostly numbers, so a stray 'yes' in a click column
    is reported by the checks instead of the column being dropped); None for text."""
    if pd.api.types.is_bool_dtype(col):
        return col.to_numpy(dtype=np.float64)
    if pd.api.types.is_numeric_dtype(col):
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    present = col.dropna()
    if present.empty:
        return None
    numeric = pd.to_numeric(col, errors="coerce")
    if numeric.notna().sum() < 0.5 * len(present):
        return None
    return numeric.to_numpy(dtype=np.float64, na_value=np.nan)


def session_constant(col: pd.Series, frame: SessionFrame) -> bool:
    return bool(frame.multi_row.any()) and frame.constant_in_sessions(col.to_numpy())

