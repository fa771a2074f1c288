"""Arm values: which of a file's arm labels is the control arm and which the treatment arm.

Teams label their A/B arms ``A`` / ``B``, ``0`` / ``1``, ``control`` / ``test``, ``baseline`` / ``variant``…
The schema's arms are ``control`` (logged by the production policy) and ``treatment``. An
:class:`ArmValues` maps the file's labels onto them. It is given (``--arms control=A,treatment=B``,
:func:`parse_arms`), or guessed for a common pair (:func:`guess_arm_values`); any other set of labels is a
question for the user, never a guess. :func:`map_arm_values` is the pure function both readers apply
before their checks (``read_logs`` on pandas, the Parquet reduce on an engine expression through
:meth:`ArmValues.pairs`); a label the mapping does not name maps to nothing, so those sessions never
enter an estimate as if they were control.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offeval_core.errors import SpecError

__all__ = ["ARM_NAMES", "COMMON_PAIRS", "NO_ARMS", "ArmValues", "arm_label_map", "arm_label_problem", "guess_arm_values", "map_arm_values", "normalise_label",
           "parse_arms"]

ARM_NAMES = ("control", "treatment")
NO_ARMS = "none"
"""``--arms none``: the file has no arm column; every session was logged by the logging policy."""

# the pairs offeval maps by itself, compared case-insensitively; the first label of each pair is control
_CONTROL_WORDS = ("control", "ctrl", "baseline", "base", "default")
_TREATMENT_WORDS = ("treatment", "treat", "test", "variant", "experiment", "new")
COMMON_PAIRS: tuple[tuple[str, str], ...] = (
    *((c, t) for c in _CONTROL_WORDS for t in _TREATMENT_WORDS),
    ("a", "b"), ("0", "1"), ("off", "on"), ("false", "true"),
)
"""Label pairs mapped without asking: (control label, treatment label), lower case."""


def normalise_label(value) -> str:
    """A label as compared: text, stripped, lower case; whole numbers without a decimal point (``1.0`` → ``1``).

    >>> normalise_label(" Control "), normalise_label(1.0), normalise_label("1.0"), normalise_label(True)
    ('control', '1', '1', 'true')
    """
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, float | np.floating) and float(value).is_integer():
        value = int(value)
    text = str(value).strip().lower()
    if re.fullmatch(r"-?\d+\.0+", text):  # "1.0" read from a file is the label 1
        text = text.split(".", 1)[0]
    return text


@dataclass(frozen=True)
class ArmValues:
    """The file's label of each arm (as written in the file) and how the mapping was obtained.

    ``how`` is ``"given"`` (the user said so), ``"schema"`` (the labels are control / treatment already) or
    ``"guessed"`` (a common pair, shown to the user).
    """

    control: str
    treatment: str | None = None
    how: str = "given"

    def pairs(self) -> dict[str, str]:
        """Normalised label → arm (the form an engine expression's CASE takes).

        >>> ArmValues("A", "B", how="guessed").pairs()
        {'a': 'control', 'b': 'treatment'}
        """
        out = {normalise_label(self.control): "control"}
        if self.treatment is not None:
            out[normalise_label(self.treatment)] = "treatment"
        return out

    def text(self) -> str:
        """``control=A,treatment=B``: the mapping as the ``--arms`` option writes it."""
        parts = [f"control={self.control}"] + ([f"treatment={self.treatment}"] if self.treatment is not None else [])
        return ",".join(parts)

    def describe(self) -> str:
        """``A → control, B → treatment`` for summaries."""
        parts = [f"{self.control} → control"] + ([f"{self.treatment} → treatment"]
                                                  if self.treatment is not None else [])
        return ", ".join(parts)


def parse_arms(text: str | Mapping[str, str] | ArmValues | None, *, what: str = "--arms") -> ArmValues | str | None:
    """Parse ``"control=A,treatment=B"`` (or ``none``) into an :class:`ArmValues` (or :data:`NO_ARMS`).

    >>> parse_arms("control=A, treatment=B")
    ArmValues(control='A', treatment='B', how='given')
    >>> parse_arms("none")
    'none'
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    if isinstance(text, ArmValues):
        return text
    if isinstance(text, str) and text.strip().lower() == NO_ARMS:
        return NO_ARMS
    items = text.items() if isinstance(text, Mapping) else [
        tuple(s.strip() for s in part.split("=", 1)) if "=" in part else (part.strip(), "")
        for part in str(text).split(",") if part.strip()]
    got: dict[str, str] = {}
    for key, value in items:
        key = str(key).strip().lower()
        if key not in ARM_NAMES or not str(value).strip() or "=" in str(value):
            raise SpecError(f"{what} must look like control=<your label>,treatment=<your label> (or 'none' when "
                            f"the file has no arm column), got {text!r}", source=what,
                            expected="control=A,treatment=B")
        if key in got:
            raise SpecError(f"{what} names the {key} arm twice: {text!r}", source=what)
        got[key] = str(value).strip()
    if "control" not in got:
        raise SpecError(f"{what} must name the control arm's label (control=<your label>), got {text!r}",
                        source=what, expected="control=A,treatment=B")
    if "treatment" in got and normalise_label(got["treatment"]) == normalise_label(got["control"]):
        raise SpecError(f"{what} gives both arms the label {got['control']!r}", source=what)
    return ArmValues(got["control"], got.get("treatment"), how="given")


def _labels(values: Iterable) -> dict[str, object]:
    """Normalised label → the first raw value written that way (empty values left out)."""
    out: dict[str, object] = {}
    for v in values:
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            continue
        out.setdefault(normalise_label(v), v)
    return out


def guess_arm_values(values: Iterable) -> ArmValues | None:
    """The mapping of a column's distinct labels when they are a common pair (or one label of one), else None.

    >>> guess_arm_values(["A", "B"]).describe(), guess_arm_values([1, 0]).describe()
    ('A → control, B → treatment', '0 → control, 1 → treatment')
    >>> guess_arm_values(["Control", "Treatment"]).how, guess_arm_values(["red", "blue"]) is None
    ('schema', True)
    """
    labels = _labels(values)
    keys = set(labels)
    if keys <= set(ARM_NAMES) and keys:
        return ArmValues(str(labels.get("control", "control")),
                         str(labels["treatment"]) if "treatment" in labels else None, how="schema")
    for c, t in COMMON_PAIRS:
        if keys == {c, t}:
            return ArmValues(str(labels[c]), str(labels[t]), how="guessed")
    return None


def arm_label_problem(column: str, labels: Sequence[str]) -> str:
    """The problem line for arm labels offeval does not map by itself (every reader says it the same way).

    >>> arm_label_problem("bucket", ["red", "blue"])
    "column 'arm' (your 'bucket') has the labels 'blue', 'red': say which label is the control arm and which the treatment arm"
    """
    shown = sorted({str(v) for v in labels}, key=normalise_label)
    more = f" and {len(shown) - 5} more" if len(shown) > 5 else ""
    yours = f" (your {column!r})" if column != "arm" else ""
    return (f"column 'arm'{yours} has the label{'s' if len(shown) > 1 else ''} "
            f"{', '.join(map(repr, shown[:5]))}{more}: say which label is the control arm and which the treatment arm")


def arm_label_map(labels: Iterable, arms: ArmValues | None) -> dict[str, str]:
    """Each label as written (text) → its arm, for the labels the mapping names: the substitution an engine
    applies to the arm column (labels it leaves out become empty, so they fail the check).

    >>> arm_label_map(["A", "b", "C"], ArmValues("A", "B"))
    {'A': 'control', 'b': 'treatment'}
    """
    pairs = arms.pairs() if arms is not None else {a: a for a in ARM_NAMES}
    return {str(v): pairs[normalise_label(v)] for v in labels if normalise_label(v) in pairs}


def map_arm_values(values, arms: ArmValues | None) -> np.ndarray:
    """The arm of every row: ``"control"``, ``"treatment"`` or None where the label is empty or not mapped.

    Without a mapping the labels must be the schema's own (``control`` / ``treatment``, any case).

    >>> map_arm_values(pd.Series(["A", "b", "C", None]), ArmValues("A", "B")).tolist()
    ['control', 'treatment', None, None]
    """
    series = values if isinstance(values, pd.Series) else pd.Series(np.asarray(values, dtype=object))
    pairs = arms.pairs() if arms is not None else {a: a for a in ARM_NAMES}
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    mapped = np.array([pairs.get(normalise_label(u)) for u in uniques] + [None], dtype=object)
    return mapped[codes]  # code -1 (empty) picks the trailing None
