"""The log schema's checks run by a query engine over Parquet files (``offeval reduce``), without loading them.

The rules are the ones ``read_logs`` applies (:mod:`offeval_core.log_rules`, :mod:`offeval_core.log_checks`),
in the same phases and with the same messages: the column names and the mapping first (from the schema), then
one aggregate query counts the offending rows of every rule (:class:`IbisColumns` evaluates the very rule
definitions as column expressions), then one pass over the sessions finds repeated (session, rank) pairs, a
target policy's repeated ranks and keys that change within a session. Only when a rule fails are its first
offending rows looked up, by streaming the files in the order ``read_logs`` reads them (so row numbers and
values match); a table without files (a warehouse table) is reported with counts instead of row numbers.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.errors import LogValidationError, Problem
from offeval_core.limits import Limits
from offeval_core.log_checks import Check, classify_columns, mapped_columns
from offeval_core.log_rules import (
    NumpyColumns,
    column_rules,
    duplicates_text,
    mixed_key_text,
    problem_text,
    value_phase,
)
from offeval_core.log_schema import ARMS, MAX_SHOWN
from offeval_core.mapping import expand_mapping

__all__ = ["CheckedLogs", "IbisColumns", "check_table"]

_KEYS = ("experiment_id", "day", "arm", "segment")


class IbisColumns:
    """The column namespace of a query engine: a raw column is an Ibis column, masks are boolean columns (a
    NULL mask counts as False). NaN is missing, as in pandas."""

    @staticmethod
    def numeric(raw):
        dt = raw.type()
        if dt.is_boolean() or dt.is_numeric():
            values = raw.cast("float64")
        elif dt.is_string():
            values = raw.strip().try_cast("float64")
        else:  # dates, times, binary: not numbers
            values = ibis.null().cast("float64")
        return values, values, raw.notnull() & values.isnull()

    @staticmethod
    def missing(raw):
        if raw.type().is_floating():
            return raw.isnull() | raw.isnan()
        return raw.isnull()

    @staticmethod
    def present(values):
        return values.notnull() & ~values.isnan()

    @staticmethod
    def finite(values):
        return ~(values.isnan() | values.isinf())

    @staticmethod
    def integral(values):
        return (values % 1.0) == 0.0

    @staticmethod
    def arm(raw):
        text = raw.cast("string").strip().lower()
        return text, text.isnull() | ~text.isin(list(ARMS))


@dataclass(frozen=True)
class CheckedLogs:
    """A table that passed every check, with the schema's column names, and its classified columns."""

    table: ir.Table
    rewards: tuple[str, ...]
    policies: tuple[str, ...]
    n_rows: int


def _count(mask) -> ir.IntegerScalar:
    return ibis.ifelse(mask, 1, 0).sum()


def check_table(table: ir.Table, backend, *, name: str, columns: dict[str, str] | None = None,
                rewards: Sequence[str] | None = None, limits: Limits | None = None, files=None) -> CheckedLogs:
    """Run the checks of ``read_logs`` on ``table`` (the user's column names; ``columns`` maps schema names to
    them, patterns such as ``rank__*=pos_*`` included). ``files`` (an
    :class:`~offeval_core.inputs.ParquetDataset`) lets messages name the first offending data rows as
    ``read_logs`` does. Raises LogValidationError listing the problems of the first phase that has any."""
    chk = Check(label=name, limits=limits or Limits.from_env())
    n_rows = files.n_rows if files is not None else int(backend.execute(table.count()))
    if n_rows == 0 or not table.columns:
        raise LogValidationError(name, ["no data rows: the logs are empty (expected one row per viewed impression)"])
    try:
        mapping = expand_mapping(table.columns, dict(columns or {}))
    except ValueError as exc:
        raise LogValidationError(name, [str(exc)]) from None
    chk.columns = dict(mapping)
    names = mapped_columns(list(table.columns), mapping, chk)
    renamed = table.rename({key: user for key, user in mapping.items() if key != user}) if mapping else table
    looks = _numeric_candidates(renamed, backend, names)
    reward_cols, policy_cols, prop_cols = classify_columns(names, None if rewards is None else list(rewards),
                                                           looks.__contains__, chk)
    lookup = _Lookup(renamed, backend, files, mapping)

    items = value_phase(names, reward_cols, policy_cols, prop_cols, renamed.__getitem__, IbisColumns,
                        ceiling=chk.limits.max_rank)
    rules = [r for item in items if not isinstance(item, str) for r in item]
    counts = _fetch(backend, renamed.aggregate(**{f"c{i}": _count(r.bad) for i, r in enumerate(rules)})) if rules else {}
    failing = []
    for item in items:
        if isinstance(item, str):
            failing.append(item)
            continue
        hit = next(((i, r) for i, r in ((rules.index(r), r) for r in item) if counts[f"c{i}"]), None)
        if hit is not None:
            failing.append((hit[1], counts[f"c{hit[0]}"]))
    if failing:
        chk.problems.extend(lookup.rule_problems(failing, names, chk.limits.max_rank))
        chk.stop_if_problems()

    _session_checks(renamed, backend, names, policy_cols, lookup, chk)
    chk.stop_if_problems()
    return CheckedLogs(table=renamed, rewards=tuple(reward_cols), policies=tuple(policy_cols), n_rows=n_rows)


def _fetch(backend, expr) -> dict:
    return backend.to_pyarrow(expr).to_pandas().iloc[0].to_dict()


def _numeric_candidates(table: ir.Table, backend, names: list[str]) -> set[str]:
    """The columns ``read_logs`` takes as reward candidates: numbers and booleans, and text columns whose
    values are mostly numbers (one query for the text columns, none when there are none)."""
    schema = table.schema()
    out = {c for c in names if schema[c].is_numeric() or schema[c].is_boolean()}
    text = [c for c in names if schema[c].is_string()]
    if text:
        stats = _fetch(backend, table.aggregate(**{f"n{i}": table[c].count() for i, c in enumerate(text)},
                                                **{f"k{i}": IbisColumns.numeric(table[c])[0].count()
                                                   for i, c in enumerate(text)}))
        out |= {c for i, c in enumerate(text) if stats[f"n{i}"] and stats[f"k{i}"] >= 0.5 * stats[f"n{i}"]}
    return out


def _present(col):
    """The column with its missing values (NULL, NaN) as NULL, so counts and distinct counts skip them."""
    return ibis.ifelse(IbisColumns.missing(col), ibis.null().cast(col.type()), col)


def _session_checks(t: ir.Table, backend, names: list[str], policies: list[str], lookup, chk: Check) -> None:
    """One pass over the sessions: repeated (session, rank), a target policy's repeated ranks, empty keys and
    keys that change within a session; problems in the order ``read_logs`` lists them."""
    keys = [k for k in _KEYS if k in names]
    value = {k: (IbisColumns.arm(t[k])[0] if k == "arm" else t[k]) for k in keys}
    per = t.group_by(t["session_id"].name("s")).aggregate(
        n=t.count(), n_rank=t["rank"].nunique(),
        **{f"p{i}": _present(t[p]).count() - _present(t[p]).nunique() for i, p in enumerate(policies)},
        **{f"lo{j}": value[k].min() for j, k in enumerate(keys)},
        **{f"hi{j}": value[k].max() for j, k in enumerate(keys)})
    totals = _fetch(backend, per.aggregate(
        dup=(per.n - per.n_rank).sum(), **{f"p{i}": per[f"p{i}"].sum() for i in range(len(policies))},
        **{f"mixed{j}": _count(per[f"lo{j}"] != per[f"hi{j}"]) for j in range(len(keys))}))
    empty_of = {k: _count(IbisColumns.missing(t[k])) for k in keys if k != "arm"}  # arms are checked already
    empty = {k: int(v or 0) for k, v in _fetch(backend, t.aggregate(**empty_of)).items()} if empty_of else {}
    if int(totals["dup"] or 0):
        chk.problems.append(Problem(lookup.duplicates("rank", int(totals["dup"])), kind="duplicate"))
    for i, p in enumerate(policies):
        if int(totals[f"p{i}"] or 0):
            chk.problems.append(Problem(lookup.duplicates(p, int(totals[f"p{i}"])), kind="duplicate"))
    for j, k in enumerate(keys):
        if empty.get(k):
            rule = column_rules("key", k, t[k], IbisColumns)[0]
            chk.problems.extend(lookup.rule_problems([(rule, empty[k])], names, chk.limits.max_rank))
        elif int(totals[f"mixed{j}"] or 0):
            first = per.filter(per[f"lo{j}"] != per[f"hi{j}"]).select("s").order_by("s").limit(1)
            chk.problems.append(lookup.mixed(k, backend.to_pyarrow(first).to_pandas()["s"].iloc[0]))


class _Lookup:
    """The first offending rows of failed checks: from the files in ``read_logs``'s order when there are files
    (the same numpy rules on each batch, so row numbers and quoted values match), else from the engine."""

    def __init__(self, table: ir.Table, backend, files, mapping: dict[str, str]):
        self.table, self.backend, self.files, self.mapping = table, backend, files, mapping

    def _batches(self, columns: list[str]):
        """(offset, pandas frame of ``columns`` under the schema's names) of every batch of the files, in order."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from offeval_core.inputs import _conform, open_regular

        wanted = [self.mapping.get(c, c) for c in columns]  # the user's names
        sub = pa.schema([self.files.schema.field(c) for c in wanted])
        offset = 0
        for f in self.files.files:
            with open_regular(f, source=self.files.source) as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=1 << 16, columns=wanted):
                    frame = _conform(batch, sub).to_pandas()
                    frame.columns = list(columns)
                    yield offset, frame
                    offset += len(frame)

    def rule_problems(self, failing: list, names: list[str], ceiling: int) -> list[str]:
        """The problem lines of failing rules (fixed lines pass through), rows and values looked up."""
        rules = [f for f in failing if not isinstance(f, str)]
        found: dict[tuple, tuple[list, list]] = {(r.column, r.name): ([], []) for r, _ in rules}
        if rules and self.files is not None:
            role = _roles(names)
            columns = sorted({r.column for r, _ in rules})
            for offset, frame in self._batches(columns):
                for col in columns:
                    for rule in column_rules(role[col], col, frame[col], NumpyColumns, ceiling=ceiling):
                        rows, values = found.get((col, rule.name), (None, None))
                        if rows is None or len(rows) >= MAX_SHOWN:
                            continue
                        idx = np.flatnonzero(rule.bad)[:MAX_SHOWN - len(rows)]
                        rows += [offset + int(i) + 1 for i in idx]
                        if rule.shown is not None:
                            values += rule.shown.iloc[idx].tolist()
                if all(len(r) >= MAX_SHOWN for r, _ in found.values()):
                    break
        elif rules:
            for rule, _ in rules:
                if rule.shown is not None:
                    sample = self.table.filter(rule.bad).select(v=rule.shown).limit(MAX_SHOWN)
                    found[(rule.column, rule.name)][1].extend(self.backend.to_pyarrow(sample).to_pandas()["v"])
        out = []
        for f in failing:
            if isinstance(f, str):
                out.append(f)
                continue
            rule, total = f
            rows, values = found[(rule.column, rule.name)]
            out.append(Problem(problem_text(rule, values=values, rows=rows, total=int(total)), kind=rule.kind))
        return out

    def _session_rows(self, sessions, columns: list[str]) -> pd.DataFrame:
        """Every row of the given sessions with its 1-based data row (``row``; 0 when unknown)."""
        if self.files is not None:
            parts = []
            wanted = set(sessions)
            for offset, frame in self._batches(["session_id", *columns]):
                keep = frame["session_id"].isin(wanted).to_numpy()
                if keep.any():
                    parts.append(frame[keep].assign(row=offset + np.flatnonzero(keep) + 1))
            return pd.concat(parts, ignore_index=True)
        t = self.table
        expr = t.filter(t["session_id"].isin(list(sessions))).select("session_id", *columns)
        return self.backend.to_pyarrow(expr).to_pandas().assign(row=0)

    def duplicates(self, column: str, total: int) -> str:
        """The repeated (session, rank) — or target ranks of ``rank__<policy>`` — problem of read_logs."""
        t = self.table
        f = t.filter(~IbisColumns.missing(t[column]))
        pairs = f.group_by([f["session_id"].name("s"), f[column].name("r")]).aggregate(n=f.count())
        dup = pairs.filter(pairs.n > 1).order_by(["s", "r"]).limit(MAX_SHOWN)
        keys = self.backend.to_pyarrow(dup).to_pandas()
        rows = self._session_rows(keys["s"].tolist(), [column])
        rows = rows.merge(keys.rename(columns={"s": "session_id", "r": column}), on=["session_id", column])
        rows = rows.sort_values(["session_id", column, "row"], kind="stable")
        examples = []
        for (s, r), g in rows.groupby(["session_id", column], sort=True):
            found = g["row"].tolist()
            if found[0] == 0:  # no row numbers: say how many rows repeat the pair
                examples.append((s, r, None, len(found)))
            else:
                examples += [(s, r, a, b) for a, b in itertools.pairwise(found)]
        return duplicates_text("(session_id, rank)" if column == "rank" else column, examples[:MAX_SHOWN], total)

    def mixed(self, key: str, session) -> str:
        """The 'must be the same on every row of a session' problem for ``session`` (the first one that mixes)."""
        rows = self._session_rows([session], ["rank", key] if key != "rank" else ["rank"])
        rows = rows.sort_values(["rank", "row"], kind="stable")
        values = rows[key] if key != "arm" else NumpyColumns.arm(rows[key])[0]
        values = values.tolist()
        k = next(i for i, v in enumerate(values) if v != values[0])
        return mixed_key_text(key, session, values[0], values[k], int(rows["row"].iloc[k]) or None)


def _roles(names: list[str]) -> dict[str, str]:
    from offeval_core.log_schema import LOGGING_PROPENSITIES, POLICY_PREFIX

    role = {}
    for c in names:
        if c == "session_id":
            role[c] = "session_id"
        elif c in ("rank", "arm"):
            role[c] = c
        elif c.startswith(POLICY_PREFIX):
            role[c] = "policy"
        elif c in LOGGING_PROPENSITIES:
            role[c] = "logging_propensity"
        elif c.startswith("target_"):
            role[c] = "target_propensity"
        elif c in _KEYS:
            role[c] = "key"
        else:
            role[c] = "reward"
    return role

