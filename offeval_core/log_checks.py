"""Validation of ranking logs as a pipeline of phases (:func:`validate`): shape, column mapping, column
classification, row-level values, assembly of :class:`~offeval_core.log_schema.Logs`. Each phase collects
every problem it finds; the first phase with problems stops with one
:class:`~offeval_core.errors.LogValidationError` listing them (data rows 1-based, at most ``MAX_SHOWN`` shown).

Slightly over 400 lines on purpose: the phases share the row-formatting helpers and the ``_Check`` state, and
every message of the schema's contract is kept in this one file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core import mapping as column_mapping
from offeval_core.arm_values import NO_ARMS, arm_label_problem, map_arm_values, parse_arms
from offeval_core.errors import LogValidationError, NeedsAnswers, Problem
from offeval_core.limits import Limits
from offeval_core.log_schema import (
    KNOWN,
    LOGGING_POLICY,
    LOGGING_PROPENSITIES,
    MAX_SHOWN,
    POLICY_PREFIX,
    REQUIRED,
    TARGET_CONDITIONAL_PREFIX,
    TARGET_PROPENSITY_PREFIX,
    Logs,
)
from offeval_core.reading import Reading, read_columns

__all__ = ["ASK_LEVELS", "validate"]

ASK_LEVELS = ("never", "ambiguous", "guesses")
"""When reading raises NeedsAnswers: never (the questions stay in the reading), on questions offeval cannot
answer (the default: the command line and notebooks) or on every guess too (the browser asks before computing)."""


def _problem(exc: Exception, label: str) -> str:
    text = str(exc)
    return text[len(label) + 2:] if text.startswith(label + ": ") else text


def _rows(index: np.ndarray) -> str:
    """Format 0-based positions as 1-based data-row numbers, at most MAX_SHOWN of them."""
    shown = ", ".join(str(int(i) + 1) for i in index[:MAX_SHOWN])
    more = f" and {len(index) - MAX_SHOWN} more" if len(index) > MAX_SHOWN else ""
    return f"data row{'s' if len(index) > 1 else ''} {shown}{more}"


def _show(v) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    return repr(v) if isinstance(v, str) else str(v)


def _values(series: pd.Series, index: np.ndarray) -> str:
    return ", ".join(_show(v) for v in series.iloc[index[:MAX_SHOWN]].tolist())


def _normalise_day(day: pd.Series) -> pd.Series:
    """Days as given when numeric or dates; text that parses as dates becomes dates, other text stays text."""
    if pd.api.types.is_datetime64_any_dtype(day):
        return day.dt.date
    if pd.api.types.is_numeric_dtype(day):
        return day
    values = day.to_numpy(dtype=object)
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values[:1000]):
        numeric = pd.to_numeric(day, errors="coerce")
        if numeric.notna().all():
            return numeric.astype(np.int64)
    if all(isinstance(v, str) for v in values[:1000]):
        try:
            return pd.to_datetime(day, format="ISO8601").dt.date
        except (ValueError, TypeError):
            return day.astype(str)
    return day


class _Tagged:
    """A problem list seen through one kind: every line appended becomes a :class:`Problem` of that kind."""

    def __init__(self, problems: list[str], kind: str):
        self.problems, self.kind = problems, kind

    def append(self, text: str) -> None:
        self.problems.append(Problem(text, kind=self.kind))


def _integer_column(raw: pd.Series, col: str, problems: list[str], *, allow_missing: bool,
                    ceiling: int = np.iinfo(np.int32).max) -> np.ndarray | None:
    """Check a column holds positive integers; return int32 values (missing → -1) or None on error."""
    numeric = pd.to_numeric(raw, errors="coerce")
    non_numeric = np.flatnonzero(numeric.isna().to_numpy() & raw.notna().to_numpy())
    if len(non_numeric):
        problems.append(
            f"column '{col}' must hold positive integers; found non-numbers "
            f"{_values(raw, non_numeric)} at {_rows(non_numeric)}"
        )
        return None
    values = numeric.to_numpy(dtype=float, na_value=np.nan)
    missing = np.isnan(values)
    if missing.any() and not allow_missing:
        idx = np.flatnonzero(missing)
        problems.append(f"column '{col}' must hold positive integers; found empty values at {_rows(idx)}")
        return None
    present = ~missing
    bad = np.flatnonzero(present & ((values < 1) | (values != np.floor(values)) | ~np.isfinite(values)))
    if len(bad):
        problems.append(
            f"column '{col}' must hold positive integers (1 = top position); found "
            f"{_values(raw, bad)} at {_rows(bad)}"
        )
        return None
    ceiling = min(int(ceiling), np.iinfo(np.int32).max)
    if present.any() and np.nanmax(values) > ceiling:
        big = np.flatnonzero(present & (values > ceiling))
        problems.append(
            f"column '{col}' has ranks above the rank ceiling {ceiling:,} (OFFEVAL_MAX_RANK / --max-rank); "
            f"found {_values(raw, big)} at {_rows(big)}"
        )
        return None
    out = np.where(missing, -1, values).astype(np.int32)
    return out


@dataclass
class _Check:
    """State passed along the validation phases: the problems and notes found so far."""

    label: str
    limits: Limits
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    columns: dict[str, str] = field(default_factory=dict)  # schema name → the user's column
    unmapped: list[str] = field(default_factory=list)  # required schema columns the logs lack

    def stop_if_problems(self) -> None:
        if self.problems:
            raise LogValidationError(self.label, self.problems, unmapped=self.unmapped)


def validate(raw: pd.DataFrame, *, columns: dict[str, str], rewards, label: str,
              limits: Limits | None = None, guess: bool = False, arms=None, ask: str = "ambiguous") -> Logs:
    """Validation as a pipeline of phases; each collects every problem it finds, and the first phase
    with problems stops the pipeline with one LogValidationError listing them. ``arms`` maps the arm labels
    (:func:`offeval_core.arm_values.parse_arms`); ``ask`` (``never``, ``ambiguous`` or ``guesses``) raises
    :class:`~offeval_core.errors.NeedsAnswers` before any value is checked when the reading has questions at
    that level."""
    if ask not in ASK_LEVELS:
        raise ValueError(f"ask must be one of {', '.join(ASK_LEVELS)}, got {ask!r}")
    chk = _Check(label=label, limits=limits or Limits.from_env())
    _check_shape(raw, chk)
    arms = parse_arms(arms) if isinstance(arms, str | dict) else arms
    try:  # patterns (rank__*=pos_*) and, on request, guesses for common names
        columns, guessed, how = column_mapping.resolve(raw, columns, guess=guess)
    except ValueError as exc:
        raise LogValidationError(label, [str(exc)]) from None
    chk.notes.extend(guessed)
    if arms == NO_ARMS:  # the user says the file has no arm column
        columns.pop("arm", None)
    from_rows = columns.get("session_id") == column_mapping.EACH_ROW
    if from_rows:  # bandit logs: each row is one round, numbered from 1
        columns.pop("session_id")
    chk.columns = dict(columns)
    df = _apply_mapping(raw, columns, chk)
    if arms == NO_ARMS and "arm" in df.columns:
        df = df.drop(columns=["arm"])
    if from_rows:
        df = df.assign(session_id=np.arange(1, len(df) + 1, dtype=np.int64))
    _check_required(df, chk)
    reading = read_columns(df, source=label, columns=columns, how=how, rewards=_reward_list(rewards),
                           arms=arms, sessions_from_rows=from_rows)
    reward_cols, policy_cols, propensity_cols = _classify_columns(df, rewards, reading, chk)
    level = {"ambiguous": "ambiguous", "guesses": "guess"}.get(ask)
    if level and (questions := reading.asks(level)):
        raise NeedsAnswers(label, reading, questions)
    values = _check_values(df, reward_cols, policy_cols, propensity_cols, reading, chk)
    return _assemble(df, reward_cols, values, chk, reading)


def _reward_list(rewards) -> list[str] | None:
    if rewards is None:
        return None
    return [rewards] if isinstance(rewards, str) else list(rewards)


def _check_shape(raw: pd.DataFrame, chk: _Check) -> None:
    if len(raw.columns) == 0 or len(raw) == 0:
        raise LogValidationError(chk.label, ["no data rows: the logs are empty (expected one row per viewed impression)"])


def _apply_mapping(raw: pd.DataFrame, columns: dict[str, str], chk: _Check) -> pd.DataFrame:
    present = set(raw.columns)
    for key, user in columns.items():
        if user not in present:
            chk.problems.append(
                f"column mapping {key}={user}: the logs have no column '{user}' "
                f"(columns found: {', '.join(map(str, raw.columns))})"
            )
    chk.stop_if_problems()
    rename = {user: key for key, user in columns.items()}
    df = raw.rename(columns=rename)
    names = [str(c) for c in df.columns]
    df.columns = names
    seen: dict[str, int] = {}
    for c in names:
        seen[c] = seen.get(c, 0) + 1
    dupes = sorted(c for c, k in seen.items() if k > 1)
    if dupes:
        raise LogValidationError(chk.label, [f"column names appear twice after mapping: {', '.join(dupes)}"])
    return df


def _check_required(df: pd.DataFrame, chk: _Check) -> None:
    missing = [c for c in REQUIRED if c not in df.columns]
    chk.unmapped.extend(missing)
    for c in missing:
        chk.problems.append(
            f"missing required column '{c}' (columns found: {', '.join(df.columns)}); "
            f"if your logs call it differently, map your column to '{c}'"
        )
    chk.stop_if_problems()


def _classify_columns(df: pd.DataFrame, rewards, reading: Reading, chk: _Check
                      ) -> tuple[list[str], list[str], list[str]]:
    """The reward, target-rank and target-propensity columns; problems for missing or unusable ones."""
    policy_cols = [c for c in df.columns if c.startswith(POLICY_PREFIX)]
    propensity_cols = [c for c in df.columns if c.startswith((TARGET_PROPENSITY_PREFIX, TARGET_CONDITIONAL_PREFIX))]
    special = set(KNOWN) | set(policy_cols) | set(propensity_cols)
    reward_cols = list(reading.rewards)
    if rewards is None:
        if not reward_cols:
            left = [f"'{c.column}' ({c.why})" for c in reading.ignored if c.why != "text, not a number"]
            chk.problems.append(
                "no reward column: expected at least one numeric column besides the schema columns "
                f"(columns found: {', '.join(df.columns)})" + (f"; left out: {'; '.join(left)}" if left else ""))
    else:
        for r in reward_cols:
            if r not in df.columns:
                chk.problems.append(f"unknown reward '{r}': no such column (columns found: {', '.join(df.columns)})")
            elif r in special:
                chk.problems.append(f"'{r}' is a schema column and cannot be used as a reward")
        if not reward_cols:
            chk.problems.append("rewards must name at least one reward column, got an empty list")
    chk.stop_if_problems()
    return reward_cols, policy_cols, propensity_cols


@dataclass
class _Values:
    ranks: np.ndarray
    rewards: dict[str, np.ndarray]
    policy_ranks: dict[str, np.ndarray]
    props: dict[str, np.ndarray]
    arm: np.ndarray | None


def _check_values(df, reward_cols, policy_cols, propensity_cols, reading: Reading, chk: _Check) -> _Values:
    """Row-level checks of every used column: ids present, ranks positive integers under the ceiling,
    rewards finite and non-negative, probabilities in range, arms known."""
    problems = chk.problems
    sid_missing = np.flatnonzero(df["session_id"].isna().to_numpy())
    if len(sid_missing):
        problems.append(f"column 'session_id' must not be empty; found empty values at {_rows(sid_missing)}")
    ranks = _integer_column(df["rank"], "rank", _Tagged(problems, "rank"), allow_missing=False,
                            ceiling=chk.limits.max_rank)
    rewards = {}
    for r in reward_cols:
        values = _reward_column(df[r], r, _Tagged(problems, "reward"))
        if values is not None:
            rewards[r] = values

    policy_ranks = {}
    for c in policy_cols:
        if c == POLICY_PREFIX:
            problems.append(f"column '{c}' has no policy name after the '{POLICY_PREFIX}' prefix")
            continue
        vals = _integer_column(df[c], c, problems, allow_missing=True, ceiling=chk.limits.max_rank)
        if vals is not None:
            policy_ranks[c] = vals
    if POLICY_PREFIX + LOGGING_POLICY in policy_cols:
        problems.append(
            f"column '{POLICY_PREFIX}{LOGGING_POLICY}' is reserved: '{LOGGING_POLICY}' names the logged ranks"
        )

    props = {}
    for c in [c for c in LOGGING_PROPENSITIES if c in df.columns] + propensity_cols:
        numeric = pd.to_numeric(df[c], errors="coerce")
        values = numeric.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.flatnonzero(~((values > 0) & (values <= 1)))
        if c in LOGGING_PROPENSITIES and len(bad):
            problems.append(
                f"column '{c}' must hold probabilities in (0, 1]; found {_values(df[c], bad)} at {_rows(bad)}"
            )
            continue
        bad_t = np.flatnonzero(~((values >= 0) & (values <= 1)))
        if c not in LOGGING_PROPENSITIES and len(bad_t):
            problems.append(
                f"column '{c}' must hold probabilities in [0, 1]; found {_values(df[c], bad_t)} at {_rows(bad_t)}"
            )
            continue
        props[c] = values

    arm = None
    if "arm" in df.columns and reading.arm_values is None:
        labels = [str(v) for v in pd.unique(df["arm"].dropna())]
        problems.append(Problem(arm_label_problem(reading.arm_column or "arm", labels), kind="arm"))
    elif "arm" in df.columns:
        arm = map_arm_values(df["arm"], reading.arm_values)
        bad = np.flatnonzero(pd.isna(arm))
        if len(bad):
            shown = reading.arm_values.describe()
            problems.append(Problem(
                f"column 'arm' has labels the arm mapping ({shown}) does not name, or empty values; found "
                f"{_values(df['arm'], bad)} at {_rows(bad)}", kind="arm"))
    chk.stop_if_problems()
    return _Values(ranks=ranks, rewards=rewards, policy_ranks=policy_ranks, props=props, arm=arm)


def _reward_column(col: pd.Series, r: str, problems: list[str]) -> np.ndarray | None:
    if pd.api.types.is_bool_dtype(col):
        col = col.astype(np.float64)
    numeric = pd.to_numeric(col, errors="coerce")
    non_numeric = np.flatnonzero(numeric.isna().to_numpy() & col.notna().to_numpy())
    if len(non_numeric):
        problems.append(
            f"reward column '{r}' must be numeric; found {_values(col, non_numeric)} at {_rows(non_numeric)}"
        )
        return None
    values = numeric.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        problems.append(
            f"reward column '{r}' must hold finite numbers (no NaN, empty or inf); found "
            f"{_values(numeric, bad)} at {_rows(bad)}"
        )
        return None
    neg = np.flatnonzero(values < 0)
    if len(neg):
        problems.append(
            f"reward column '{r}' must be non-negative (DCG and nDCG assume gains ≥ 0); found "
            f"{_values(numeric, neg)} at {_rows(neg)}"
        )
        return None
    return values


def _assemble(df: pd.DataFrame, reward_cols: list[str], v: _Values, chk: _Check, reading: Reading) -> Logs:
    """Sort by session and rank, check duplicates and session-level keys, build the frame and sessions."""
    problems, notes = chk.problems, chk.notes
    n = len(df)
    ranks = v.ranks
    codes, uniques = pd.factorize(df["session_id"], sort=True)
    session = codes.astype(np.int64)
    order = np.lexsort((ranks, session))
    session_sorted = session[order]
    ranks_sorted = ranks[order]
    dup = np.flatnonzero((session_sorted[1:] == session_sorted[:-1]) & (ranks_sorted[1:] == ranks_sorted[:-1]))
    if len(dup):
        examples = []
        for k in dup[:MAX_SHOWN]:
            a, b = sorted((int(order[k]) + 1, int(order[k + 1]) + 1))
            examples.append(
                f"session {_show(uniques[session_sorted[k]])} rank {int(ranks_sorted[k])} (data rows {a} and {b})"
            )
        more = f" and {len(dup) - MAX_SHOWN} more" if len(dup) > MAX_SHOWN else ""
        problems.append(Problem(
            "each (session_id, rank) must appear once, found duplicates: " + "; ".join(examples) + more,
            kind="duplicate"))

    starts = np.flatnonzero(np.r_[True, session_sorted[1:] != session_sorted[:-1]])
    uniques = np.asarray(uniques)
    cols: dict[str, object] = {"session": session_sorted, "session_id": uniques[session_sorted],
                               "rank": ranks_sorted}
    if "item_id" in df.columns:
        cols["item_id"] = df["item_id"].take(order).to_numpy()
    for r in reward_cols:
        cols[r] = v.rewards[r][order]
    for c, vals in v.policy_ranks.items():
        cols[c] = vals[order]
    for c, vals in v.props.items():
        cols[c] = vals[order]

    # session-level keys, worked on as integer codes (fast on tens of millions of rows)
    defaults = {"experiment_id": "all", "day": 1, "arm": "control", "segment": "all"}
    keys: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for key, default in defaults.items():
        if key == "arm" and v.arm is not None:
            codes_k, cats = pd.factorize(v.arm, sort=True)
        elif key in df.columns:
            codes_k, cats = pd.factorize(df[key], sort=True)
            col_missing = np.flatnonzero(codes_k < 0)
            if len(col_missing):
                problems.append(f"column '{key}' must not be empty; found empty values at {_rows(col_missing)}")
                continue
        else:
            codes_k, cats = np.zeros(n, dtype=np.int64), np.array([default], dtype=object)
            notes.append(f"no '{key}' column: every row is treated as {key} = {default!r}")
        codes_sorted = np.asarray(codes_k, dtype=np.int64)[order]
        cats = np.asarray(cats, dtype=object)
        lo = np.minimum.reduceat(codes_sorted, starts)
        hi = np.maximum.reduceat(codes_sorted, starts)
        mixed = np.flatnonzero(lo != hi)
        if len(mixed):
            first_row = starts[mixed[0]]
            stop = starts[mixed[0] + 1] if mixed[0] + 1 < len(starts) else n
            k = first_row + int(np.flatnonzero(codes_sorted[first_row:stop] != codes_sorted[first_row])[0])
            problems.append(
                f"column '{key}' must be the same on every row of a session; session "
                f"{_show(cols['session_id'][k])} has {_show(cats[codes_sorted[first_row]])} and "
                f"{_show(cats[codes_sorted[k]])} (data row {int(order[k]) + 1})"
            )
            continue
        keys[key] = (codes_sorted, cats)
    chk.stop_if_problems()

    session_keys = {}
    for key, (codes_sorted, cats) in keys.items():
        if key == "day":
            values = np.asarray(_normalise_day(pd.Series(cats)))
            cols[key] = values[codes_sorted]
            session_keys[key] = values[codes_sorted[starts]]
        else:
            labels = pd.Index([str(c) for c in cats])
            if labels.has_duplicates:  # e.g. 1 and "1": fall back to the text values
                column = pd.Categorical(labels.to_numpy()[codes_sorted])
            else:
                order_cats = np.argsort(labels.to_numpy())
                rank_of = np.empty_like(order_cats)
                rank_of[order_cats] = np.arange(len(order_cats))
                column = pd.Categorical.from_codes(rank_of[codes_sorted], labels[order_cats])
            cols[key] = column
            session_keys[key] = column[starts]
    frame = pd.DataFrame(cols)

    counts = np.diff(np.r_[starts, len(session_sorted)])
    lengths = np.maximum.reduceat(ranks_sorted, starts)
    sessions = pd.DataFrame({
        "session": session_sorted[starts],
        "session_id": uniques[session_sorted[starts]],
        "experiment_id": session_keys["experiment_id"],
        "day": session_keys["day"],
        "arm": session_keys["arm"],
        "segment": session_keys["segment"],
        "length": lengths.astype(np.int32),
        "n_rows": counts.astype(np.int32),
    })
    gaps = int((sessions["length"] != sessions["n_rows"]).sum())
    if gaps:
        notes.append(
            f"{gaps} session(s) have gaps in their ranks (rows are not ranks 1..t); fine for bandit-style "
            "logs with propensities, but the learnt position-bias model assumes every rank up to the "
            "session's last one was viewed"
        )
    policies = tuple(c[len(POLICY_PREFIX):] for c in v.policy_ranks)
    return Logs(frame=frame, rewards=tuple(reward_cols), policies=policies, source=chk.label,
                notes=tuple(notes), sessions=sessions, columns=chk.columns, reading=reading)
