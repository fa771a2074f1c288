"""The view in the URL and on a projector: after a page ran, its settings are written to the URL (only
non-defaults; a browser history entry per change), the copy-link box is filled, and in presentation mode the
slide position and the keys that step through the chosen sequence of pages are shown."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import streamlit as st

from dashboard import served, ui
from dashboard.pages import PAGE_TITLES
from dashboard.sidebar import DECK, PAGE_DEFAULTS_KEY, WRITTEN_KEY, current_settings
from dashboard.state import to_query_params

__all__ = ["finish"]


def finish(page_url_path: str) -> None:
    """After the page ran: write the view's settings to the URL (only non-defaults; a new browser history
    entry per change, so Back / Forward step through them) and fill the copy-link box."""
    ss = st.session_state
    c = ss.get(ui.CTX_KEY)
    if c is None:
        return
    settings = current_settings().replace(reward=c.settings.reward, policy=c.settings.policy,
                                          discount=c.settings.discount, exposure=c.settings.exposure)
    if c.key.startswith(("upload:", "mupload:")):  # names from an uploaded file stay out of the link
        settings = settings.replace(reward=None, policy=None, experiment=None)
    page_defaults = dict(ss.get(PAGE_DEFAULTS_KEY, {}))
    params = to_query_params(settings, page_defaults)
    if served.served() and settings.dataset == "demo":
        params["dataset"] = "demo"  # the demo is not this server's default
    if params != st.query_params.to_dict():
        st.query_params.from_dict(params)
    ss[WRITTEN_KEY] = params
    ss["_written_page"] = page_url_path
    slot = ss.get("_link_slot")
    if slot is not None:
        with slot.container():
            _copy_link(st, params, page_url_path)
    if settings.present:
        _deck(page_url_path or "data", list(ss.get("w_deck") or DECK))




def _deck(here: str, deck: list[str]) -> None:
    """Presentation mode: where this page is in the chosen sequence, and the keys that step through it."""
    if here in deck:
        i = deck.index(here)
        prev_ = f"← {PAGE_TITLES[deck[i - 1]]}" if i > 0 else ""
        next_ = f"→ {PAGE_TITLES[deck[i + 1]]}" if i + 1 < len(deck) else "end"
        st.markdown(f'<div class="offeval-deck">Slide {i + 1} of {len(deck)} · {prev_} · {next_} '
                    "(arrow keys or PageUp / PageDown)</div>", unsafe_allow_html=True)


def _copy_link(sb, params: dict, page_url_path: str) -> None:
    try:
        url = st.context.url or ""
    except Exception:
        url = ""
    parts = urlsplit(url) if url else None
    base = f"{parts.scheme}://{parts.netloc}" if parts and parts.netloc else "http://localhost:8501"
    link = f"{base}/{page_url_path}" + (f"?{urlencode(params)}" if params else "")
    with sb.popover("Copy link to this view", icon=":material/link:", width="stretch"):
        st.caption("Everything but uploaded data is in the link: the page, dataset, reward, policy, "
                   "discount models, clip, level and every control of the page.")
        st.code(link, language=None, wrap_lines=True)
