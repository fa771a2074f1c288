"""The first offending rows of a failed check on Parquet files (``offeval reduce``): streamed from the files
in the order ``read_logs`` reads them, and evaluated with the very numpy rules of ``read_logs``, so row numbers
and quoted values match its messages; a table without files is reported with counts instead of row numbers."""

from __future__ import annotations

import itertools

import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.engine.ibis_columns import IbisColumns
from offeval_core.errors import Problem
from offeval_core.log_rules import NumpyColumns, column_rules, duplicates_text, mixed_key_text, problem_text
from offeval_core.log_schema import LOGGING_PROPENSITIES, MAX_SHOWN, POLICY_PREFIX

__all__ = ["KEYS", "RowLookup"]

KEYS = ("experiment_id", "day", "arm", "segment")


class RowLookup:
    """The first offending rows of failed checks: from the files in ``read_logs``'s order when there are files
    (the same numpy rules on each batch, so row numbers and quoted values match), else from the engine."""

    def __init__(self, table: ir.Table, backend, files, mapping: dict[str, str], arms=None):
        self.table, self.backend, self.files, self.mapping = table, backend, files, mapping
        self.arms = arms  # the arm mapping the rule of 'arm' checks against (ArmValues; None: the schema's)

    def _batches(self, columns: list[str]):
        """(offset, pandas frame of ``columns`` under the schema's names) of every batch of the files, in order."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from offeval_core.inputs import open_regular
        from offeval_core.inputs_parquet import conform

        wanted = [self.mapping.get(c, c) for c in columns]  # the user's names
        sub = pa.schema([self.files.schema.field(c) for c in wanted])
        offset = 0
        for f in self.files.files:
            with open_regular(f, source=self.files.source) as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=1 << 16, columns=wanted):
                    frame = conform(batch, sub).to_pandas()
                    frame.columns = list(columns)
                    yield offset, frame
                    offset += len(frame)

    def head(self, columns: list[str], n: int) -> pd.DataFrame:
        """The first ``n`` rows of ``columns`` (the schema's names) in ``read_logs``'s order, as pandas."""
        if self.files is None:
            t = self.table
            return self.backend.to_pyarrow(t.select(*columns).limit(n)).to_pandas()
        parts, got = [], 0
        for _, frame in self._batches(columns):
            parts.append(frame.iloc[:n - got])
            got += len(parts[-1])
            if got >= n:
                break
        return pd.concat(parts, ignore_index=True)

    def rule_problems(self, failing: list, names: list[str], ceiling: int) -> list[str]:
        """The problem lines of failing rules (fixed lines pass through), rows and values looked up."""
        rules = [f for f in failing if not isinstance(f, str)]
        found: dict[tuple, tuple[list, list]] = {(r.column, r.name): ([], []) for r, _ in rules}
        if rules and self.files is not None:
            role = _roles(names)
            columns = sorted({r.column for r, _ in rules})
            for offset, frame in self._batches(columns):
                for col in columns:
                    for rule in column_rules(role[col], col, frame[col], NumpyColumns, ceiling=ceiling,
                                             arms=self.arms):
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
        values = rows[key] if key != "arm" else NumpyColumns.arm(rows[key], self.arms)[0]
        values = values.tolist()
        k = next(i for i, v in enumerate(values) if v != values[0])
        return mixed_key_text(key, session, values[0], values[k], int(rows["row"].iloc[k]) or None)


def _roles(names: list[str]) -> dict[str, str]:

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
        elif c in KEYS:
            role[c] = "key"
        else:
            role[c] = "reward"
    return role

