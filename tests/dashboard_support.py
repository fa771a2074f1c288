"""What the dashboard AppTests share: the app's path, a small simulated demo set through the environment,
opening a page, and reading a metric."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from streamlit.testing.v1 import AppTest

from offeval_core.simulate import preset_config, write_world

APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")
SEED = 11


def write_small_world(out: Path) -> Path:
    """The simulator's small preset (3 experiments × 3 days), seed 11, written to ``out``."""
    write_world(preset_config("small"), out, seed=SEED)
    return out


@contextmanager
def environment(**values: str):
    """Set environment variables (e.g. ``OFFEVAL_DEMO_DIR``) for the app, restoring them afterwards."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def open_page(page: str | None = None, *, timeout: float = 60, **params: str) -> AppTest:
    """Run the app with ``params`` in the URL, then switch to ``views/<page>.py``; fail on any exception."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if page:
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert found, f"no metric {label!r}; metrics: {[m.label for m in at.metric]}"
    return found[0]


def upload(at: AppTest, frame, name: str, *, guess: bool = False, confirm: bool = False) -> AppTest:
    """Simulate an upload: the bytes go through the same cached temp-dir reader the widget callback uses. With
    ``guess`` the mapping starts from the common-name guesses, as the upload widget's callback does; with
    ``confirm`` the pre-filled column mapping is applied when the page asks before computing."""
    from dashboard import data

    payload = frame if isinstance(frame, bytes) else frame.to_csv(index=False).encode()
    sha = data.content_key(payload)
    data.upload_raw(sha, name, payload)
    at.session_state["upload_info"] = {"sha": sha, "name": name, "mapping": {"guess": "1"} if guess else {}}
    at.run()
    at.selectbox(key="w_dataset").set_value("upload").run()
    assert not at.exception, [e.value for e in at.exception]
    if confirm and any("Before anything is computed" in w.value for w in at.warning):
        at.button(key="w_map_apply").click().run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def table(at: AppTest, header: str):
    """The shown table (human headers, formatted cells) that has a column ``header``."""
    found = [d.value for d in at.dataframe if header in d.value.columns]
    assert found, f"no table with a column {header!r}; tables: {[list(d.value.columns) for d in at.dataframe]}"
    return found[0]


def shown(frame, **kwargs):
    """A core frame as the dashboard shows it (offeval_core.display: headers and cells), to compare with a page's."""
    from offeval_core.display import display_frame

    return display_frame(frame, **kwargs)[0]


def number(text) -> float:
    """A shown number back as a float: ``0.2447``, ``333,600``, ``6.38 %`` (→ 0.0638), ``1e-17``, ``∞``."""
    t = str(text).replace(",", "").replace("−", "-").strip()
    if t in ("∞", "+∞"):
        return float("inf")
    if t.endswith("%"):
        return float(t[:-1].strip()) / 100
    return float(t)
