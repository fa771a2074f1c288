"""What a backend's SQL offers beyond the core every Ibis backend shares, in one place.

The reduce and its checks are written once in Ibis. Three of their steps use features that not every
engine has, and fall back to plain SQL where it lacks them:

- **a hash of a struct** (the group keys as one integer in the session pass): DuckDB and Spark SQL; elsewhere
  the session pass keeps the group keys themselves (:func:`hashes_structs`);
- **bit aggregates** (``bit_or`` over 64-bit words and ``bit_count``: repeated ranks counted with a bitset
  that rides on the session pass): DuckDB and Spark SQL; elsewhere the repeated pairs are counted by a
  group-by of their own (:func:`has_bitsets`; PostgreSQL has no ``bit_count`` of an integer);
- **a cast of text to a number that gives NULL for text that is not one** (``TRY_CAST``): Ibis compiles
  ``try_cast`` to a plain ``CAST`` on PostgreSQL, which stops the query at the first such value, so there only
  text shaped like a number is cast (:class:`GuardedCastColumns`).

- **sorted lists** (a group's values collected into one sorted list, a slice of a list and the dot product of
  two lists of one length): DuckDB; the graded iDCG then sorts each (session, clip value)'s labels in its
  group-by instead of ranking them in a window, about 0.8 s less of the demo's ``watch_time`` reduce (2.5 s →
  1.7 s, and 0.8 GB less memory for the demo's default grid); elsewhere, and on a DuckDB connection with a memory
  limit (a list cannot spill to disk), the window (:func:`sorts_lists`).

Booleans are counted as ``CASE WHEN … THEN 1 ELSE 0 END`` everywhere (:func:`flag`): PostgreSQL casts a
boolean to a 32-bit integer only.
"""

from __future__ import annotations

import functools
from decimal import Decimal, localcontext

import ibis
import ibis.expr.datatypes as dt

from offeval_core.engine.ibis_columns import IbisColumns

__all__ = ["GuardedCastColumns", "columns_for", "flag", "has_bitsets", "hashes_structs", "list_dot_product",
           "list_slice", "sorts_lists"]

_NATIVE = ("duckdb", "pyspark")  # the engines whose SQL has every feature above (tested on both)


def _kind(backend) -> str:
    return getattr(backend, "name", "") or ""


def flag(mask) -> ibis.Value:
    """A boolean as a 64-bit 1 or 0 (PostgreSQL casts a boolean to a 32-bit integer only)."""
    return ibis.ifelse(mask, ibis.literal(1, "int64"), ibis.literal(0, "int64"))


def hashes_structs(backend) -> bool:
    """Whether the backend hashes a struct of the group keys to one integer (DuckDB, Spark SQL)."""
    return _kind(backend) in _NATIVE


def has_bitsets(backend) -> bool:
    """Whether the backend has ``bit_or`` over 64-bit integers and ``bit_count`` of one (DuckDB, Spark SQL)."""
    return _kind(backend) in _NATIVE


def sorts_lists(backend) -> bool:
    """Whether the graded iDCG sorts each pair's labels in a list (:func:`list_dot_product`): DuckDB, unless
    the connection has a memory limit of its own. A list is held in memory whole: under a tight limit the query
    stops (the demo's ``watch_time`` with 148 MB for DuckDB) where the window's sort spills to disk."""
    return _kind(backend) == "duckdb" and _memory_limit(backend.con) == _default_memory_limit()


def _memory_limit(con) -> str:
    return con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]


@functools.cache
def _default_memory_limit() -> str:
    """DuckDB's own memory limit (a share of the machine's memory), as a connection without one reports it."""
    import duckdb

    with duckdb.connect() as con:
        return _memory_limit(con)


@ibis.udf.scalar.builtin(signature=((dt.Array(dt.float64), dt.Array(dt.float64)), dt.float64))
def list_dot_product(a, b):
    """Σ_j a_j · b_j of two lists of one length (DuckDB's ``list_dot_product``)."""


@ibis.udf.scalar.builtin(signature=((dt.Array(dt.float64), dt.int64, dt.int64), dt.Array(dt.float64)))
def list_slice(a, begin, end):
    """The items ``begin``..``end`` of a list, counted from 1, both included (DuckDB's ``list_slice``)."""


# Text a PostgreSQL NUMERIC reads without error whose value pandas also reads as a number: an optional sign,
# digits with an optional point, an exponent of at most three digits, or inf / infinity (any case, stripped
# and lower-cased before the match). 'nan' is not a number to read_logs (pandas reads it as missing: NaN), so it
# is left out, and so are pandas' other forms it would not read either way (hex, underscores).
_NUMBER = r"^[+-]?(([0-9]+[.]?[0-9]*|[.][0-9]+)(e[+-]?[0-9]{1,3})?|inf|infinity)$"
# NUMERIC reads at most 131 072 digits before the point and 16 383 after (counting the exponent): text of at most
# 15 000 characters with an exponent of three digits stays within both; longer text is not read as a number
_MAX_TEXT = 15_000
# the double range as strtod rounds (ties to even): |x| ≥ DBL_MAX + ½ ulp reads as ±inf, |x| ≤ ½ of the
# smallest subnormal (2^-1075) as ±0; both are exact decimal fractions of powers of two
with localcontext(prec=1200):  # exact: 2^1024 has 309 digits, 2^-1075 has 752 significant digits
    _TO_INF = format(Decimal(2) ** 1024 - Decimal(2) ** 970, "f")
    _TO_ZERO = format(Decimal(1) / Decimal(2) ** 1075, "f")


class GuardedCastColumns(IbisColumns):
    """:class:`IbisColumns` for engines whose cast of text to a number fails on text that is not one
    (PostgreSQL): text shaped like a number is read as an exact NUMERIC and rounded to a double as pandas
    reads it (beyond the double range ±inf, below half the smallest subnormal 0); any other text is NULL, so
    the rules count it as not a number, as ``read_logs`` does."""

    @staticmethod
    def text_number(text):
        low = text.lower()
        shaped = (low.length() <= _MAX_TEXT) & low.re_search(_NUMBER)
        exact = ibis.ifelse(shaped, low, ibis.null().cast("string")).cast("decimal")
        big = ibis.literal(_TO_INF).cast("decimal")
        tiny = ibis.literal(_TO_ZERO).cast("decimal")
        inf = ibis.literal(float("inf"))
        return (ibis.cases((exact >= big, inf), (exact <= -big, -inf), (exact.abs() <= tiny, 0.0),
                           else_=exact.cast("float64")))


def columns_for(backend) -> type[IbisColumns]:
    """The column namespace the schema's rules run in on ``backend``."""
    return GuardedCastColumns if _kind(backend) == "postgres" else IbisColumns
