"""Static PNG / SVG / PDF export of plotly figures through kaleido and the system's Chromium.

Kaleido drives a headless Chromium; this module points it at Debian's ``/usr/bin/chromium`` (or whatever
``BROWSER_PATH`` names) and never downloads a browser. MathJax is disabled (it would be fetched from a
CDN). For many figures, use :func:`export_figures` or the :class:`ExportServer` context manager: one
kaleido server renders them all instead of starting Chromium per figure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import plotly.graph_objects as go

from offeval_core.errors import InputError, MissingTool, WrongType
from offeval_core.safe_io import atomic_write_bytes

__all__ = ["FORMATS", "SYSTEM_CHROMIUM", "ExportServer", "export_figures", "figure_to_bytes", "find_browser"]

FORMATS = ("png", "svg", "pdf", "jpeg", "webp")
SYSTEM_CHROMIUM = "/usr/bin/chromium"


def find_browser() -> str:
    """The Chromium kaleido should use: ``$BROWSER_PATH`` if set, else /usr/bin/chromium, else chromium on
    PATH. Raises a RuntimeError that says how to install it (never downloads)."""
    env = os.environ.get("BROWSER_PATH")
    if env and Path(env).exists():
        return env
    for cand in (SYSTEM_CHROMIUM, shutil.which("chromium"), shutil.which("chromium-browser")):
        if cand and Path(cand).exists():
            return cand
    raise MissingTool("static export needs Chromium: install Debian's package (`make browser` or "
                       "`apt-get install chromium`) or set BROWSER_PATH; no browser is downloaded")


def _prepare() -> None:
    os.environ.setdefault("BROWSER_PATH", find_browser())


def _opts(fmt: str, width: int | None, height: int | None, scale: float) -> dict:
    if fmt not in FORMATS:
        raise InputError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    opts: dict = {"format": fmt, "scale": scale}
    if width is not None:
        opts["width"] = int(width)
    if height is not None:
        opts["height"] = int(height)
    return opts


def _check_fig(fig) -> go.Figure:
    if not isinstance(fig, go.Figure):
        raise WrongType(f"fig must be a plotly.graph_objects.Figure, got {type(fig).__name__}")
    return fig


class ExportServer:
    """One kaleido server for many exports: ``with ExportServer() as ex: ex.to_bytes(fig, "png")``.

    Kaleido's sync server is a process-wide singleton; entering starts it if needed and exiting stops it
    only if this object started it.
    """

    def __init__(self) -> None:
        self._started = False

    def __enter__(self) -> ExportServer:
        import kaleido
        from kaleido import _sync_server

        _prepare()
        if not _sync_server.GlobalKaleidoServer().is_running():
            kaleido.start_sync_server(mathjax=False, silence_warnings=True)
            self._started = True
        return self

    def __exit__(self, *exc) -> None:
        import kaleido

        if self._started:
            kaleido.stop_sync_server(silence_warnings=True)
            self._started = False

    def to_bytes(self, fig: go.Figure, fmt: str = "png", *, width: int | None = None, height: int | None = None,
                 scale: float = 2.0) -> bytes:
        import kaleido

        return kaleido.calc_fig_sync(_check_fig(fig).to_dict(), opts=_opts(fmt, width, height, scale))


def figure_to_bytes(fig: go.Figure, fmt: str = "png", *, width: int | None = None, height: int | None = None,
                    scale: float = 2.0) -> bytes:
    """Render one figure to PNG / SVG / PDF bytes (uses a running export server if there is one)."""
    with ExportServer() as ex:
        return ex.to_bytes(fig, fmt, width=width, height=height, scale=scale)


def export_figures(figures: Mapping[str, go.Figure], out_dir: str | os.PathLike, *,
                   formats: tuple[str, ...] = ("png", "svg"), width: int | None = 1100,
                   scale: float = 2.0) -> list[Path]:
    """Write every figure in every format to ``out_dir/<name>.<fmt>`` with one kaleido server.

    Each file is written to a temporary file and renamed (an interrupted export keeps the previous files);
    names must be plain file names (no folders).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        _opts(fmt, None, None, scale)
    for name in figures:
        if not name or Path(name).name != name or name in (".", ".."):
            raise InputError(f"figure names must be plain file names, got {name[:60]!r}")
    paths = []
    with ExportServer() as ex:
        for name, fig in figures.items():
            for fmt in formats:
                p = atomic_write_bytes(out / f"{name}.{fmt}", ex.to_bytes(fig, fmt, width=width, scale=scale))
                paths.append(p)
    return paths
