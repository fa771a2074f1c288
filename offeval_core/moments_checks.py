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
    if _grid_holds(off, on, grid, keys):  # the usual case, decided on codes of the labels' distinct values
        return
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


def _text_codes(col: pd.Series) -> tuple[np.ndarray, list[str]] | None:
    """Codes of ``col``'s values, equal exactly where :func:`_as_text` gives equal text, and each code's text;
    None where that cannot be read off the distinct values (missing values, a float zero, which has two texts,
    dates with times, objects of mixed types)."""
    if col.isna().any():
        return None
    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        cats = dtype.categories
        if not (pd.api.types.is_integer_dtype(cats) or pd.api.types.infer_dtype(cats, skipna=False) == "string"):
            return None
        return col.cat.codes.to_numpy(dtype=np.int64), [str(c) for c in cats]
    if pd.api.types.is_float_dtype(dtype):
        if (col.to_numpy() == 0).any():
            return None
    elif pd.api.types.is_object_dtype(dtype):
        if pd.api.types.infer_dtype(col, skipna=False) not in ("string", "date"):
            return None
    elif not (pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_integer_dtype(dtype)
              or pd.api.types.is_string_dtype(dtype)):
        return None
    codes, uniques = pd.factorize(col)
    return codes.astype(np.int64, copy=False), [str(u) for u in uniques]


def _shared_codes(*coded: tuple[np.ndarray, list[str]]) -> tuple[list[np.ndarray], list[str]]:
    """The codes of several columns renumbered by text, so that equal text is one code in all of them."""
    texts = [t for _, ts in coded for t in ts]
    ids, uniques = pd.factorize(np.asarray(texts, dtype=object))
    out, start = [], 0
    for codes, ts in coded:
        out.append(ids[start:start + len(ts)].astype(np.int64)[codes] if len(ts) else codes)
        start += len(ts)
    return out, [str(u) for u in uniques]


def _grid_holds(off: pd.DataFrame, on: pd.DataFrame, grid: Grid, keys: list[str]) -> bool:
    """True when :func:`check_grid`'s rules hold, decided on integer codes of the labels (equal exactly where
    their text is equal) instead of a text copy of every row; False when a rule fails or a label column cannot
    be coded (then the text comparison decides and names the first offending row)."""
    columns: dict[str, tuple[np.ndarray, np.ndarray | None, list]] = {}
    for c in (*keys, "reward"):  # named the same way in both parts
        a, b = _text_codes(off[c]), _text_codes(on[c])
        if a is None or b is None:
            return False
        (ca, cb), texts = _shared_codes(a, b)
        columns[c] = (ca, cb, texts)
    for c in ("discount", "exposure", "policy", "metric"):
        a = _text_codes(off[c])
        if a is None:
            return False
        columns[c] = (a[0], None, a[1])
    clip_codes, clip_values = pd.factorize(pd.to_numeric(off["clip"], errors="coerce").astype(float))
    columns["clip"] = (clip_codes.astype(np.int64), None, [float(v) for v in clip_values])
    allowed = {"reward": grid.rewards, "discount": grid.discounts, "exposure": grid.exposures,
               "clip": [float(c) for c in grid.clips], "policy": (LOGGING_POLICY, *grid.policies), "metric": METRICS}
    for c, names in allowed.items():
        codes, _, values = columns[c]
        listed = np.isin(np.asarray(values, dtype=object), np.asarray(list(names), dtype=object))
        if len(codes) and not listed[codes].all():
            return False

    def combined(names: list[str], part: int) -> np.ndarray | None:
        out = np.zeros(len(off) if part == 0 else len(on), dtype=np.int64)
        stride = 1
        for c in names:
            out += columns[c][part] * stride
            stride *= max(len(columns[c][2]), 1)
            if stride >= 2 ** 62:
                return None
        return out

    group_off, group_on = combined(list(keys), 0), combined(list(keys), 1)
    row_off = combined([*keys, "reward", "discount", "exposure", "clip", "policy", "metric"], 0)
    pair_off, pair_on = combined([*keys, "reward"], 0), combined([*keys, "reward"], 1)
    if any(k is None for k in (group_off, group_on, row_off, pair_off, pair_on)):
        return False
    if pd.Series(row_off).duplicated().any() or pd.Series(pair_on).duplicated().any():
        return False
    n_groups = len(np.unique(np.concatenate([group_off, group_on])))  # (without group keys: one, code 0)
    n_variants = (len(grid.rewards) * len(grid.discounts) * len(grid.exposures) * len(grid.clips)
                  * (1 + len(grid.policies)) * len(METRICS))
    if len(off) != n_groups * n_variants:
        return False
    # no repeated row, every label listed and as many rows as groups × variants: the offline rows are every
    # variant of every group, so a missing online (group, reward) row is an offline row without its online n below
    where = pd.Index(pair_on).get_indexer(pair_off)
    n = off["n"].to_numpy(dtype=float)
    n_on = np.append(on["n"].to_numpy(dtype=float), np.nan)[where]  # (-1, no online row: NaN)
    metric_codes, _, metric_texts = columns["metric"]
    may_drop = (np.asarray(metric_texts, dtype=object) == "ndcg")[metric_codes] & (grid.ndcg_rule == "drop")
    return not np.where(may_drop, n > n_on, n != n_on).any()


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
