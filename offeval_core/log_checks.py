"""Validation of ranking logs as a pipeline of phases (:func:`validate`): shape, column mapping, column
classification, row-level values, assembly of :class:`~offeval_core.log_schema.Logs`. Each phase collects
every problem it finds; the first phase with problems stops with one
:class:`~offeval_core.errors.LogValidationError` listing them (data rows 1-based, at most ``MAX_SHOWN`` shown).

The rules on values and the problem texts are defined once in :mod:`offeval_core.log_rules`, which the
reduce over Parquet files (:mod:`offeval_core.engine.checks`) runs too; this module evaluates them on pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core import mapping as column_mapping
from offeval_core.arm_values import NO_ARMS, ArmValues, arm_label_problem, parse_arms
from offeval_core.errors import InputError, LogValidationError, NeedsAnswers, Problem
from offeval_core.formatting import name_list
from offeval_core.limits import Limits
from offeval_core.log_rules import (
    column_rules,
    duplicate_examples,
    duplicates_text,
    mixed_key_text,
    problem_text,
    value_phase,
)
from offeval_core.log_schema import (
    KNOWN,
    LOGGING_PROPENSITIES,
    MAX_SHOWN,
    POLICY_PREFIX,
    REQUIRED,
    TARGET_CONDITIONAL_PREFIX,
    TARGET_PROPENSITY_PREFIX,
    Logs,
)
from offeval_core.reading import Reading, read_columns

__all__ = ["ASK_LEVELS", "Check", "arm_rule", "check_required", "classify_columns", "first_problem", "mapped_columns",
           "questions_at", "validate"]

ASK_LEVELS = ("never", "ambiguous", "guesses")
"""When reading raises NeedsAnswers: never (the questions stay in the reading), on questions offeval cannot
answer (the default: the command line and notebooks) or on every guess too (the browser asks before computing)."""


def _problem(exc: Exception, label: str) -> str:
    text = str(exc)
    return text[len(label) + 2:] if text.startswith(label + ": ") else text


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


@dataclass
class Check:
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
        raise InputError(f"ask must be one of {', '.join(ASK_LEVELS)}, got {ask!r}")
    chk = Check(label=label, limits=limits or Limits.from_env())
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
    check_required(list(df.columns), chk)
    reading = read_columns(df, source=label, columns=columns, how=how, rewards=_reward_list(rewards),
                           arms=arms, sessions_from_rows=from_rows)
    reward_cols, policy_cols, propensity_cols = classify_columns(list(df.columns), rewards, reading, chk)
    if questions := questions_at(reading, ask):
        raise NeedsAnswers(label, reading, questions)
    arm = arm_rule(reading, lambda: pd.unique(df["arm"].dropna())) if "arm" in df.columns else None
    values = _check_values(df, reward_cols, policy_cols, propensity_cols, arm, chk)
    return _assemble(df, reward_cols, values, chk, reading)


def questions_at(reading: Reading, ask: str) -> tuple:
    """The reading's questions that stop a reader asked at level ``ask`` (one of :data:`ASK_LEVELS`)."""
    level = {"ambiguous": "ambiguous", "guesses": "guess"}.get(ask)
    return reading.asks(level) if level else ()


def arm_rule(reading: Reading, labels) -> ArmValues | Problem:
    """What the rule of the ``arm`` column checks against: the reading's arm mapping (given, the schema's or a
    common pair), or, when the labels need the user, the problem line naming them (``labels()``: the column's
    distinct labels, asked for only then)."""
    if reading.arm_values is not None:
        return reading.arm_values
    return Problem(arm_label_problem(reading.arm_column or "arm", [str(v) for v in labels()]), kind="arm")


def _reward_list(rewards) -> list[str] | None:
    if rewards is None:
        return None
    return [rewards] if isinstance(rewards, str) else list(rewards)


def _check_shape(raw: pd.DataFrame, chk: Check) -> None:
    if len(raw.columns) == 0 or len(raw) == 0:
        raise LogValidationError(chk.label, ["no data rows: the logs are empty (expected one row per viewed impression)"])


def _apply_mapping(raw: pd.DataFrame, columns: dict[str, str], chk: Check) -> pd.DataFrame:
    names = mapped_columns([str(c) for c in raw.columns], columns, chk)
    df = raw.rename(columns={user: key for key, user in columns.items()})
    df.columns = names
    return df


def mapped_columns(names: list[str], columns: dict[str, str], chk: Check) -> list[str]:
    """The column names once the user's columns are renamed to the schema's (``columns``: schema name → the
    user's column); a mapping that names an absent column, or a name that then appears twice, stops here."""
    present = set(names)
    for key, user in columns.items():
        if user not in present:
            chk.problems.append(f"column mapping {key}={user}: the logs have no column '{user}' "
                                f"(columns found: {name_list(names)})")
    chk.stop_if_problems()
    rename = {user: key for key, user in columns.items()}
    out = [rename.get(c, c) for c in names]
    dupes = sorted({c for c in out if out.count(c) > 1})
    if dupes:
        raise LogValidationError(chk.label, [f"column names appear twice after mapping: {', '.join(dupes)}"])
    return out


def check_required(names: list[str], chk: Check) -> None:
    """The schema's required columns (``session_id``, ``rank``) among ``names``; stops when one is missing."""
    missing = [c for c in REQUIRED if c not in names]
    chk.unmapped.extend(missing)
    for c in missing:
        chk.problems.append(
            f"missing required column '{c}' (columns found: {name_list(names)}); "
            f"if your logs call it differently, map your column to '{c}'"
        )
    chk.stop_if_problems()


def classify_columns(names: list[str], rewards, reading: Reading | None, chk: Check
                     ) -> tuple[list[str], list[str], list[str]]:
    """The reward, target-rank and target-propensity columns among ``names``: the rewards given, else the ones
    the reading inferred (:func:`~offeval_core.reading.read_columns`); problems for missing or unusable ones."""
    policy_cols = [c for c in names if c.startswith(POLICY_PREFIX)]
    propensity_cols = [c for c in names if c.startswith((TARGET_PROPENSITY_PREFIX, TARGET_CONDITIONAL_PREFIX))]
    special = set(KNOWN) | set(policy_cols) | set(propensity_cols)
    if rewards is None:
        reward_cols = list(reading.rewards) if reading is not None else []
        if not reward_cols:
            left = [f"'{c.column}' ({c.why})" for c in (reading.ignored if reading is not None else ())
                    if c.why != "text, not a number"]
            chk.problems.append(
                "no reward column: expected at least one numeric column besides the schema columns "
                f"(columns found: {name_list(names)})" + (f"; left out: {name_list(left, limit=10, sep='; ')}" if left else ""))
    else:
        reward_cols = _reward_list(rewards)
        for r in reward_cols:
            if r not in names:
                chk.problems.append(f"unknown reward '{r}': no such column (columns found: {name_list(names)})")
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


def first_problem(item) -> str | None:
    """The problem of one item of :func:`~offeval_core.log_rules.value_phase` on pandas columns: the fixed
    line, or the first rule of the column that finds offending rows (None when none does)."""
    if isinstance(item, str):
        return item
    for rule in item:
        idx = np.flatnonzero(rule.bad)
        if len(idx):
            values = [] if rule.shown is None else rule.shown.iloc[idx[:MAX_SHOWN]].tolist()
            return Problem(problem_text(rule, values=values, rows=idx[:MAX_SHOWN] + 1, total=len(idx)),
                           kind=rule.kind)
    return None


def _check_values(df, reward_cols, policy_cols, propensity_cols, arm, chk: Check) -> _Values:
    """Row-level checks of every used column (:func:`~offeval_core.log_rules.value_phase`): ids present, ranks
    positive integers under the ceiling, rewards finite and non-negative, probabilities in range, arm labels
    mapped by ``arm`` (:func:`arm_rule`)."""
    items = value_phase(list(df.columns), reward_cols, policy_cols, propensity_cols, df.__getitem__,
                        ceiling=chk.limits.max_rank, arms=arm)
    chk.problems.extend(p for p in map(first_problem, items) if p is not None)
    chk.stop_if_problems()
    converted = {item[0].column: item[0].converted for item in items if not isinstance(item, str)}
    policy_ranks = {c: np.where(np.isnan(converted[c]), -1, converted[c]).astype(np.int32) for c in policy_cols}
    props = [c for c in LOGGING_PROPENSITIES if c in df.columns] + propensity_cols
    return _Values(ranks=converted["rank"].astype(np.int32), rewards={r: converted[r] for r in reward_cols},
                   policy_ranks=policy_ranks, props={c: converted[c] for c in props},
                   arm=converted["arm"].to_numpy(dtype=object) if "arm" in df.columns else None)


def _assemble(df: pd.DataFrame, reward_cols: list[str], v: _Values, chk: Check, reading: Reading) -> Logs:
    """Sort by session and rank, check duplicates and session-level keys, build the frame and sessions."""
    problems, notes = chk.problems, chk.notes
    n = len(df)
    ranks = v.ranks
    codes, uniques = pd.factorize(df["session_id"], sort=True)
    session = codes.astype(np.int64)
    order = np.lexsort((ranks, session))
    session_sorted = session[order]
    ranks_sorted = ranks[order]
    examples, total = duplicate_examples(session_sorted, ranks_sorted, order + 1,
                                         lambda k: uniques[session_sorted[k]])
    if total:
        problems.append(Problem(duplicates_text("(session_id, rank)", examples, total), kind="duplicate"))
    for c, target in v.policy_ranks.items():  # a target policy ranks each item of a session at its own position
        shown = np.flatnonzero(target >= 1)
        if not len(shown):
            continue
        by = shown[np.argsort(session[shown] * (int(target.max()) + 1) + target[shown], kind="stable")]
        examples, total = duplicate_examples(session[by], target[by], by + 1, lambda k, by=by: uniques[session[by[k]]])
        if total:
            problems.append(Problem(duplicates_text(c, examples, total), kind="duplicate"))

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
            if (problem := first_problem(column_rules("key", key, df[key]))) is not None:
                problems.append(problem)
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
            problems.append(mixed_key_text(key, cols["session_id"][k], cats[codes_sorted[first_row]],
                                           cats[codes_sorted[k]], int(order[k]) + 1))
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
