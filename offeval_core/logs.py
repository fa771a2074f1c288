"""Ranking logs: reading CSV / Parquet / DataFrames in the schema of DESIGN.md, with specific errors.

One row per logged (viewed) impression. Required columns: ``session_id``, ``rank`` and at least one
numeric reward column; optional ``item_id``, ``day``, ``experiment_id``, ``arm`` (``control`` /
``treatment``), ``segment``, ``rank__<policy>`` (one per candidate target policy),
``logging_propensity`` and ``target_propensity__<policy>`` (item-position marginals), and for slate
estimators ``logging_conditional_propensity`` and ``target_conditional_propensity__<policy>`` (item at
this slot given the items above). A column mapping lets users keep their own
names (``{"session_id": "visit", "rank": "pos"}``).

The schema's names and :class:`Logs` are defined in :mod:`offeval_core.log_schema`, the validation phases
in :mod:`offeval_core.log_checks`; this module reads, validates and summarises, and re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from offeval_core.errors import (
    LimitExceeded,
    LogsOverLimit,
    LogValidationError,
    MissingInput,
    UnreadableInput,
    UnreadableLogs,
    WrongType,
)
from offeval_core.fingerprint import file_digest, file_signature, remember_origin
from offeval_core.inputs import file_kind, open_regular, read_csv_limited
from offeval_core.inputs_parquet import read_parquet_limited
from offeval_core.limits import Limits
from offeval_core.log_checks import _problem, validate
from offeval_core.log_schema import (
    ARMS,
    KNOWN,
    LOGGING_POLICY,
    LOGGING_PROPENSITIES,
    MAX_SHOWN,
    OPTIONAL,
    POLICY_PREFIX,
    REQUIRED,
    SESSION_KEYS,
    TARGET_CONDITIONAL_PREFIX,
    TARGET_PROPENSITY_PREFIX,
    Logs,
)
from offeval_core.logs_cache import LogsCache, logs_cache_key

__all__ = [
    "ARMS", "ID_COLUMNS", "KNOWN", "LOGGING_POLICY", "LOGGING_PROPENSITIES", "MAX_SHOWN", "OPTIONAL",
    "POLICY_PREFIX", "REQUIRED", "SESSION_KEYS", "TARGET_CONDITIONAL_PREFIX", "TARGET_PROPENSITY_PREFIX",
    "LogSummary", "LogValidationError", "Logs", "logs_boundary", "read_logs", "read_table", "summarize",
]


# --------------------------------------------------------------------------------------------- reading


ID_COLUMNS = ("session_id", "item_id", "experiment_id", "segment", "arm")
"""Identifier columns: read as text from CSV, so ``001`` and ``1`` are two different values."""


def read_table(source: str | Path, *, limits: Limits | None = None, columns: Mapping[str, str] | None = None,
               name: str | None = None) -> pd.DataFrame:
    """Read a CSV (optionally gzip / bz2 compressed) or Parquet file, or a directory of Parquet files,
    through the input boundary (:mod:`offeval_core.inputs`) within ``limits`` (default: from the
    environment). The identifier columns (``ID_COLUMNS``, under their mapped names) are read as text.

    Raises
    ------
    MissingInput
        No such file (a FileNotFoundError too).
    UnreadableLogs
        Empty, corrupt or truncated file, an unsupported kind, not a regular file.
    LogsOverLimit
        Over one of the limits (bytes, rows, columns).
    """
    limits = limits or Limits.from_env()
    if not str(source).strip():  # Path("") is the working directory: never read it by accident
        raise MissingInput("no file named: the path is empty", source="", expected="a file, directory or pattern")
    path = Path(source)
    label = name or str(source)
    mapping = dict(columns or {})
    text_columns = [mapping.get(c, c) for c in ID_COLUMNS]
    with logs_boundary(label):
        if path.is_dir() or file_kind(path.name) == "parquet":
            return read_parquet_limited(path, source=label, limits=limits)
        if file_kind(path.name) == "csv":
            return read_csv_limited(path, source=label, limits=limits, text_columns=text_columns)
        open_regular(path, source=label).close()  # missing or special files say so first
        raise UnreadableInput(f"{label}: unsupported file type {path.suffix[:20]!r}; expected .csv, .csv.gz, "
                              ".tsv or .parquet", source=label)


@contextmanager
def logs_boundary(label: str):
    """Input-boundary errors of logs as log problems: UnreadableLogs and LogsOverLimit, one problem each (a
    missing file stays MissingInput). Every reader of logs (``read_table``, the reduce's files) uses it."""
    try:
        yield
    except MissingInput:
        raise
    except LimitExceeded as exc:
        raise LogsOverLimit(label, [_problem(exc, label)]) from None
    except UnreadableInput as exc:
        raise UnreadableLogs(label, [_problem(exc, label)]) from None


def read_logs(
    source: str | Path | pd.DataFrame,
    *,
    columns: Mapping[str, str] | None = None,
    rewards: Sequence[str] | None = None,
    name: str | None = None,
    limits: Limits | None = None,
    guess: bool = False,
    arms=None,
    ask: str = "ambiguous",
) -> Logs:
    """Read and validate ranking logs.

    Parameters
    ----------
    source : path to a CSV / Parquet file (or directory of Parquet files), or a pandas DataFrame.
    columns : mapping from schema names to the user's column names, e.g. ``{"rank": "pos"}``.
    rewards : reward columns to use; default every numeric column that is not a schema column.
    name : how to call the source in messages (default: the path).
    limits : the input limits (default :meth:`Limits.from_env`): bytes, rows, columns, rank ceiling.
    guess : also map common names (``visit``, ``pos``, ``variant``…, see :mod:`offeval_core.mapping`); logs
        with a logging propensity and no session column then read each row as one session (a bandit round).
    arms : which arm label is control and which treatment: ``"control=A,treatment=B"`` or an
        :class:`~offeval_core.arm_values.ArmValues`; ``"none"`` when the file has no arm column. Default: the
        labels control / treatment, or a common pair (A / B, 0 / 1, …) guessed and named in ``logs.reading``.
    ask : ``"ambiguous"`` (default: raise :class:`~offeval_core.errors.NeedsAnswers` when the file does not say
        which columns are rewards or which column is the A/B arm; guesses offeval can stand by are kept and
        described in ``logs.reading``), ``"guesses"`` (also when a reward was chosen by value alone: the
        browser asks before computing) or ``"never"`` (keep every guess; the questions stay in
        ``logs.reading.questions``).

    Raises
    ------
    LogValidationError
        With every problem found: missing columns, duplicate (session_id, rank), non-positive ranks,
        NaN rewards, unknown arms, propensities outside (0, 1], empty input...
    NeedsAnswers
        With ``ask``: what the file does not say, with ``reading`` (what was understood); nothing computed.
    """
    if isinstance(source, pd.DataFrame):
        raw = source
        label = name or "<DataFrame>"
    elif isinstance(source, str | Path):
        label = name or str(source)
        options = {"columns": dict(columns or {}), "rewards": None if rewards is None else list(rewards),
                   "guess": guess, "arms": arms, "ask": ask}
        before = file_signature(source)
        digest = file_digest(source) if before is not None else None
        store = LogsCache.from_env() if digest is not None else None  # validated once per content and options
        key = logs_cache_key(digest, options, name=label, limits=limits or Limits.from_env()) if store else None
        logs = store.get(key) if store else None
        if logs is not None and file_signature(source) == before:
            remember_origin(logs, digest, options)
            return logs
        raw = read_table(source, limits=limits, columns=columns, name=label)
        if digest is not None and file_signature(source) != before:
            digest = key = None  # the file changed while it was read: no file fingerprint (the columns' one instead)
    else:
        raise WrongType(f"source must be a path or a pandas DataFrame, got {type(source).__name__}")
    logs = validate(raw, columns=dict(columns or {}), rewards=rewards, label=label, limits=limits, guess=guess,
                    arms=arms, ask=ask)
    if not isinstance(source, pd.DataFrame):  # the moments cache's key (offeval_core.moments_cache)
        remember_origin(logs, digest, options)
        if key is not None:
            store.put(key, logs)
    return logs


# --------------------------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class LogSummary:
    """What ``offeval validate`` prints: sizes, coverage, reward rates and session lengths."""

    source: str
    rows: int
    sessions: int
    days: tuple
    experiments: tuple[str, ...]
    arms: dict[str, int]
    policies: tuple[str, ...]
    reward_rates: dict[str, float]
    sessions_with_reward: dict[str, float]
    length_quantiles: dict[str, float]
    mean_length: float
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "source": self.source, "rows": self.rows, "sessions": self.sessions,
            "days": [str(d) for d in self.days], "experiments": list(self.experiments), "arms": self.arms,
            "policies": list(self.policies), "reward_rates": self.reward_rates,
            "sessions_with_reward": self.sessions_with_reward,
            "session_length": {"mean": self.mean_length, **self.length_quantiles}, "notes": list(self.notes),
        }

    def length_text(self) -> str:
        """The session length in words: its mean and quantiles, or, when every session is one logged impression
        (a bandit log), that fact: the deepest rank of a one-row session is its position, not a length.

        >>> LogSummary("f", 3, 3, (), (), {}, (), {}, {}, {"p10": 1.0, "median": 2.0}, 2.0, ()).length_text()
        'one position per session: each session is one logged impression (a bandit round)'
        """
        if self.rows == self.sessions:
            return "one position per session: each session is one logged impression (a bandit round)"
        return f"mean {self.mean_length:.1f}; " + ", ".join(f"{k} {v:g}" for k, v in self.length_quantiles.items())

    def to_text(self) -> str:
        lines = [
            f"{self.source}: valid ranking logs",
            f"  rows (impressions): {self.rows:,}",
            f"  sessions:           {self.sessions:,}",
            f"  days:               {len(self.days)} ({self.days[0]} … {self.days[-1]})",
            f"  experiments:        {len(self.experiments)} ({', '.join(self.experiments[:8])}"
            f"{' …' if len(self.experiments) > 8 else ''})",
            "  arms:               " + ", ".join(f"{a} {n:,} sessions" for a, n in self.arms.items()),
            f"  target policies:    {', '.join(self.policies) or 'none (only the logging policy)'}",
            "  reward rate per impression: " + ", ".join(f"{r} {v:.2%}" for r, v in self.reward_rates.items()),
            "  sessions with ≥ 1 reward:   "
            + ", ".join(f"{r} {v:.1%}" for r, v in self.sessions_with_reward.items()),
            f"  session length:     {self.length_text()}",
        ]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def summarize(logs: Logs) -> LogSummary:
    """Summarise validated logs for ``offeval validate`` and the dashboard's Data page."""
    f, s = logs.frame, logs.sessions
    sess_reward = {}
    for r in logs.rewards:
        per_session = np.bincount(f["session"].to_numpy(), weights=f[r].to_numpy(), minlength=len(s))
        sess_reward[r] = float((per_session > 0).mean())
    q = np.quantile(s["length"].to_numpy(), [0.1, 0.5, 0.9, 0.99])
    return LogSummary(
        source=logs.source,
        rows=logs.n_rows,
        sessions=logs.n_sessions,
        days=tuple(sorted(pd.unique(s["day"]))),
        experiments=tuple(sorted(map(str, pd.unique(s["experiment_id"])))),
        arms={str(k): int(v) for k, v in s["arm"].value_counts(sort=False).items() if v},
        policies=tuple(dict.fromkeys((*logs.policies, *logs.propensity_policies))),
        reward_rates={r: float((f[r] > 0).mean()) for r in logs.rewards},
        sessions_with_reward=sess_reward,
        length_quantiles={"p10": float(q[0]), "median": float(q[1]), "p90": float(q[2]), "p99": float(q[3])},
        mean_length=float(s["length"].mean()),
        notes=logs.notes,
    )
