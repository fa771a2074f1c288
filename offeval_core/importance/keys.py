"""Names of the importance estimators: the registry key ``base[-zero][@impression]`` and its one parser.

Every routine that takes an estimator (``estimate``, ``bootstrap``, the command line) reads it through
:func:`check_estimator`, so a key such as ``ncis-zero@impression`` means the same thing everywhere.
"""

from __future__ import annotations

from typing import NamedTuple

from offeval_core.errors import SpecError, WrongType
from offeval_core.validation import check_choice

__all__ = ["BASES", "CAPPINGS", "SCALES", "EstimatorKey", "check_estimator", "estimator_key", "parse_key"]

BASES = ("is", "snips", "cis", "ncis", "piece-ncis", "point-ncis")
CAPPINGS = ("max", "zero")
SCALES = ("session", "impression")
_UNCAPPED = ("is", "snips")


class EstimatorKey(NamedTuple):
    """A parsed estimator: ``base`` (one of :data:`BASES`), ``capping`` (max / zero), ``scale``
    (session / impression), and the registry ``key`` they spell."""

    base: str
    capping: str
    scale: str
    key: str

    @property
    def uncapped(self) -> bool:
        """IS and SNIPS take the weights uncapped: every clip reads them at c = ∞ (the reduce derives them from
        CIS / NCIS at m = ∞; the bootstrap asks for the weights at c = ∞).

        >>> check_estimator("snips").uncapped, check_estimator("ncis").uncapped
        (True, False)
        """
        return self.base in _UNCAPPED


def estimator_key(base: str, *, capping: str = "max", scale: str = "session") -> str:
    """Registry key of an importance estimator, e.g. ``ncis-zero@impression``.

    >>> estimator_key("piece-ncis", capping="zero", scale="impression")
    'piece-ncis-zero@impression'
    """
    check_choice(base, BASES, name="estimator")
    check_choice(capping, CAPPINGS, name="capping")
    check_choice(scale, SCALES, name="scale")
    zero = "-zero" if capping == "zero" and base not in _UNCAPPED else ""
    return base + zero + ("@impression" if scale == "impression" else "")


def _split(key: str) -> tuple[str, str | None, str | None]:
    body, at, scale = key.partition("@")
    zero = body.endswith("-zero")
    return body.removesuffix("-zero"), ("zero" if zero else None), (scale if at else None)


def check_estimator(estimator: str, *, capping: str | None = None, scale: str | None = None) -> EstimatorKey:
    """Input validation of an estimator argument: a base name or a full key, plus optional ``capping`` and
    ``scale`` options; the key's own ``-zero`` / ``@impression`` parts win over the defaults and must not
    contradict an explicit option.

    >>> check_estimator("ncis-zero@impression")
    EstimatorKey(base='ncis', capping='zero', scale='impression', key='ncis-zero@impression')
    >>> check_estimator("ncis", capping="zero").key
    'ncis-zero'
    """
    if not isinstance(estimator, str):
        raise WrongType(f"estimator must be a string such as 'ncis' or 'ncis-zero@impression', "
                        f"got {type(estimator).__name__}")
    base, key_capping, key_scale = _split(estimator.strip())
    if base not in BASES or key_scale not in (None, *SCALES) or (key_capping and base in _UNCAPPED):
        raise SpecError(f"estimator must be one of {', '.join(map(repr, BASES))}, optionally followed by "
                        f"'-zero' (zero-capping) and '@impression'; got {estimator!r}", expected="ncis-zero@impression")
    for name, given, in_key, choices in (("capping", capping, key_capping, CAPPINGS), ("scale", scale, key_scale, SCALES)):
        if given is not None:
            check_choice(given, choices, name=name)
            if in_key is not None and in_key != given:
                raise SpecError(f"estimator {estimator!r} says {name} {in_key!r} but {name}={given!r} was given")
    cap = key_capping or capping or "max"
    if base in _UNCAPPED:
        cap = "max"
    sc = key_scale or scale or "session"
    return EstimatorKey(base, cap, sc, estimator_key(base, capping=cap, scale=sc))


def parse_key(key: str) -> tuple[str, str, str]:
    """``(base, capping, scale)`` of a registry key (inverse of :func:`estimator_key`).

    >>> parse_key("cis-zero@impression")
    ('cis', 'zero', 'impression')
    """
    k = check_estimator(key)
    return k.base, k.capping, k.scale
