"""The column namespace of a query engine (Ibis expressions) in which the schema's rules
(:mod:`offeval_core.log_rules`) run over Parquet files: :class:`IbisColumns`, the counterpart of
:class:`~offeval_core.log_rules.NumpyColumns`."""

from __future__ import annotations

import ibis

from offeval_core.arm_values import ArmValues
from offeval_core.log_rules import SCHEMA_ARMS

__all__ = ["IbisColumns", "present_or_null"]


class IbisColumns:
    """The column namespace of a query engine: a raw column is an Ibis column, masks are boolean columns (a
    NULL mask counts as False). NaN is missing, as in pandas. Integer columns keep their type, so the rules
    that cannot fail on them (not a number, not finite, not whole) are constants the engine drops."""

    @classmethod
    def numeric(cls, raw):
        dt = raw.type()
        if dt.is_integer() or dt.is_floating():
            return raw, raw, ibis.literal(False)
        if dt.is_boolean() or dt.is_numeric():
            values = raw.cast("float64")
            return values, values, ibis.literal(False)
        values = cls.text_number(raw.strip()) if dt.is_string() else ibis.null().cast("float64")
        return values, values, raw.notnull() & values.isnull()  # text that is not a number; dates, binary

    @staticmethod
    def text_number(text):
        """Stripped text as a double, NULL where it is not a number (the engine's TRY_CAST)."""
        return text.try_cast("float64")

    @staticmethod
    def missing(raw):
        if raw.type().is_floating():
            return raw.isnull() | raw.isnan()
        return raw.isnull()

    @staticmethod
    def present(values):
        return ~IbisColumns.missing(values)

    @staticmethod
    def finite(values):
        return ~(values.isnan() | values.isinf()) if values.type().is_floating() else ibis.literal(True)

    @staticmethod
    def integral(values):
        return (values % 1.0) == 0.0 if values.type().is_floating() else ibis.literal(True)

    @staticmethod
    def arm(raw, arms: ArmValues | None = None):
        """(each row's arm through the mapping ``arms``, NULL where the label is empty or not in it; that mask).
        Labels are compared as :func:`~offeval_core.arm_values.normalise_label` compares them: text, stripped,
        lower case, a whole number without its decimal point (``1.0`` is the label ``1``)."""
        text = raw.cast("string").strip().lower()
        text = ibis.ifelse(text.re_search(r"^-?[0-9]+\.0+$"), text.split(".")[0], text)
        mapped = text.substitute((arms or SCHEMA_ARMS).pairs(), else_=ibis.null("string"))
        return mapped, mapped.isnull()


def present_or_null(col):
    """The column with its missing values (NULL, NaN) as NULL, so counts and distinct counts skip them."""
    if not col.type().is_floating():
        return col
    return ibis.ifelse(IbisColumns.missing(col), ibis.null().cast(col.type()), col)
