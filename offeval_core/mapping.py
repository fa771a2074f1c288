"""Column mapping: the user's own column names onto the log schema.

A mapping is a dict from schema names to the user's column names, ``{"session_id": "visit", "rank": "pos"}``.
Two additions make real files fit without one entry per column:

- **patterns**: ``rank__*=pos_*`` maps every column ``pos_<name>`` to the target policy ``<name>``
  (likewise ``target_propensity__*=prop_*``); the ``*`` stands for the policy name;
- **guesses** (:func:`guess_mapping`): common names for the schema fields (``visit`` → ``session_id``,
  ``pos`` / ``position`` → ``rank``, ``variant`` / ``group`` → ``arm`` when it holds control / treatment,
  ``date`` → ``day``, ``test`` → ``experiment_id``, ``user_type`` → ``segment``…) and the policy columns
  ``<rank column>_<policy>`` next to the logged rank column.

:func:`rank_like_rewards` finds "reward" columns that look like ranks (integers 1..K on every row), the
usual sign of a policy column that was not mapped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from offeval_core.arm_values import guess_arm_values
from offeval_core.errors import SpecError, UnknownName
from offeval_core.formatting import name_list

__all__ = [
    "EACH_ROW", "GUESSES", "PATTERN_PREFIXES", "SCHEMA_FIELDS", "dates_like", "day_like", "describe", "expand_mapping", "guess_mapping", "is_pattern",
    "parse_mapping", "rank_like_note", "rank_like_rewards", "resolve",
]


EACH_ROW = "(each row)"
"""The mapping ``session_id=(each row)``: the file has no session column and each row is one session (a bandit
round of logs with propensities, such as the Open Bandit Dataset)."""

SCHEMA_FIELDS = ("session_id", "rank", "item_id", "day", "experiment_id", "arm", "segment",
                 "logging_propensity")
PATTERN_PREFIXES = ("rank__", "target_propensity__")

GUESSES: dict[str, tuple[str, ...]] = {
    "session_id": ("session_id", "session", "sessionid", "visit", "visit_id", "visitid", "request_id",
                   "query_id", "qid", "sid"),
    "rank": ("rank", "pos", "position", "slot", "rank_position"),
    "item_id": ("item_id", "item", "itemid", "doc_id", "doc", "docid", "product_id", "video_id", "content_id",
                "video", "product", "article", "movie", "track", "content"),
    "day": ("day", "date", "ds", "dt", "event_date", "timestamp", "datetime", "event_time"),
    "experiment_id": ("experiment_id", "experiment", "exp", "exp_id", "test", "test_id", "ab_test", "abtest",
                      "test_name"),
    "arm": ("arm", "variant", "group", "bucket", "treatment_group", "ab_group"),
    "segment": ("segment", "user_type", "user_segment", "stratum", "context", "usertype"),
    "logging_propensity": ("logging_propensity", "propensity", "pscore", "propensity_score", "logging_prob",
                           "behavior_propensity", "behaviour_propensity"),
}
"""Common names of each schema field, in order of preference (compared case-insensitively)."""


def parse_mapping(text: str | None, *, what: str = "--map entries") -> dict[str, str]:
    """Parse ``"session_id=visit,rank=pos,rank__*=pos_*"`` into a mapping (schema name → your column);
    ``what`` names the entries in messages (the CLI option or the form field).

    >>> parse_mapping("session_id=visit, rank=pos, rank__*=pos_*")
    {'session_id': 'visit', 'rank': 'pos', 'rank__*': 'pos_*'}
    """
    if not text:
        return {}
    out: dict[str, str] = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise SpecError(f"{what} must look like schema_name=your_column, got {part!r}", source="--map",
                            expected="schema_name=your_column")
        key, value = (s.strip() for s in part.split("=", 1))
        if not key or not value:
            raise SpecError(f"{what} must look like schema_name=your_column, got {part!r}", source="--map",
                            expected="schema_name=your_column")
        _check_entry(key, value)
        out[key] = value
    return out


def _check_entry(key: str, value: str) -> None:
    if "*" not in key and key not in SCHEMA_FIELDS and not any(
            key.startswith(p) and len(key) > len(p) for p in PATTERN_PREFIXES):
        known = ", ".join([*SCHEMA_FIELDS, *(p + "<policy>" for p in PATTERN_PREFIXES)])
        raise SpecError(f"a mapping entry names a schema field on its left side, and {key[:60]!r} is none of "
                        f"{known} (reward columns keep their own names: name them with --reward)",
                        source="--map", expected="schema_name=your_column")
    if "*" in key or "*" in value:
        if key.count("*") != 1 or value.count("*") != 1 or not key.endswith("*") \
                or key[:-1] not in PATTERN_PREFIXES:
            raise SpecError(f"a pattern entry looks like rank__*=pos_* (one '*' on each side, the left side "
                             f"one of {', '.join(p + '*' for p in PATTERN_PREFIXES)}), got {key}={value}")


def is_pattern(key: str) -> bool:
    return "*" in key


def _pattern_regex(value: str) -> re.Pattern:
    before, after = value.split("*", 1)
    return re.compile(re.escape(before) + r"(.+)" + re.escape(after) + r"\Z")


def expand_mapping(columns: Iterable[str], mapping: Mapping[str, str]) -> dict[str, str]:
    """The mapping with every pattern entry replaced by one entry per matching column.

    Explicit entries win over a pattern for the same schema name; a column already mapped explicitly is not
    matched again. A pattern that matches no column raises ``UnknownName`` naming the columns.

    >>> expand_mapping(["visit", "pos", "pos_a", "pos_b"], {"rank": "pos", "rank__*": "pos_*"})
    {'rank': 'pos', 'rank__a': 'pos_a', 'rank__b': 'pos_b'}
    """
    columns = [str(c) for c in columns]
    out = {k: v for k, v in mapping.items() if not is_pattern(k)}
    used = set(out.values())
    for key, value in mapping.items():
        if not is_pattern(key):
            continue
        _check_entry(key, value)
        rx = _pattern_regex(value)
        hits = [(c, m.group(1)) for c in columns if c not in used and (m := rx.match(c))]
        if not hits:
            raise UnknownName(f"mapping {key}={value}: no column matches {value!r} "
                             f"(columns found: {name_list(columns)})")
        prefix = key[:-1]
        for col, name in hits:
            out.setdefault(prefix + name, col)
            used.add(col)
    return out


def _is_int_like(col: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(col):
        return False
    if pd.api.types.is_integer_dtype(col):
        return True
    if pd.api.types.is_float_dtype(col):
        v = col.dropna().to_numpy()
        return len(v) > 0 and bool(np.all(v == np.round(v)))
    return False


def _arm_like(col: pd.Series) -> bool:
    """Labels offeval maps by itself: control / treatment or a common pair (A / B, 0 / 1, …)."""
    head = col.head(100_000).dropna()
    if head.nunique() > 2:
        return False
    return guess_arm_values(col.dropna().unique()) is not None


_TIME_NAMES = ("timestamp", "datetime", "event_time")


def dates_like(col: pd.Series) -> bool:
    """Datetimes, or text whose first 1000 values parse as ISO dates / timestamps."""
    if pd.api.types.is_datetime64_any_dtype(col):
        return True
    if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        return False
    sample = col.dropna().head(1000)
    if sample.empty:
        return False
    try:
        pd.to_datetime(sample.astype(str), format="ISO8601")
    except (ValueError, TypeError):
        return False
    return True


def day_like(name: str, col: pd.Series) -> bool:
    """A day column: dates or datetimes; for ``day`` / ``date``-like names also integers with few values
    (20260302) or other text (day labels); a ``timestamp`` column must hold dates."""
    if dates_like(col):
        return True
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        return name.lower() not in _TIME_NAMES and _is_int_like(col) and col.nunique() <= 1000
    return name.lower() not in _TIME_NAMES and not col.dropna().empty


def guess_mapping(frame: pd.DataFrame, mapping: Mapping[str, str] | None = None) -> dict[str, str]:
    """Guessed entries for the schema fields that the frame lacks and the mapping does not name.

    Only columns not already used are guessed; ``rank`` must hold integers, ``arm`` ``control`` /
    ``treatment`` or a common pair of labels (A / B, 0 / 1, …; :mod:`offeval_core.arm_values`), ``day`` dates
    (a ``timestamp`` column becomes its date); without a session column, logs with a logging propensity get
    ``session_id=(each row)`` (:data:`EACH_ROW`). Once the logged rank column ``X`` is known, integer columns ``X_<policy>`` (or
    ``X__<policy>``) become the policies ``rank__<policy>`` when the file has no ``rank__`` column.
    Returns only the new entries (schema name → column).

    >>> df = pd.DataFrame({"visit": [1], "pos": [1], "clicked": [0], "variant": ["control"], "pos_new": [2]})
    >>> guess_mapping(df)
    {'session_id': 'visit', 'rank': 'pos', 'arm': 'variant', 'rank__new': 'pos_new'}
    """
    mapping = dict(mapping or {})
    columns = [str(c) for c in frame.columns]
    used = set(mapping.values())
    lower = {c.lower(): c for c in reversed(columns)}
    new: dict[str, str] = {}
    for name, candidates in GUESSES.items():
        if name in mapping or name in columns:
            continue
        for cand in candidates:
            col = lower.get(cand)
            if col is None or col in used or col in SCHEMA_FIELDS:
                continue
            series = frame[col]
            if name == "rank" and not _is_int_like(series):
                continue
            if name == "arm" and not _arm_like(series):
                continue
            if name == "day" and not day_like(col, series):
                continue
            new[name] = col
            used.add(col)
            break
    has = {**mapping, **new}
    if "session_id" not in has and "session_id" not in columns and ("logging_propensity" in has
                                                                     or "logging_propensity" in columns):
        new["session_id"] = EACH_ROW  # bandit logs without a round id: each row is one round
    for field, prefix, fits in (("rank", "rank__", _is_int_like), ("logging_propensity", "target_propensity__",
                                                                     _probability_like)):
        base = mapping.get(field) or new.get(field) or (field if field in columns else None)
        has_policies = any(k.startswith(prefix) for k in mapping) or any(c.startswith(prefix) for c in columns)
        if base and not has_policies:
            rx = re.compile(re.escape(base) + r"__?(.+)\Z")
            for col in columns:
                m = rx.match(col)
                if m and col not in used and fits(frame[col]):
                    new[prefix + m.group(1)] = col
                    used.add(col)
    return new


def _probability_like(col: pd.Series) -> bool:
    if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        return False
    v = col.dropna()
    return len(v) > 0 and bool(((v >= 0) & (v <= 1)).all())


def resolve(frame: pd.DataFrame, mapping: Mapping[str, str] | None, *, guess: bool = False
            ) -> tuple[dict[str, str], tuple[str, ...], dict[str, str]]:
    """(concrete mapping, notes, how each entry came about): patterns expanded and, with ``guess``, common
    names added (each guess is named in a note so the user can check it). ``how`` maps a schema name to
    ``"given"``, ``"pattern"`` or ``"guessed"``."""
    given = dict(mapping or {})
    out = expand_mapping(frame.columns, given)
    how = {k: ("given" if k in given else "pattern") for k in out}
    notes: tuple[str, ...] = ()
    if guess:
        new = guess_mapping(frame, out)
        if new:
            out.update(new)
            how.update(dict.fromkeys(new, "guessed"))
            policies = [k for k in new if k.startswith(PATTERN_PREFIXES)]
            fields = [f"{k}={v}" for k, v in new.items() if not k.startswith(PATTERN_PREFIXES)]
            parts = fields + ([f"{len(policies)} policy column(s) " + ", ".join(new[k] for k in policies)]
                              if policies else [])
            notes = (f"guessed column mapping: {'; '.join(parts)} (name them explicitly to change this)",)
    return out, notes, how


def rank_like_rewards(frame: pd.DataFrame, rewards: Sequence[str], *, max_rank: int = 1000) -> list[str]:
    """The reward columns that look like ranks: integers 1..K with 3 ≤ K ≤ ``max_rank``, non-zero on every
    row that has a value (a target policy's rank column is empty where the policy would not show the item).

    A reward (a click, a like, watch time) is zero on most impressions; a column that is a positive integer
    on every row is almost always a policy's rank column that was not mapped.

    >>> df = pd.DataFrame({"click": [0, 1, 0, 0], "pos_new": [1, 2, 3, 4]})
    >>> rank_like_rewards(df, ["click", "pos_new"])
    ['pos_new']
    """
    out = []
    for r in rewards:
        col = frame[r].dropna()
        if not _is_int_like(col) or len(col) == 0:
            continue
        lo, hi = col.min(), col.max()
        if lo >= 1 and 3 <= hi <= max_rank:
            out.append(r)
    return out


def rank_like_note(columns: Sequence[str]) -> str:
    """The warning for :func:`rank_like_rewards`'s columns: what they look like and how to map them."""
    cols = ", ".join(f"'{c}'" for c in columns)
    return (f"reward column(s) {cols} look like ranks (whole numbers from 1 on every row, never 0), not "
            "rewards: if they are the ranks a target policy would give, map them as target policies "
            "(one policy per column, or one pattern for all columns sharing a prefix)")


def describe(mapping: Mapping[str, str]) -> str:
    """``session_id=visit, rank=pos`` — a mapping as text (the inverse of :func:`parse_mapping`)."""
    return ", ".join(f"{k}={v}" for k, v in mapping.items())
