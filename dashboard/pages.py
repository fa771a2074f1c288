"""The dashboard's pages, defined once: url path, view file, navigation label, icon, the heading the page draws
and whether its default view draws a chart. ``app.py`` declares its navigation from :data:`PAGES`; the sidebar,
the presentation deck, the links between pages and the benchmark read the same records. No streamlit import,
so tools read it without a running server.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHARTLESS_PAGES", "PAGES", "PAGE_TITLES", "Page", "page"]


@dataclass(frozen=True)
class Page:
    """One page: ``path`` is its url path, ``view`` its file relative to ``dashboard/``, ``label`` its name in
    the navigation, ``heading`` the ``st.title`` it draws, ``charts`` whether its default view draws a chart
    (the browser loads the chart code while such a page computes)."""

    path: str
    view: str
    label: str
    icon: str
    heading: str
    charts: bool = True


PAGES: tuple[Page, ...] = (
    Page("data", "views/data.py", "Data", ":material/database:", "Data"),
    Page("candidates", "views/candidates.py", "Candidates", ":material/leaderboard:", "Candidates before an A/B test"),
    Page("sensitivity", "views/sensitivity.py", "Sensitivity", ":material/tune:", "Sensitivity to the clip value"),
    Page("correlation", "views/correlation.py", "Correlation", ":material/timeline:", "Offline-online correlation"),
    Page("dcg-vs-ndcg", "views/dcg_vs_ndcg.py", "DCG vs nDCG", ":material/compare_arrows:", "DCG vs nDCG"),
    Page("estimator-lab", "views/estimator_lab.py", "Estimator lab", ":material/science:", "Estimator lab"),
    Page("decisions", "views/decisions.py", "Decisions", ":material/check_box:", "Offline vs online decisions"),
    Page("clip-tuning", "views/clip_tuning.py", "Clip tuning", ":material/content_cut:", "Clip tuning"),
    Page("which-estimator", "views/which_estimator.py", "Which estimator?", ":material/rule:", "Which estimator?"),
    Page("method", "views/method.py", "Method", ":material/menu_book:", "Method", charts=False),
)
"""The pages in navigation order; the first is the default page (served at the root too)."""

PAGE_TITLES: dict[str, str] = {p.path: p.label for p in PAGES}
"""Url path → navigation label (the presentation deck's choices, its previous / next captions)."""

CHARTLESS_PAGES = frozenset(p.path for p in PAGES if not p.charts)
"""Url paths of the pages whose default view draws no chart (the Method page draws one only on request)."""


def page(path: str) -> Page:
    """The page at url ``path`` ('' is the default page); a ``KeyError`` naming the path for no page.

    >>> page("clip-tuning").heading, page("").label
    ('Clip tuning', 'Data')
    >>> page("clip_tuning")
    Traceback (most recent call last):
    KeyError: "no dashboard page at url path 'clip_tuning'"
    """
    found = next((p for p in PAGES if p.path == (path or PAGES[0].path)), None)
    if found is None:
        raise KeyError(f"no dashboard page at url path {path!r}")
    return found
