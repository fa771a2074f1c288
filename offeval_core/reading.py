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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core.arm_values import NO_ARMS, ArmValues, guess_arm_values, normalise_label
from offeval_core.log_schema import (
    KNOWN,
    POLICY_PREFIX,
    TARGET_CONDITIONAL_PREFIX,
    TARGET_PROPENSITY_PREFIX,
)
from offeval_core.mapping import dates_like, rank_like_rewards

__all__ = ["ColumnReading", "Hint", "Question", "Reading", "arm_labels", "identifier_reason", "read_columns",
           "reward_named"]

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


def _id_named(name: str) -> bool:
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
    if _id_named(name):
        return False
    return any(t.startswith(_REWARD_STEMS) for t in _tokens(name))


def _feature_named(name: str) -> str:
    """'a feature' / 'a time' when the name says so, else ''."""
    low = str(name).strip().lower()
    toks = _tokens(name)
    if low in _TIME_NAMES or low.endswith(("_ts", "_at", "timestamp", "_epoch", "_time_ms")):
        return "named like a time, not a reward"
    if any(t in _FEATURE_WORDS for t in toks):
        return "named like a feature or a model output, not a reward"
    return ""


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


# ------------------------------------------------------------------------------------------- values


def _int_like(v: np.ndarray) -> bool:
    return len(v) > 0 and bool(np.all(np.isfinite(v))) and bool(np.all(v == np.round(v)))


@dataclass
class _Frame:
    """The mapped frame with the session codes computed on first use."""

    df: pd.DataFrame
    _codes: np.ndarray | None = None
    _multi: np.ndarray | None = None

    @property
    def codes(self) -> np.ndarray:
        if self._codes is None:
            self._codes = pd.factorize(self.df["session_id"])[0].astype(np.int64)
        return self._codes

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


def identifier_reason(name: str, values: np.ndarray, frame: _Frame | None = None, *,
                      items: np.ndarray | None = None) -> str:
    """Why a numeric column is an identifier or a counter rather than a reward ('' when it is not).

    >>> identifier_reason("visit_id", np.zeros(3))
    'named like an identifier'
    >>> identifier_reason("n", np.arange(100.0))
    'a counter: whole numbers that increase on every row'
    """
    if _id_named(name):
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


def _arm_like(series: pd.Series, frame: _Frame) -> tuple[str, ...]:
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
    frame = _Frame(df)
    policy_cols = [c for c in df.columns if c.startswith((POLICY_PREFIX, TARGET_PROPENSITY_PREFIX,
                                                          TARGET_CONDITIONAL_PREFIX))]
    special = set(KNOWN) | set(policy_cols)
    others = [c for c in df.columns if c not in special]
    explicit = set(rewards or ())
    items = pd.factorize(df["item_id"])[0] if "item_id" in df.columns else None
    has_arm = "arm" in df.columns
    declined = arms == NO_ARMS
    arm_values = arm_labels(df, arms) if has_arm else None
    named = [c for c in rewards if c in df.columns] if rewards is not None else [c for c in others if reward_named(c)]
    logged = pd.to_numeric(df["rank"], errors="coerce").max()
    deepest = int(min(1000, 4 * logged)) if np.isfinite(logged) else 1000  # a policy ranks about as deep
    varying: list[bool] = []

    def rewards_vary() -> bool:  # computed once, only when a column reaches the session-attribute rule
        if not varying:
            varying.append(any(_numeric(df[c]) is not None and not _session_constant(df[c], frame) for c in named))
        return varying[0]

    decided: dict[str, ColumnReading] = {}
    candidates: list[str] = []
    for c in others:
        col = df[c]
        values = _numeric(col)
        if c not in explicit and not reward_named(c) and (labels := _arm_like(col, frame)):
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
        why = _feature_named(c) or identifier_reason(c, values, frame, items=items)
        if why.startswith("an identifier: no value repeats") and "item_id" not in df.columns:
            hint = Hint("item_id", c, why="the item shown")
        if not why and np.all(np.isfinite(values)) and len(values) and np.all(values == values[0]):
            why = "the same value on every row: carries nothing to estimate"
        if not why and not np.all(np.isfinite(values)):
            why = "has empty or infinite values: not a reward"
        if not why and (values < 0).any():
            why = "has negative values: rewards are ≥ 0"
        if not why and frame.multi_row.sum() >= 20 and _session_constant(col, frame) and rewards_vary():
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


def _text_hint(name: str, col: pd.Series, frame: _Frame) -> Hint | None:
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


def _numeric(col: pd.Series) -> np.ndarray | None:
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


def _session_constant(col: pd.Series, frame: _Frame) -> bool:
    return bool(frame.multi_row.any()) and frame.constant_in_sessions(col.to_numpy())

