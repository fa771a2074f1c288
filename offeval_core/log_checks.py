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
from offeval_core.errors import LogValidationError, Problem
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

__all__ = ["Check", "classify_columns", "first_problem", "looks_numeric", "mapped_columns", "validate"]


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


def looks_numeric(col: pd.Series) -> bool:
    """A reward candidate: a numeric/bool column, or a text column whose values are mostly numbers
    (so a stray 'yes' in a click column is reported instead of the column being silently ignored); never a
    date or time column."""
    if pd.api.types.is_datetime64_any_dtype(col) or pd.api.types.is_timedelta64_dtype(col):
        return False
    if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        return True
    present = col.dropna()
    if present.empty:
        return False
    return bool(pd.to_numeric(present, errors="coerce").notna().mean() >= 0.5)


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
              limits: Limits | None = None, guess: bool = False) -> Logs:
    """Validation as a pipeline of phases; each collects every problem it finds, and the first phase
    with problems stops the pipeline with one LogValidationError listing them."""
    chk = Check(label=label, limits=limits or Limits.from_env())
    _check_shape(raw, chk)
    try:  # patterns (rank__*=pos_*) and, on request, guesses for common names
        columns, guessed = column_mapping.resolve(raw, columns, guess=guess)
    except ValueError as exc:
        raise LogValidationError(label, [str(exc)]) from None
    chk.notes.extend(guessed)
    chk.columns = dict(columns)
    df = _apply_mapping(raw, columns, chk)
    reward_cols, policy_cols, propensity_cols = classify_columns(list(df.columns), rewards,
                                                                 lambda c: looks_numeric(df[c]), chk)
    if rewards is None and (ranky := column_mapping.rank_like_rewards(df, reward_cols)):
        chk.notes.append(column_mapping.rank_like_note([columns.get(c, c) for c in ranky]))
    values = _check_values(df, reward_cols, policy_cols, propensity_cols, chk)
    return _assemble(df, reward_cols, values, chk)


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
                                f"(columns found: {', '.join(names)})")
    chk.stop_if_problems()
    rename = {user: key for key, user in columns.items()}
    out = [rename.get(c, c) for c in names]
    dupes = sorted({c for c in out if out.count(c) > 1})
    if dupes:
        raise LogValidationError(chk.label, [f"column names appear twice after mapping: {', '.join(dupes)}"])
    return out


def classify_columns(names: list[str], rewards, looks_numeric_column, chk: Check
                     ) -> tuple[list[str], list[str], list[str]]:
    """The reward, target-rank and target-propensity columns among ``names`` (``looks_numeric_column(name)``
    decides which other columns are reward candidates); problems for missing or unusable ones."""
    missing = [c for c in REQUIRED if c not in names]
    chk.unmapped.extend(missing)
    for c in missing:
        chk.problems.append(
            f"missing required column '{c}' (columns found: {', '.join(names)}); "
            f"if your logs call it differently, map your column to '{c}'"
        )
    policy_cols = [c for c in names if c.startswith(POLICY_PREFIX)]
    propensity_cols = [c for c in names if c.startswith((TARGET_PROPENSITY_PREFIX, TARGET_CONDITIONAL_PREFIX))]
    special = set(KNOWN) | set(policy_cols) | set(propensity_cols)

    if rewards is None:
        reward_cols = [c for c in names if c not in special and looks_numeric_column(c)]
        chosen = set(reward_cols)
        ignored = [c for c in names if c not in special and c not in chosen]
        if ignored:
            chk.notes.append(f"non-numeric column(s) ignored (not rewards): {', '.join(ignored)}")
        if not reward_cols and not missing:
            chk.problems.append(
                "no reward column: expected at least one numeric column besides the schema columns "
                f"(columns found: {', '.join(names)})"
            )
    else:
        if isinstance(rewards, str):
            rewards = [rewards]
        reward_cols = list(rewards)
        for r in reward_cols:
            if r not in names:
                chk.problems.append(f"unknown reward '{r}': no such column (columns found: {', '.join(names)})")
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


def _check_values(df, reward_cols, policy_cols, propensity_cols, chk: Check) -> _Values:
    """Row-level checks of every used column (:func:`~offeval_core.log_rules.value_phase`): ids present, ranks
    positive integers under the ceiling, rewards finite and non-negative, probabilities in range, arms known."""
    items = value_phase(list(df.columns), reward_cols, policy_cols, propensity_cols, df.__getitem__,
                        ceiling=chk.limits.max_rank)
    chk.problems.extend(p for p in map(first_problem, items) if p is not None)
    chk.stop_if_problems()
    converted = {item[0].column: item[0].converted for item in items if not isinstance(item, str)}
    policy_ranks = {c: np.where(np.isnan(converted[c]), -1, converted[c]).astype(np.int32) for c in policy_cols}
    props = [c for c in LOGGING_PROPENSITIES if c in df.columns] + propensity_cols
    return _Values(ranks=converted["rank"].astype(np.int32), rewards={r: converted[r] for r in reward_cols},
                   policy_ranks=policy_ranks, props={c: converted[c] for c in props},
                   arm=converted["arm"].to_numpy(dtype=object) if "arm" in df.columns else None)


def _assemble(df: pd.DataFrame, reward_cols: list[str], v: _Values, chk: Check) -> Logs:
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
                notes=tuple(notes), sessions=sessions, columns=chk.columns)
