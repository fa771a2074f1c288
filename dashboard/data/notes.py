"""Estimator notes kept with cached results: an :class:`~offeval_core.errors.EstimatorWarning` raised while a
result was computed (e.g. a standard error reported as undefined because the moments lack the precision) is
stored with the result and said again at every call, cached or not, so the page that shows the numbers shows
the note too (:func:`dashboard.ui.guarded`). A plain ``warnings.warn`` would reach the server log once, from
whichever thread filled the cache (often the background preparation), and never the user.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from offeval_core.errors import estimator_notes, warn_estimator

__all__ = ["Noted", "keeps_notes"]


@dataclasses.dataclass(frozen=True)
class Noted:
    """A cached result and the estimator notes raised while it was computed."""

    value: object
    notes: tuple[str, ...]


def keeps_notes(cache: Callable[[Callable], Callable]) -> Callable[[Callable], Callable]:
    """Decorate a function with ``cache`` (``st.cache_data(...)`` or ``st.cache_resource(...)``) so that its
    estimator notes are cached with its result and raised again (:func:`~offeval_core.errors.warn_estimator`)
    at every call. The cache keys on the function's own name, source and arguments, as it would undecorated."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def collect(*args, **kwargs) -> Noted:
            with estimator_notes() as notes:
                value = fn(*args, **kwargs)
            return Noted(value, tuple(dict.fromkeys(notes)))

        cached = cache(collect)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            result = cached(*args, **kwargs)
            for note in result.notes:
                warn_estimator(note)
            return result.value

        call.clear = cached.clear
        return call

    return decorate
