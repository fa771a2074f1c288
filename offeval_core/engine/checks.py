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

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir
import pandas as pd

from offeval_core import mapping as column_mapping
from offeval_core.arm_values import NO_ARMS, ArmValues, guess_arm_values, parse_arms
from offeval_core.engine.check_rows import KEYS as _KEYS
from offeval_core.engine.check_rows import RowLookup
from offeval_core.engine.dialects import columns_for, has_bitsets
from offeval_core.engine.ibis_columns import IbisColumns, present_or_null
from offeval_core.errors import InputError, LogValidationError, NeedsAnswers, Problem
from offeval_core.limits import Limits
from offeval_core.log_checks import (
    ASK_LEVELS,
    Check,
    arm_rule,
    check_required,
    classify_columns,
    mapped_columns,
    questions_at,
)
from offeval_core.log_rules import column_rules, value_phase
from offeval_core.reading import Reading, read_columns

__all__ = ["CheckedLogs", "IbisColumns", "SessionChecks", "check_table"]


@dataclass(frozen=True)
class CheckedLogs:
    """A table whose columns and values passed every check, with the schema's column names, its classified
    columns, and the checks across rows (``sessions``) that the source's pass over the sessions runs."""

    table: ir.Table
    rewards: tuple[str, ...]
    policies: tuple[str, ...]
    n_rows: int
    sessions: SessionChecks
    reading: Reading
    arms: ArmValues | None  # the mapping of the arm labels (None: no arm column)

    def arm(self) -> ir.StringColumn:
        """Each row's arm, ``control`` or ``treatment``, the user's labels mapped (the table has an arm column)."""
        return IbisColumns.arm(self.table["arm"], self.arms)[0]


def _count(mask, table: ir.Table) -> ir.IntegerScalar:
    """Rows of ``table`` where ``mask`` holds (NULL counts as False); a constant mask costs nothing per row."""
    if isinstance(mask, ir.Scalar):
        return ibis.ifelse(mask, 1, 0) * table.count()
    return ibis.ifelse(mask, 1, 0).sum()


READING_ROWS = 100_000
READING_CELLS = 5_000_000
"""How many of the first rows (in ``read_logs``'s order) the reading of the columns looks at: at most
``READING_ROWS``, and at most ``READING_CELLS`` values (a wide file is read on fewer rows). Rewards, identifiers
and arm-like columns are inferred from them (``read_logs`` reads every row: the two agree on files up to that
size); the arm labels and every rule on values cover every row."""


def check_table(table: ir.Table, backend, *, name: str, columns: dict[str, str] | None = None,
                rewards: Sequence[str] | None = None, limits: Limits | None = None, files=None, arms=None,
                ask: str = "ambiguous") -> CheckedLogs:
    """Run the checks of ``read_logs`` on ``table`` (the user's column names; ``columns`` maps schema names to
    them, patterns such as ``rank__*=pos_*`` included): the column names, the reading of the columns
    (:func:`~offeval_core.reading.read_columns` on the first :data:`READING_ROWS` rows: rewards inferred among
    plausible columns, questions raised as :class:`~offeval_core.errors.NeedsAnswers` at level ``ask`` as
    ``read_logs`` does), the arm labels mapped (``arms``: given, ``"none"``, else the schema's or a common pair
    of the column's distinct labels), then every rule on values in one aggregate query. ``files`` (an
    :class:`~offeval_core.inputs_parquet.ParquetDataset`) lets messages name the first offending data rows as
    ``read_logs`` does. Raises LogValidationError listing the problems of the first phase that has any; the
    checks across rows are returned (``CheckedLogs.sessions``) for the source's own pass over the sessions
    (:func:`~offeval_core.engine.sources.source_from_files`), or run by :meth:`SessionChecks.run`."""
    if ask not in ASK_LEVELS:
        raise InputError(f"ask must be one of {', '.join(ASK_LEVELS)}, got {ask!r}")
    chk = Check(label=name, limits=limits or Limits.from_env())
    xp = columns_for(backend)  # the rules' column namespace on this engine
    n_rows = files.n_rows if files is not None else int(backend.execute(table.count()))
    if n_rows == 0 or not table.columns:
        raise LogValidationError(name, ["no data rows: the logs are empty (expected one row per viewed impression)"])
    arms = parse_arms(arms) if isinstance(arms, str | dict) else arms
    try:  # patterns (rank__*=pos_*) expanded over the schema's names; nothing guessed
        mapping, _, how = column_mapping.resolve(pd.DataFrame(columns=list(table.columns)), dict(columns or {}))
    except ValueError as exc:
        raise LogValidationError(name, [str(exc)]) from None
    if arms == NO_ARMS:  # the user says the file has no arm column
        mapping.pop("arm", None)
    chk.columns = dict(mapping)
    names = mapped_columns(list(table.columns), mapping, chk)
    renamed = table.rename({key: user for key, user in mapping.items() if key != user}) if mapping else table
    if arms == NO_ARMS and "arm" in names:
        renamed, names = renamed.drop("arm"), [c for c in names if c != "arm"]
    check_required(names, chk)
    lookup = RowLookup(renamed, backend, files, mapping)
    reading = _reading(renamed, backend, lookup, name=name, names=names, mapping=mapping, how=how,
                       rewards=rewards, arms=arms)
    reward_cols, policy_cols, prop_cols = classify_columns(names, None if rewards is None else list(rewards),
                                                           reading, chk)
    if questions := questions_at(reading, ask):
        raise NeedsAnswers(name, reading, questions)
    arm = arm_rule(reading, lambda: _arm_labels(renamed, backend)) if "arm" in names else None
    lookup.arms = arm if isinstance(arm, ArmValues) else None

    items = value_phase(names, reward_cols, policy_cols, prop_cols, renamed.__getitem__, xp,
                        ceiling=chk.limits.max_rank, arms=arm)
    rules = [r for item in items if not isinstance(item, str) for r in item]
    ranked = ["rank", *policy_cols]  # the largest rank of each rank column sizes the session pass's bitsets
    keys = [k for k in _KEYS if k in names and k != "arm"]  # the arm's values are checked with the values
    counts = _fetch(backend, renamed.aggregate(
        **{f"c{i}": _count(r.bad, renamed) for i, r in enumerate(rules)},
        **{f"max{i}": xp.numeric(renamed[c])[0].max() for i, c in enumerate(ranked)},
        **{f"empty{j}": _count(IbisColumns.missing(renamed[k]), renamed) for j, k in enumerate(keys)}))
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

    tops = {c: int(counts[f"max{i}"]) for i, c in enumerate(ranked) if not pd.isna(counts[f"max{i}"])}
    empty = {k: int(counts[f"empty{j}"] or 0) for j, k in enumerate(keys)}
    sessions = SessionChecks(table=renamed, backend=backend, names=names, tops=tops, empty=empty, lookup=lookup,
                             chk=chk, arms=lookup.arms, xp=xp)
    return CheckedLogs(table=renamed, rewards=tuple(reward_cols), policies=tuple(policy_cols), n_rows=n_rows,
                       sessions=sessions, reading=reading, arms=lookup.arms)


def _reading(table: ir.Table, backend, lookup: RowLookup, *, name: str, names: list[str], mapping: dict[str, str],
             how: dict[str, str], rewards, arms) -> Reading:
    """The reading of the columns (:func:`~offeval_core.reading.read_columns`) on the first :data:`READING_ROWS`
    rows; the arm labels' mapping, unless given, is guessed from the distinct labels of every row."""
    head = lookup.head(names, max(1_000, min(READING_ROWS, READING_CELLS // len(names))))
    if "arm" in names and not isinstance(arms, ArmValues):
        arms = guess_arm_values(_arm_labels(table, backend))  # over every row, whatever the first rows hold
        if arms is None:  # labels that need the user: the reading has no mapping, the value phase names them
            head = head.assign(arm=None)
    return read_columns(head, source=name, columns=mapping, how=how, rewards=None if rewards is None else list(rewards),
                        arms=arms)


def _arm_labels(table: ir.Table, backend, limit: int = 1001) -> list[str]:
    """The distinct labels of the arm column as text (at most ``limit``; empty values left out)."""
    labels = backend.to_pyarrow(table.select(label=table["arm"].cast("string")).distinct().limit(limit))
    return sorted(v for v in labels.column("label").to_pylist() if v is not None)


def _fetch(backend, expr) -> dict:
    return backend.to_pyarrow(expr).to_pandas().iloc[0].to_dict()


_WORD = 62  # ranks per 64-bit word of a session's bitset (bits 0..61: the words stay positive)
_MAX_WORDS = 8  # ranks up to 496 in bitsets; a column with larger ranks is checked by grouping its pairs


@ibis.udf.scalar.builtin(name="bit_count")
def _bit_count(x: dt.int64) -> dt.int64:
    """The number of set bits (``bit_count`` in DuckDB and Spark SQL)."""


@ibis.udf.agg.builtin(name="bit_or")
def _bit_or(x: dt.int64) -> dt.int64:
    """The bitwise OR over a group (``bit_or`` in DuckDB and Spark SQL)."""


def _rank_bits(col, words: int) -> list:
    """Per row, its rank as one bit of one of ``words`` 62-bit words (0 in the other words and when missing):
    OR-ed over a session, the words' set bits count the session's distinct ranks."""
    v = present_or_null(col)
    v = v if v.type().is_int64() else v.cast("int64")
    one = ibis.literal(1, "int8").cast("int64")  # a 64-bit one in every dialect (Spark's literal 1 is 32-bit)
    if words == 1:
        return [one << (v - 1)]  # NULL for a missing rank: the OR skips it
    return [ibis.ifelse((v > _WORD * w) & (v <= _WORD * (w + 1)), one << (v - (_WORD * w + 1)),
                        ibis.literal(0, "int8").cast("int64")) for w in range(words)]


@dataclass
class SessionChecks:
    """The checks across rows: repeated (session, rank), a target policy's repeated ranks (per session, its rows
    minus its distinct ranks, counted with a bitset of 62-bit words; on engines without bit aggregates by a group-by
    of the pairs), keys that change within a session. Their
    aggregates ride on a pass over the sessions the caller makes anyway (:meth:`aggregates`, :meth:`totals`);
    :meth:`problems` then raises with ``read_logs``'s problems, looking up the details only when one fails."""

    table: ir.Table
    backend: object
    names: list[str]
    tops: dict[str, int]  # largest rank of rank and each target policy (columns without a rank are left out)
    empty: dict[str, int]  # rows with an empty experiment_id / day / segment
    lookup: RowLookup
    chk: Check
    arms: ArmValues | None = None  # the arm labels' mapping: a session's arm is its mapped label
    xp: type[IbisColumns] = IbisColumns

    @property
    def _words(self) -> dict[str, int]:
        if not has_bitsets(self.backend):  # no bit aggregates: every column's pairs are grouped (problems())
            return {}
        return {c: -(-top // _WORD) for c, top in self.tops.items() if -(-top // _WORD) <= _MAX_WORDS}

    def aggregates(self, rows: ir.Table) -> dict:
        """Per-session aggregates (of a group-by on the session) over ``rows``, which has the rank columns as
        whole numbers (NULL when missing)."""
        aggs = {}
        for i, (c, words) in enumerate(self._words.items()):
            aggs[f"_chk_n{i}"] = rows[c].count()
            aggs |= {f"_chk_b{i}_{w}": _bit_or(bit) for w, bit in enumerate(_rank_bits(rows[c], words))}
        return aggs

    def totals(self, per: ir.Table) -> dict:
        """Aggregates over the sessions' rows of :meth:`aggregates`: the repeats of each rank column."""
        out = {}
        for i, (_, words) in enumerate(self._words.items()):
            distinct = sum(_bit_count(per[f"_chk_b{i}_{w}"].fill_null(0)).cast("int64") for w in range(words))
            out[f"_chk_d{i}"] = (per[f"_chk_n{i}"] - distinct).sum()
        return out

    def run(self) -> None:
        """The checks in a pass of their own, for a caller without a pass over the sessions."""
        t = self.table
        keys = [k for k in _KEYS if k in self.names]
        rows = t.select(s=t["session_id"], **{c: present_or_null(t[c]).cast("int64") for c in self.tops},
                        **{f"k{j}": (IbisColumns.arm(t[k], self.arms)[0] if k == "arm" else t[k]) for j, k in enumerate(keys)})
        per = rows.group_by("s").aggregate(**self.aggregates(rows),
                                           **{f"lo{j}": rows[f"k{j}"].min() for j in range(len(keys))},
                                           **{f"hi{j}": rows[f"k{j}"].max() for j in range(len(keys))})
        mixed = functools.reduce(lambda a, b: a | b, [per[f"lo{j}"] != per[f"hi{j}"] for j in range(len(keys))],
                                 ibis.literal(False))
        self.problems(_fetch(self.backend, per.aggregate(**self.totals(per), _mixed=_count(mixed, per))))

    def problems(self, totals: dict) -> None:
        """Raise LogValidationError with the problems of ``totals`` (the sums of :meth:`totals`, and ``_mixed``:
        the sessions whose keys change), details looked up; nothing when there are none."""
        t, chk = self.table, self.chk
        dups = {c: int(totals[f"_chk_d{i}"] or 0) for i, c in enumerate(self._words)}
        for c in self.tops:
            if c not in dups:  # ranks too large for a bitset: count the repeated pairs themselves
                f = t.filter(~IbisColumns.missing(t[c]))
                pairs = f.group_by([f["session_id"].name("s"), f[c].name("r")]).aggregate(n=f.count())
                dups[c] = int(_fetch(self.backend, pairs.aggregate(d=(pairs.n - 1).sum()))["d"] or 0)
        for c in self.tops:
            if dups[c]:
                chk.problems.append(Problem(self.lookup.duplicates(c, dups[c]), kind="duplicate"))
        keys = [k for k in _KEYS if k in self.names]
        mixed_keys: dict[str, object] = {}
        if int(totals.get("_mixed") or 0):  # which keys change, and the first session where each does
            value = {k: (IbisColumns.arm(t[k], self.arms)[0] if k == "arm" else t[k]) for k in keys}
            per = t.group_by(t["session_id"].name("s")).aggregate(
                **{f"lo{j}": value[k].min() for j, k in enumerate(keys)},
                **{f"hi{j}": value[k].max() for j, k in enumerate(keys)})
            for j, k in enumerate(keys):
                first = per.filter(per[f"lo{j}"] != per[f"hi{j}"]).select("s").order_by("s").limit(1)
                found = self.backend.to_pyarrow(first).to_pandas()["s"]
                if len(found):
                    mixed_keys[k] = found.iloc[0]
        for k in keys:
            if self.empty.get(k):
                rule = column_rules("key", k, t[k], self.xp)[0]
                chk.problems.extend(self.lookup.rule_problems([(rule, self.empty[k])], self.names,
                                                              chk.limits.max_rank))
            elif k in mixed_keys:
                chk.problems.append(self.lookup.mixed(k, mixed_keys[k]))
        chk.stop_if_problems()
