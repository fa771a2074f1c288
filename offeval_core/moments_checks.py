"""The invariants of a moments file, checked on read (:func:`~offeval_core.moments_io.read_moments`).

A moments file replaces the logs downstream, so an edited or damaged one must not give silently wrong numbers.
Every numeric moment column has a *role* (:data:`~offeval_core.moment_columns.OFFLINE_ROLES`,
:data:`~offeval_core.moment_columns.ONLINE_ROLES`: a count, a sum Σx, a centred second moment
M2 = Σ(x − x̄)², a co-moment C = Σ(x − x̄)(y − ȳ), a plain sum or a maximum), and the rules are written per
role, here and nowhere else: counts are positive integers; every value is finite; sums of non-negative
quantities (DCG, iDCG, rewards, importance weights; every sum but a paired difference's) are ≥ 0; second
moments are ≥ 0; co-moments obey Cauchy-Schwarz (C² ≤ M2_x · M2_y). Across rows: each (group, variant) has one
row, every variant of the grid has a row in every group, and a group's offline session count equals its online
one (at most it, for nDCG rows when sessions without a reward are dropped).

A column added to the moments gets a role in :mod:`offeval_core.moment_columns` (a numeric column without one
is only checked for being finite).
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np
import pandas as pd

from offeval_core.engine.grid import GROUP_KEYS, METRICS, Grid
from offeval_core.errors import MomentsValidationError
from offeval_core.log_schema import LOGGING_POLICY
from offeval_core.moment_columns import OFFLINE_ROLES, ONLINE_ROLES

__all__ = ["LABELS", "SIGNED", "check_grid", "check_part", "moments_error"]

SIGNED = ("sum_diff",)
"""The sums of quantities that may be negative (the paired difference target − logging); every other sum is of
non-negative values."""
LABELS = (*GROUP_KEYS, "reward", "discount", "exposure", "clip", "policy", "metric")
"""The columns that name a row of the offline moments; the online rows are named by the group keys and reward."""
_SHOWN = 5
_TOL = 1e-9


def moments_error(source: str, message: str, **kw) -> MomentsValidationError:
    return MomentsValidationError(f"{source}: not a valid moments file: {message}", source=source, **kw)


def _rows(idx) -> str:
    return ", ".join(str(int(i) + 1) for i in idx[:_SHOWN]) + (" …" if len(idx) > _SHOWN else "")


def _fail(source, part, col, bad, text):
    raise moments_error(source, f"{part} {text}; rows {_rows(bad)}", column=col, rows=bad[:_SHOWN] + 1)


def check_part(df: pd.DataFrame, part: str, source: str, *, ndcg_rule: str = "zero") -> None:
    """Row by row, by role: numeric columns, positive integer counts (0 only for nDCG rows when sessions
    without a reward are dropped, and then every moment is 0), finite values (a target policy's paired
    difference only; the logging policy has none), non-negative sums of non-negative values, non-negative
    second moments, and co-moments within the Cauchy-Schwarz bound of their second moments."""
    roles = OFFLINE_ROLES if part == "offline" else ONLINE_ROLES
    for col in df.columns:
        if col not in LABELS and not (pd.api.types.is_numeric_dtype(df[col])
                                      and not pd.api.types.is_bool_dtype(df[col])):
            raise moments_error(source, f"{part} column '{col}' must be numeric", column=col)
    n = pd.to_numeric(df["n"], errors="coerce").to_numpy(dtype=float)
    may_be_empty = np.zeros(len(df), dtype=bool)
    if ndcg_rule == "drop" and "metric" in df.columns:
        may_be_empty = (df["metric"].astype(str) == "ndcg").to_numpy()
    bad = np.flatnonzero(~(((n >= 1) | (may_be_empty & (n == 0))) & (n == np.floor(n)) & np.isfinite(n)))
    if len(bad):
        raise moments_error(source, f"{part} counts 'n' must be positive integers; rows {_rows(bad)} are not",
                            column="n", rows=bad[:_SHOWN] + 1)
    values = {}
    for col in df.columns:
        if col in ("n", "clip") or col in LABELS or not pd.api.types.is_numeric_dtype(df[col]):
            continue
        v = df[col].to_numpy(dtype=float)
        ok = np.isfinite(v)
        if "diff" in col and "policy" in df.columns:  # no paired difference of the logging policy with itself
            ok |= np.isnan(v) & (df["policy"].astype(str) == LOGGING_POLICY).to_numpy()
        bad = np.flatnonzero(~ok)
        if len(bad):
            raise moments_error(source, f"{part} column '{col}' must hold finite numbers; rows {_rows(bad)} do not",
                                column=col, rows=bad[:_SHOWN] + 1)
        role = roles.get(col)
        kind = role.kind if role is not None else ""
        if kind in ("sum", "add", "max") and col not in SIGNED:
            text = f"column '{col}' is a sum of non-negative values and cannot be negative"
        elif kind == "m2":
            text = f"second moments '{col}' must be ≥ 0 (a sum of squared deviations Σ(x − x̄)²)"
        else:
            text = ""
        bad = np.flatnonzero(v < 0) if text else []
        if len(bad):
            _fail(source, part, col, bad, text)
        values[col] = v
    empty = n == 0
    for col, v in values.items():
        bad = np.flatnonzero(empty & (v != 0) & ~np.isnan(v))
        if len(bad):
            _fail(source, part, col, bad, f"column '{col}' must be 0 where no session is counted (n = 0)")
    second = {role.of[0]: col for col, role in roles.items() if role.kind == "m2"}  # sum column → its M2 column
    with np.errstate(over="ignore", invalid="ignore"):  # (1e200)² is inf: then inconsistent
        for col, role in roles.items():
            if role.kind != "co" or col not in values:
                continue
            sq_x, sq_y = (second.get(total) for total in role.of)
            if sq_x in values and sq_y in values:
                lhs, rhs = values[col] ** 2, values[sq_x] * values[sq_y]
                bad = np.flatnonzero((lhs > rhs + _TOL * np.maximum(1.0, np.abs(rhs))) | (np.isinf(lhs) & ~np.isinf(rhs)))
                if len(bad):
                    _fail(source, part, col, bad, f"cross moments '{col}' are larger than √('{sq_x}' · '{sq_y}') "
                                                  "(Cauchy-Schwarz), which no data can give")


def _describe(row) -> str:
    return ", ".join(f"{k} {v!r}" if isinstance(v, str) else f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in row.items())


def _kind(col: pd.Series) -> str:
    return "numbers" if pd.api.types.is_numeric_dtype(col) else "text or other values"


def _labelled(df: pd.DataFrame) -> pd.DataFrame:
    """A copy whose label columns are text (clip: numbers), so rows of any file can be compared."""
    out = df.copy()
    for c in LABELS:
        if c in out.columns:
            out[c] = pd.to_numeric(out[c], errors="coerce").astype(float) if c == "clip" else _as_text(out[c])
    return out


def _as_text(col: pd.Series) -> pd.Series:
    """``col.astype(str)``; a column of dates (the ``day`` of logs read from Parquet) converts each distinct date
    once, as a million rows hold a few days (1.96 s → 0.34 s on the demo's 1.2 M moment rows).

    >>> import datetime
    >>> _as_text(pd.Series([datetime.date(2026, 3, 2), datetime.date(2026, 3, 3)] * 2, dtype=object)).tolist()
    ['2026-03-02', '2026-03-03', '2026-03-02', '2026-03-03']
    """
    if col.dtype == object and pd.api.types.infer_dtype(col, skipna=False) == "date":
        codes, uniques = pd.factorize(col)
        return pd.Series(np.asarray([str(u) for u in uniques], dtype=object)[codes], index=col.index).astype(str)
    return col.astype(str)


def check_grid(off: pd.DataFrame, on: pd.DataFrame, grid: Grid, source: str) -> None:
    """Across rows: one row per (group, variant) and per (group, reward); a row for every variant of
    ``grid`` in every group and for nothing else; each group's offline n equal to its online n (nDCG rows
    with ``ndcg_rule = "drop"``: at most it)."""
    keys = [k for k in GROUP_KEYS if k in on.columns and k in off.columns]
    for k in keys:
        kinds = [_kind(df[k]) for df in (off, on)]
        if kinds[0] != kinds[1]:
            raise moments_error(source, f"column '{k}' holds {kinds[0]} in the offline rows but {kinds[1]} in the "
                                        "online rows; a group is named the same way in both", column=k)
    shown = off
    off, on = _labelled(off), _labelled(on)  # labels compared as text, clip values as numbers
    for part, df, names in (("offline", off, [*keys, *LABELS[len(GROUP_KEYS):]]), ("online", on, [*keys, "reward"])):
        dup = np.flatnonzero(df.duplicated(subset=names, keep=False).to_numpy())
        if len(dup):
            raise moments_error(source, f"{part} rows {_rows(dup)} repeat the same group and variant "
                                        f"({_describe((shown if part == 'offline' else df).iloc[dup[0]][names])}); "
                                        "each has one row, and a repeated row would count its sessions twice",
                                rows=dup[:_SHOWN] + 1)
    variants = pd.MultiIndex.from_product(
        [list(grid.rewards), list(grid.discounts), list(grid.exposures), [float(c) for c in grid.clips],
         [LOGGING_POLICY, *grid.policies], list(METRICS)],
        names=["reward", "discount", "exposure", "clip", "policy", "metric"]).to_frame(index=False)
    groups = pd.concat([off[keys], on[keys]]).drop_duplicates().reset_index(drop=True)
    # every offline group is among ``groups`` and no row repeats, so the rows are the grid exactly when every label
    # is one the grid lists and there are as many rows as the grid has: the merge finds the first offending row only
    listed = np.logical_and.reduce([off[c].isin(variants[c].unique()).to_numpy() for c in variants.columns])
    if not listed.all() or len(off) != (len(groups) if keys else 1) * len(variants):
        _grid_mismatch(off, shown, groups, variants, keys, source)
    online_expected = (groups.merge(pd.DataFrame({"reward": list(grid.rewards)}), how="cross") if keys
                       else pd.DataFrame({"reward": list(grid.rewards)}))
    lacking = online_expected.merge(on[[*keys, "reward"]], how="left", indicator=True)
    lacking = lacking[lacking["_merge"] == "left_only"]
    if len(lacking):
        raise moments_error(source, f"the grid is incomplete: {len(lacking):,} online row(s) missing, the first for "
                                    f"({_describe(lacking.iloc[0][[*keys, 'reward']])}); every group needs an online "
                                    "row for each reward")
    paired = off[[*keys, "reward", "metric", "n"]].assign(_row=np.arange(len(off))).merge(
        on[[*keys, "reward", "n"]].rename(columns={"n": "n_online"}), on=[*keys, "reward"], how="left")
    may_drop = (paired["metric"] == "ndcg").to_numpy() & (grid.ndcg_rule == "drop")
    n, n_on = paired["n"].to_numpy(dtype=float), paired["n_online"].to_numpy(dtype=float)
    bad = np.flatnonzero(np.where(may_drop, n > n_on, n != n_on))
    if len(bad):
        rows = np.sort(paired["_row"].to_numpy()[bad])
        first = paired.iloc[bad[np.argmin(paired["_row"].to_numpy()[bad])]]
        raise moments_error(source, f"offline counts 'n' at rows {_rows(rows)} do not match the online sessions of "
                                    f"their group (n = {int(first['n']):,} where the online rows count "
                                    f"{int(first['n_online']):,}); a group's offline n is its number of sessions",
                            column="n", rows=rows[:_SHOWN] + 1)


def _grid_mismatch(off: pd.DataFrame, shown: pd.DataFrame, groups: pd.DataFrame, variants: pd.DataFrame,
                   keys: list[str], source: str) -> NoReturn:
    """Raise for the first offline row that is not in the grid, or the first grid row that has none."""
    expected = groups.merge(variants, how="cross") if keys else variants
    found = off[expected.columns.tolist()].assign(_row=np.arange(len(off)))
    both = found.merge(expected, how="outer", indicator=True)
    extra = both[both["_merge"] == "left_only"]
    if len(extra):
        rows = np.sort(extra["_row"].to_numpy(dtype=np.int64))
        raise moments_error(source, f"offline rows {_rows(rows)} are for a group or variant the grid does not list "
                                    f"({_describe(shown.iloc[rows[0]][expected.columns.tolist()])})",
                            rows=rows[:_SHOWN] + 1)
    missing = both[both["_merge"] == "right_only"]
    if len(missing):
        raise moments_error(source, f"the grid is incomplete: {len(missing):,} offline row(s) missing, the first for "
                                    f"({_describe(missing.iloc[0][expected.columns.tolist()])}); every group needs a "
                                    "row for each reward, discount, exposure, clip, policy and metric of the grid")
    raise moments_error(source, "the offline rows do not match the grid")  # not reached: a row or a count differed
