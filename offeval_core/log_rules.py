"""The schema's rules on column values, defined once and run by every way in.

Each rule marks the offending rows of one column and says, in one problem line, what it found and what was
expected. The rules are written over a small *column namespace* (:class:`NumpyColumns` here; the query
engine's namespace lives in :mod:`offeval_core.engine.checks`), so ``read_logs`` evaluates them on numpy
arrays and ``offeval reduce`` evaluates the very same definitions as one aggregate query over Parquet files,
without loading them. Both report with :func:`problem_text`, so a file gets the same messages from
``validate``, ``estimate``, the dashboard and ``reduce``.

The rules of a column are ordered: only the first one that finds offending rows is reported (a column of
non-numbers is not also reported as out of range). Cross-row rules (duplicate (session, rank), a target
policy's duplicate ranks, keys constant within a session) are in :mod:`offeval_core.log_checks` and
:mod:`offeval_core.engine.checks`, with their messages here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.arm_values import ArmValues, map_arm_values
from offeval_core.errors import Problem
from offeval_core.log_schema import LOGGING_POLICY, LOGGING_PROPENSITIES, MAX_SHOWN, POLICY_PREFIX

__all__ = [
    "SCHEMA_ARMS", "ColumnRule", "NumpyColumns", "column_rules", "duplicate_examples", "duplicates_text", "mixed_key_text",
    "problem_text", "rows_text", "show", "value_phase", "values_text",
]

INT32_MAX = int(np.iinfo(np.int32).max)
SCHEMA_ARMS = ArmValues("control", "treatment", how="schema")
"""The arm mapping of labels that are the schema's own (``control`` / ``treatment``, any case)."""


@dataclass(frozen=True)
class ColumnRule:
    """One rule on one column: ``bad`` marks offending rows (a boolean array, or an engine's boolean column),
    ``shown`` holds the values the message quotes (None: the message quotes no value), ``template`` the
    problem line with ``{values}`` and ``{rows}`` to fill, ``kind`` the :class:`~offeval_core.errors.Problem`
    kind; ``converted`` the column as the schema reads it (float64 numbers, normalised arms) for reuse."""

    column: str
    name: str
    bad: object
    shown: object
    template: str
    kind: str = ""
    converted: object = None


class NumpyColumns:
    """The column namespace of pandas / numpy: a raw column is a pandas Series, masks are numpy arrays."""

    @staticmethod
    def numeric(raw: pd.Series):
        """(values as float64 with NaN where missing or not a number, the values as numbers for display,
        a mask of the non-null values that are not numbers)."""
        if pd.api.types.is_bool_dtype(raw):
            raw = raw.astype(np.float64)
        if pd.api.types.is_datetime64_any_dtype(raw) or isinstance(raw.dtype, pd.PeriodDtype):
            numeric = pd.Series(np.nan, index=raw.index)  # a date is not a number
        else:
            numeric = pd.to_numeric(raw, errors="coerce")
        values = numeric.to_numpy(dtype=np.float64, na_value=np.nan)
        non_number = np.isnan(values) & raw.notna().to_numpy()
        return values, numeric, non_number

    @staticmethod
    def missing(raw: pd.Series) -> np.ndarray:
        return raw.isna().to_numpy()

    @staticmethod
    def present(values: np.ndarray) -> np.ndarray:
        return ~np.isnan(values)

    @staticmethod
    def finite(values: np.ndarray) -> np.ndarray:
        return np.isfinite(values)

    @staticmethod
    def integral(values: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return values == np.floor(values)

    @staticmethod
    def arm(raw: pd.Series, arms: ArmValues | None = None):
        """(each row's arm through the mapping ``arms`` (:func:`~offeval_core.arm_values.map_arm_values`:
        ``control``, ``treatment`` or None); mask of the rows whose label is empty or not in the mapping)."""
        mapped = map_arm_values(raw, arms or SCHEMA_ARMS)
        return pd.Series(mapped, index=raw.index, dtype=object), pd.isna(mapped)


def _esc(text: str) -> str:
    """User text (a column name, an arm label) inside a rule's template, braces escaped for ``str.format``."""
    return str(text).replace("{", "{{").replace("}", "}}")


def column_rules(role: str, column: str, raw, xp=NumpyColumns, *, ceiling: int | None = None,
                 arms: ArmValues | None = None) -> list[ColumnRule]:
    """The ordered rules of one column of the given ``role``:

    ``session_id`` (not empty) · ``rank`` (positive integers ≤ ``ceiling``, none empty) · ``policy`` (a
    ``rank__<policy>`` column: positive integers ≤ ``ceiling`` or empty) · ``reward`` (numbers, finite, ≥ 0)
    · ``logging_propensity`` (in (0, 1]) · ``target_propensity`` (in [0, 1]) · ``arm`` (every label named by
    the arm mapping ``arms``, the schema's control / treatment when None; none empty) · ``key``
    (``experiment_id`` / ``day`` / ``segment``: not empty).

    >>> rules = column_rules("rank", "rank", pd.Series([1, 1.5, 0]), ceiling=10)
    >>> first = next(r for r in rules if r.bad.any())
    >>> problem_text(first, values=first.shown[first.bad].tolist(), rows=[2, 3], total=2)  # 1-based rows
    "column 'rank' must hold positive integers (1 = top position); found 1.5, 0 at data rows 2, 3"
    """
    if role in ("session_id", "key"):
        return [ColumnRule(column, "empty", xp.missing(raw), None,
                           f"column '{_esc(column)}' must not be empty; found empty values at {{rows}}")]
    if role == "arm":
        mapped, bad = xp.arm(raw, arms)
        return [ColumnRule(column, "arm", bad, raw, f"column 'arm' has labels the arm mapping "
                           f"({_esc((arms or SCHEMA_ARMS).describe())}) does not name, or empty values; found {{values}} "
                           "at {rows}", kind="arm", converted=mapped)]
    values, numeric, non_number = xp.numeric(raw)
    present = xp.present(values)
    return [dataclasses.replace(r, converted=values) for r in _numeric_rules(role, column, raw, xp, values, numeric,
                                                                             non_number, present, ceiling)]


def _numeric_rules(role, column, raw, xp, values, numeric, non_number, present, ceiling) -> list[ColumnRule]:
    if role in ("rank", "policy"):
        kind = "rank" if role == "rank" else ""
        top = min(int(ceiling if ceiling is not None else INT32_MAX), INT32_MAX)
        out = [ColumnRule(column, "non_number", non_number, raw, f"column '{_esc(column)}' must hold positive integers; "
                          "found non-numbers {values} at {rows}", kind)]
        if role == "rank":
            out.append(ColumnRule(column, "empty", ~present, None, f"column '{_esc(column)}' must hold positive integers; "
                                  "found empty values at {rows}", kind))
        out.append(ColumnRule(column, "not_positive_integer",
                              present & ((values < 1) | ~xp.integral(values) | ~xp.finite(values)), raw,
                              f"column '{_esc(column)}' must hold positive integers (1 = top position); found {{values}} "
                              "at {rows}", kind))
        out.append(ColumnRule(column, "ceiling", present & (values > top), raw,
                              f"column '{_esc(column)}' has ranks above the rank ceiling {top:,} (OFFEVAL_MAX_RANK / "
                              "--max-rank); found {values} at {rows}", kind))
        return out
    if role == "reward":
        return [
            ColumnRule(column, "non_number", non_number, raw,
                       f"reward column '{_esc(column)}' must be numeric; found {{values}} at {{rows}}", "reward"),
            ColumnRule(column, "not_finite", ~present | ~xp.finite(values), numeric,
                       f"reward column '{_esc(column)}' must hold finite numbers (no NaN, empty or inf); found {{values}} "
                       "at {rows}", "reward"),
            ColumnRule(column, "negative", present & (values < 0), numeric,
                       f"reward column '{_esc(column)}' must be non-negative (DCG and nDCG assume gains ≥ 0); found "
                       "{values} at {rows}", "reward"),
        ]
    if role == "logging_propensity":
        return [ColumnRule(column, "probability", ~present | ~((values > 0) & (values <= 1)), raw,
                           f"column '{_esc(column)}' must hold probabilities in (0, 1]; found {{values}} at {{rows}}")]
    if role == "target_propensity":
        return [ColumnRule(column, "probability", ~present | ~((values >= 0) & (values <= 1)), raw,
                           f"column '{_esc(column)}' must hold probabilities in [0, 1]; found {{values}} at {{rows}}")]
    raise ValueError(f"unknown column role {role!r}")


# ------------------------------------------------------------------------------------------------- messages


def show(v) -> str:
    """A value as a message quotes it: text in quotes, whole numbers without a decimal point (a whole float
    read from Parquet and the same integer read from a CSV look alike).

    >>> show("abc"), show(2.0), show(1.5), show(np.int64(-5)), show(float("nan"))
    ("'abc'", '2', '1.5', '-5', 'nan')
    """
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def values_text(values: Sequence) -> str:
    return ", ".join(show(v) for v in list(values)[:MAX_SHOWN])


def rows_text(rows: Sequence[int], total: int | None = None) -> str:
    """1-based data-row numbers, at most MAX_SHOWN of them, and how many more ``total`` has.

    >>> rows_text([3, 9], 2), rows_text([1, 2, 3, 4, 5], 8)
    ('data rows 3, 9', 'data rows 1, 2, 3, 4, 5 and 3 more')
    """
    rows = [int(r) for r in rows]
    total = len(rows) if total is None else int(total)
    if not rows:
        return f"{total:,} row{'s' if total != 1 else ''}"  # an engine table without row numbers
    shown = ", ".join(str(r) for r in rows[:MAX_SHOWN])
    more = f" and {total - MAX_SHOWN} more" if total > MAX_SHOWN else ""
    return f"data row{'s' if total > 1 else ''} {shown}{more}"


def problem_text(rule: ColumnRule, *, values: Sequence, rows: Sequence[int], total: int) -> str:
    """The problem line of ``rule`` given the first offending values and 1-based rows and their total."""
    return rule.template.format(values=values_text(values), rows=rows_text(rows, total))


def duplicates_text(what: str, examples: Sequence[tuple], total: int) -> str:
    """The problem line for repeated keys: ``examples`` are (session, rank, row a, row b) in session order
    (row a None: row b is how many rows repeat the pair, for a table without row numbers).

    ``what`` is ``"(session_id, rank)"`` for the logged ranks or a ``rank__<policy>`` column.
    """
    shown = "; ".join(f"session {show(s)} rank {int(r)} " + (f"(data rows {a} and {b})" if a is not None else f"({b} rows)")
                      for s, r, a, b in examples[:MAX_SHOWN])
    more = f" and {total - MAX_SHOWN} more" if total > MAX_SHOWN else ""
    if what == "(session_id, rank)":
        return "each (session_id, rank) must appear once, found duplicates: " + shown + more
    return (f"column '{what}' must give each item of a session its own rank (a ranking has one item per "
            "position), found duplicates: " + shown + more)


def duplicate_examples(codes: np.ndarray, ranks: np.ndarray, rows: np.ndarray, label) -> tuple[list[tuple], int]:
    """(examples, total) of repeated (session, rank) pairs among rows sorted by (session code, rank, row): each
    consecutive repeat is one example (session, rank, row a, row b) with 1-based rows; ``label(k)`` is the
    session value of the k-th sorted row.

    >>> duplicate_examples(np.array([0, 0, 0, 1]), np.array([1, 1, 1, 1]), np.array([2, 4, 9, 3]), lambda k: "s")
    ([('s', 1, 2, 4), ('s', 1, 4, 9)], 2)
    """
    same = np.flatnonzero((codes[1:] == codes[:-1]) & (ranks[1:] == ranks[:-1]))
    examples = []
    for k in same[:MAX_SHOWN]:
        a, b = sorted((int(rows[k]), int(rows[k + 1])))
        examples.append((label(k), int(ranks[k]), a, b))
    return examples, len(same)


def mixed_key_text(key: str, session, first, other, row: int | None) -> str:
    """The problem line of a key that changes within a session (``row``: the data row of the second value)."""
    where = f" (data row {int(row)})" if row else ""
    return (f"column '{key}' must be the same on every row of a session; session {show(session)} has "
            f"{show(first)} and {show(other)}{where}")


def value_phase(columns: Sequence[str], rewards: Sequence[str], policies: Sequence[str],
                propensities: Sequence[str], get, xp=NumpyColumns, *, ceiling: int,
                arms: ArmValues | str | None = None) -> list:
    """The row-level checks of the logs, in the order their problems are listed: ``session_id``, ``rank``, the
    rewards, the target policies' ranks, the propensities, ``arm``. Each item is a fixed problem line (a
    column name the schema reserves, or ``arms`` when it is the problem line of arm labels no mapping names:
    :func:`~offeval_core.arm_values.arm_label_problem`) or the ordered rules of one column; ``get(name)``
    returns a raw column. ``arms`` is the arm mapping the rule of ``arm`` checks the labels against.
    """
    items: list = [column_rules("session_id", "session_id", get("session_id"), xp),
                   column_rules("rank", "rank", get("rank"), xp, ceiling=ceiling)]
    items += [column_rules("reward", r, get(r), xp) for r in rewards]
    for c in policies:
        if c == POLICY_PREFIX:
            items.append(f"column '{c}' has no policy name after the '{POLICY_PREFIX}' prefix")
        else:
            items.append(column_rules("policy", c, get(c), xp, ceiling=ceiling))
    if POLICY_PREFIX + LOGGING_POLICY in policies:
        items.append(f"column '{POLICY_PREFIX}{LOGGING_POLICY}' is reserved: '{LOGGING_POLICY}' names the logged ranks")
    for c in [c for c in LOGGING_PROPENSITIES if c in columns]:
        items.append(column_rules("logging_propensity", c, get(c), xp))
    for c in propensities:
        items.append(column_rules("target_propensity", c, get(c), xp))
    if "arm" in columns:
        if isinstance(arms, str):
            items.append(Problem(arms, kind="arm"))
        else:
            items.append(column_rules("arm", "arm", get("arm"), xp, arms=arms))
    return items
