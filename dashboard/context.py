"""The context every page reads: the settings (resolved against the data) and the loaded dataset, put in the
session by the sidebar before the page runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from dashboard import data
from dashboard.state import Settings
from offeval_core.importance.weights import PROPENSITY

__all__ = ["CTX_KEY", "Context", "ctx"]

CTX_KEY = "_offeval_ctx"


@dataclass(frozen=True, eq=False)
class Context:
    """What every page needs: the settings (resolved against the data) and the loaded dataset."""

    settings: Settings
    dataset: data.Dataset | None
    problem: str = ""
    notes: tuple[str, ...] = field(default=())
    uses: tuple[str, ...] | None = None
    """The sidebar settings the page reads (None: all of them); exports name only these."""
    after_page: tuple[Callable[[], None], ...] = ()
    """What the sidebar draws into its place once the page has run (the clip recommendation, whose computation
    then does not hold back the page's first chart)."""

    @property
    def key(self) -> str:
        return self.dataset.key if self.dataset else ""

    @property
    def logs(self):
        return self.dataset.logs if self.dataset else None

    @property
    def reward(self) -> str | None:
        return self.settings.reward

    @property
    def policy(self) -> str | None:
        return self.settings.policy

    @property
    def diagnosed_policy(self) -> str | None:
        """The policy the assumption tests are about (the Method and "Which estimator?" pages read the same cached
        diagnosis): the sidebar's target policy when the dataset has it, ranks or propensities alike; None (the
        logging policy) otherwise."""
        if self.dataset is None or self.policy not in self.dataset.targets.all:
            return None
        return self.policy

    @property
    def kind(self) -> str | None:
        """The target policy's kind: ``rank`` (DCG family and exposure weights) or ``propensity`` (importance
        weights π_t / π_p); None without a policy."""
        return self.dataset.targets.kind(self.policy) if self.dataset is not None and self.policy else None

    @property
    def propensity(self) -> bool:
        return self.kind == "propensity"

    @property
    def models(self) -> tuple[str, str]:
        """(D, D0) of the target policy's estimators: the sidebar's models, or ``propensity`` for both when the
        weights are the logged propensities."""
        if self.propensity:
            return PROPENSITY, PROPENSITY
        return self.settings.discount, self.settings.exposure

    @property
    def present(self) -> bool:
        return self.settings.present


def ctx() -> Context:
    """The context the app computed in this run (pages are only run by the app)."""
    c = st.session_state.get(CTX_KEY)
    if c is None:
        st.error("The page was opened without the app: start it with `make run` "
                 "(`streamlit run dashboard/app.py`).")
        st.stop()  # not ui.end_page: without the app nothing catches it, and there is no view to write
    return c
