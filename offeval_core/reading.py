"""How a file's columns were read: what each column became and why, which columns are rewards, and the
questions a person must answer when the file does not say.

:func:`read_columns` runs inside :func:`offeval_core.logs.read_logs` on the mapped frame, before any value
check. Rewards are inferred only among plausible columns: identifiers (names such as ``id``, ``*_id``,
``uuid``, ``key``; whole numbers that differ on almost every row, increase row after row, never repeat
within a session, or have one value per item), features and times (by name), ranks (whole numbers from 1
on every row), columns with negative or missing values and session attributes are left out, each with its
reason. A column named like a reward (``click``, ``like``, ``watch_time``…) is a reward; a plausible column
with another name is a guess, and several such columns with no reward-named one are a question. An unused
column that looks meaningful gets a hint: two labels splitting the sessions about evenly are probably the
A/B arm. The result, :class:`Reading`, is frozen and interface-neutral; each interface phrases the hints
(``--map arm=bucket`` on the command line, the mapping form in the browser).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core.arm_values import NO_ARMS, ArmValues, guess_arm_values
from offeval_core.column_kinds import (
    SessionFrame,
    arm_like_labels,
    feature_reason,
    identifier_reason,
    numeric_values,
    reward_named,
    session_constant,
)
from offeval_core.log_schema import (
    KNOWN,
    POLICY_PREFIX,
    TARGET_CONDITIONAL_PREFIX,
    TARGET_PROPENSITY_PREFIX,
)
from offeval_core.mapping import dates_like, rank_like_rewards

__all__ = ["ColumnReading", "Hint", "Question", "Reading", "arm_labels", "read_columns"]

# ---------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Hint:
    """What an unused column probably is: ``field`` (the schema field, e.g. ``arm``, ``item_id``,
    ``rank__*``), ``column`` (the user's column) and, for an arm, the labels and their guessed mapping."""

    field: str
    column: str
    labels: tuple[str, ...] = ()
    arms: ArmValues | None = None
    why: str = ""


@dataclass(frozen=True)
class ColumnReading:
    """One column of the file: ``role`` (a schema field, ``reward``, ``target policy`` or ``ignored``),
    ``how`` it was decided (``schema name``, ``given``, ``pattern``, ``guessed``, ``named like a reward``,
    ``inferred``…) and ``why`` in words; ``hint`` for an ignored column that looks meaningful."""

    column: str
    role: str
    how: str = ""
    why: str = ""
    hint: Hint | None = None
    policy: str = ""


@dataclass(frozen=True)
class Question:
    """Something the file does not say. ``level`` is ``"guess"`` (offeval chose, a person should confirm) or
    ``"ambiguous"`` (offeval cannot choose); ``topic`` is ``rewards`` or ``arm``; ``options`` the candidate
    columns; ``guess`` what offeval would use."""

    topic: str
    level: str
    text: str
    options: tuple[str, ...] = ()
    guess: tuple[str, ...] = ()
    hint: Hint | None = None


@dataclass(frozen=True)
class Reading:
    """How the columns of one file were read (see the module docstring)."""

    source: str
    columns: tuple[ColumnReading, ...]
    rewards: tuple[str, ...]
    reward_how: str
    arm_column: str | None = None
    arm_values: ArmValues | None = None
    arms_declined: bool = False
    sessions_from_rows: bool = False
    questions: tuple[Question, ...] = ()
    guesses: tuple[str, ...] = field(default=())

    @property
    def ignored(self) -> tuple[ColumnReading, ...]:
        return tuple(c for c in self.columns if c.role == "ignored")

    def of(self, column: str) -> ColumnReading | None:
        return next((c for c in self.columns if c.column == column), None)

    def asks(self, level: str) -> tuple[Question, ...]:
        """The questions at ``level`` or above: ``"guess"`` gives every question, ``"ambiguous"`` only those
        offeval cannot answer itself."""
        if level == "guess":
            return self.questions
        return tuple(q for q in self.questions if q.level == "ambiguous")


# -------------------------------------------------------------------------------------------- main


def _role_of(name: str) -> tuple[str, str]:
    """(role, policy) of a schema-named column."""
    for prefix, kind in ((POLICY_PREFIX, "ranks"), (TARGET_PROPENSITY_PREFIX, "propensities"),
                         (TARGET_CONDITIONAL_PREFIX, "conditional propensities")):
        if name.startswith(prefix):
            return f"target policy ({kind})", name[len(prefix):]
    return name, ""


_ORIGIN_WHY = {"given": "mapped by you", "pattern": "a policy-column pattern", "guessed": "guessed from its name",
               "schema name": "the schema's name"}


def arm_labels(df: pd.DataFrame, arms: ArmValues | str | None) -> ArmValues | None:
    """The arm-label mapping of the frame's ``arm`` column: the given one, else a guess for the schema's labels
    or a common pair; None when the labels need the user (then :func:`read_columns`'s caller reports them)."""
    if isinstance(arms, ArmValues):
        return arms
    return guess_arm_values(pd.unique(df["arm"].dropna()))


def read_columns(df: pd.DataFrame, *, source: str, columns: Mapping[str, str], how: Mapping[str, str],
                 rewards: Sequence[str] | None, arms: ArmValues | str | None,
                 sessions_from_rows: bool = False) -> Reading:
    """Read the mapped frame ``df`` (schema names; ``columns`` maps schema name → the user's column, ``how``
    says how each entry came about). With ``rewards`` None the rewards are inferred (module docstring);
    ``arms`` is the given arm-label mapping (or ``"none"``: the file has no arm column to look for)."""
    frame = SessionFrame(df)
    policy_cols = [c for c in df.columns if c.startswith((POLICY_PREFIX, TARGET_PROPENSITY_PREFIX,
                                                          TARGET_CONDITIONAL_PREFIX))]
    special = set(KNOWN) | set(policy_cols)
    others = [c for c in df.columns if c not in special]
    explicit = set(rewards or ())
    has_arm = "arm" in df.columns
    declined = arms == NO_ARMS
    arm_values = arm_labels(df, arms) if has_arm else None
    named = [c for c in rewards if c in df.columns] if rewards is not None else [c for c in others if reward_named(c)]
    logged = pd.to_numeric(df["rank"], errors="coerce").max()
    deepest = int(min(1000, 4 * logged)) if np.isfinite(logged) else 1000  # a policy ranks about as deep
    varying: list[bool] = []

    def rewards_vary() -> bool:  # computed once, only when a column reaches the session-attribute rule
        if not varying:
            varying.append(any(numeric_values(df[c]) is not None and not session_constant(df[c], frame) for c in named))
        return varying[0]

    decided: dict[str, ColumnReading] = {}
    candidates: list[str] = []
    for c in others:
        col = df[c]
        values = numeric_values(col)
        if c not in explicit and not reward_named(c) and (labels := arm_like_labels(col, frame)):
            if not has_arm and not declined:
                hint = Hint("arm", c, labels, guess_arm_values(labels),
                            "two labels, the same on every row of a session, each on about half the sessions")
            elif "segment" not in df.columns:
                hint = Hint("segment", c, labels, None, "two labels, the same on every row of a session")
            else:
                hint = None
            decided[c] = ColumnReading(c, "ignored", "inferred", "two labels, the same on every row of a session, "
                                       "each on about half the sessions: not a reward", hint)
            continue
        if values is None:
            decided[c] = ColumnReading(c, "ignored", "inferred", "text, not a number", _text_hint(c, col, frame))
            continue
        if c in explicit:
            continue
        if rewards is None and reward_named(c):
            candidates.append(c)
            continue
        hint = None
        if rank_like_rewards(df, [c], max_rank=deepest):
            why = "looks like ranks (whole numbers from 1 on every row, never 0), not a reward"
            decided[c] = ColumnReading(c, "ignored", "inferred", why,
                                       Hint("rank__*", c, why="the ranks a target policy would give"))
            continue
        why = feature_reason(c) or identifier_reason(c, values, frame, items=frame.items)
        if why.startswith("an identifier: no value repeats") and "item_id" not in df.columns:
            hint = Hint("item_id", c, why="the item shown")
        if not why and np.all(np.isfinite(values)) and len(values) and np.all(values == values[0]):
            why = "the same value on every row: carries nothing to estimate"
        if not why and not np.all(np.isfinite(values)):
            why = "has empty or infinite values: not a reward"
        if not why and (values < 0).any():
            why = "has negative values: rewards are ≥ 0"
        if not why and frame.multi_row.sum() >= 20 and session_constant(col, frame) and rewards_vary():
            why = "the same on every row of a session while the rewards vary by row: a session attribute"
        if why:
            decided[c] = ColumnReading(c, "ignored", "inferred", why, hint)
        elif rewards is None:
            candidates.append(c)

    if rewards is not None:
        chosen, reward_how = list(rewards), "given"
    else:
        chosen = candidates
        unnamed = [c for c in chosen if not reward_named(c)]
        if not chosen:
            reward_how = "none"
        elif not unnamed:
            reward_how = "named"
        elif len(unnamed) == len(chosen) and len(chosen) >= 2:
            reward_how = "ambiguous"
        else:
            reward_how = "guessed"

    questions: list[Question] = []
    guesses: list[str] = []
    if reward_how in ("guessed", "ambiguous"):
        unnamed = [c for c in chosen if not reward_named(c)]
        if reward_how == "ambiguous":
            text = (f"which columns are rewards? none is named like one (click, like, purchase, watch…) and "
                    f"{len(chosen)} numeric columns could be: {', '.join(chosen)}")
        else:
            text = (f"{', '.join(unnamed)} {'is' if len(unnamed) == 1 else 'are'} used as reward"
                    f"{'s' if len(unnamed) > 1 else ''} by value alone (numeric, ≥ 0, not an identifier, rank or "
                    "feature): confirm or choose the rewards")
            guesses.append(f"rewards {', '.join(chosen)}: {', '.join(unnamed)} chosen by value (numeric, ≥ 0, not "
                           "an identifier, rank or feature), not by name")
        questions.append(Question("rewards", "ambiguous" if reward_how == "ambiguous" else "guess", text,
                                  options=tuple(chosen), guess=tuple(chosen)))
    arm_hints = [r.hint for r in decided.values() if r.hint is not None and r.hint.field == "arm"]
    if len(arm_hints) == 1:
        h = arm_hints[0]
        questions.append(Question(
            "arm", "ambiguous",
            f"column {h.column!r} looks like the A/B arm (labels {' and '.join(map(repr, h.labels))}, the same on "
            "every row of a session, each on about half the sessions); without an arm every session counts as "
            "the logging policy's", options=(h.column,), guess=(h.column,), hint=h))
    if arm_values is not None and arm_values.how == "guessed":
        guesses.append(f"arm labels of column {columns.get('arm', 'arm')!r}: {arm_values.describe()} (a common "
                       "pair)")
    if sessions_from_rows:
        guesses.append("sessions: no session column, so each row is one session (a bandit round with a logging "
                       "propensity)")

    out: list[ColumnReading] = []
    for c in df.columns:
        name = columns.get(c, c)
        if c == "session_id" and sessions_from_rows:
            continue
        if c in special:
            role, policy = _role_of(c)
            origin = how.get(c) or "schema name"
            out.append(ColumnReading(name, role, origin, _ORIGIN_WHY.get(origin, origin), policy=policy))
        elif c in decided:
            out.append(decided[c])
        elif c in chosen:
            if rewards is not None:
                out.append(ColumnReading(name, "reward", "given", "named as a reward by you"))
            elif reward_named(c):
                out.append(ColumnReading(name, "reward", "named like a reward", "named like a reward"))
            else:
                out.append(ColumnReading(name, "reward", "inferred",
                                         "numeric, ≥ 0, not an identifier, rank or feature (chosen by value)"))
        else:
            out.append(ColumnReading(name, "ignored", "", "numeric, not among the rewards you named"))
    return Reading(source=source, columns=tuple(out), rewards=tuple(chosen), reward_how=reward_how,
                   arm_column=columns.get("arm", "arm") if has_arm else None, arm_values=arm_values,
                   arms_declined=declined, sessions_from_rows=sessions_from_rows, questions=tuple(questions),
                   guesses=tuple(guesses))


def _text_hint(name: str, col: pd.Series, frame: SessionFrame) -> Hint | None:
    """What an unused text column probably is: dates → the day; a few labels constant within sessions → the
    experiment (or the segment, when the experiment is mapped)."""
    df = frame.df
    if "day" not in df.columns and dates_like(col):
        return Hint("day", name, why="dates")
    if not frame.multi_row.any() or col.head(200_000).nunique() > 100 or col.isna().any():
        return None
    field = next((f for f in ("experiment_id", "segment") if f not in df.columns), None)
    if field is None or col.nunique() > 100 or not frame.constant_in_sessions(col.to_numpy()):
        return None
    n = col.nunique()
    return Hint(field, name, why=f"{n} label{'s' if n > 1 else ''}, the same on every row of a session")


