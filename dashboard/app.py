"""offeval dashboard: entry point. Declares the pages with ``st.navigation`` and draws the global sidebar.

Run with ``offeval dashboard [FILE]`` or ``make run [LOGS=FILE]`` (or ``streamlit run dashboard/app.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from dashboard import pages, render, share, sidebar, ui  # noqa: E402
from dashboard.data.datasets import UploadGone  # noqa: E402
from dashboard.data.warmup import page_running  # noqa: E402
from offeval_core.errors import estimator_notes  # noqa: E402
from offeval_core.sanitize import escape_markdown  # noqa: E402

HERE = Path(__file__).parent

st.set_option("client.disableDataExport", True)  # tables' own CSV export is not neutralised: show_table's is
st.set_page_config(page_title="offeval — offline evaluation of ranking policies", page_icon="📐",
                   layout="wide",
                   initial_sidebar_state="collapsed" if st.query_params.get("present") == "1"
                   or st.session_state.get("w_present") else "auto")

NAVIGATION = [st.Page(HERE / p.view, title=p.label, icon=p.icon, url_path=p.path, default=i == 0)
              for i, p in enumerate(pages.PAGES)]

page = st.navigation(NAVIGATION)
st.session_state["_page_path"] = page.url_path  # the page's folded controls are its own (ui.controls)
charts_first = page.url_path not in pages.CHARTLESS_PAGES
with page_running():  # the background preparation starts no new step until this run ends
    if charts_first:  # the chart code loads in the browser while the page computes
        render.preload_chart_code()
    context = sidebar.render(page.url_path)
    for note in context.notes:  # on every page: a link's ignored parameter (e.g. clip=nan) is said where it lands
        st.warning(escape_markdown(note), icon=":material/warning:")
    try:
        notes: list[str] = []
        try:
            with estimator_notes() as notes:  # the notes of numbers drawn outside a guarded section
                page.run()
        except ui.PageEnd:  # a page that ended early (ui.end_page): what it drew stays, and the URL is written below
            pass
        except UploadGone as exc:  # the session's upload was pushed out of the server's store: say so, no traceback
            ui.show_error(exc, context=page.title)
        ui.show_notes(notes)
        for draw in context.after_page:  # the sidebar's slower parts, once the page's own charts are drawn
            draw()
        if not charts_first:  # after the page: ready for the next page's charts, not in this page's way
            render.preload_chart_code()
    finally:  # the URL holds the view that is shown, also when the page ended early
        share.finish(page.url_path)
