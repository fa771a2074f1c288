"""Text labels of chart points that never collide: each label is tried at a few offsets around its point (a
leader line joins a label to its point), the first offset whose box overlaps no label placed before it, no other
point and stays inside the plot wins; a label with no free place, and every label beyond ``max_labels``, is left
to the hover text.

Plotly draws a label's box in pixels while its point moves with the axes, so placement works in pixels of the
smallest plot area the chart is drawn in (``PLOT_PX``) and a place is taken only if it stays free when the plot
is drawn larger (the distances between points grow, the labels do not). Pure functions (no plotting).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PLOT_PX", "Label", "label_annotations", "place_labels", "text_box"]

PLOT_PX = (640.0, 250.0)
"""(width, height) in px of the smallest plot area a chart with labels is drawn in: normal mode next to the
sidebar at 1280 px, presentation mode (350 px high), the static export."""
_SCALES = ((1.0, 1.0), (1.5, 1.0), (2.2, 1.0), (1.0, 1.4), (1.5, 1.4), (2.2, 1.4), (3.0, 1.8))
_RINGS = (14.0, 30.0, 50.0)
_DIRECTIONS = ((1, -1), (-1, -1), (1, 1), (-1, 1), (0, -1), (0, 1), (1, 0), (-1, 0))
CHAR_PX = 0.62
"""Width of a character in font sizes (an upper bound for the charts' sans-serif font)."""


@dataclass(frozen=True)
class Label:
    """A placed label: the index of its point and its offset (px, y down) from the point to the label's centre."""

    index: int
    dx: float
    dy: float


def text_box(text: str, font_px: float) -> tuple[float, float]:
    """(width, height) in px of a one-line label, with 2 px of padding on every side.

    >>> text_box("exp11", 12)
    (41.2, 19.6)
    """
    return (round(len(text) * CHAR_PX * font_px + 4, 1), round(1.3 * font_px + 4, 1))


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(xs: Sequence[float], ys: Sequence[float], texts: Sequence[str], *, x_range: tuple[float, float],
                 y_range: tuple[float, float], font_px: float = 12, priority: Sequence[int] | None = None,
                 max_labels: int = 12, plot_px: tuple[float, float] = PLOT_PX) -> list[Label]:
    """Labels for the points (xs, ys) in data units on axes spanning ``x_range`` × ``y_range``: in ``priority``
    order (default: as given), at most ``max_labels``, each at the first free offset. Points outside the
    ranges or not finite get no label.

    >>> placed = place_labels([0.0, 0.001, 1.0], [0.0, 0.0, 1.0], ["cand_07", "treatment", "far"],
    ...                       x_range=(-0.1, 1.1), y_range=(-0.1, 1.1))
    >>> [(p.index, round(p.dy)) for p in placed]   # the second close point's label moves up, past the first's
    [(0, -18), (1, -40), (2, 18)]
    """
    n = len(xs)
    order = list(priority) if priority is not None else list(range(n))
    w0, h0 = plot_px
    xspan = (x_range[1] - x_range[0]) or 1.0
    yspan = (y_range[1] - y_range[0]) or 1.0

    def px(i: int, sx: float, sy: float) -> tuple[float, float]:
        return ((xs[i] - x_range[0]) / xspan * w0 * sx, (y_range[1] - ys[i]) / yspan * h0 * sy)

    ok = [i for i in range(n) if all(map(math.isfinite, (xs[i], ys[i])))
          and x_range[0] <= xs[i] <= x_range[1] and y_range[0] <= ys[i] <= y_range[1]]
    placed: list[tuple[Label, tuple[float, float]]] = []
    dot = 5.0  # half the size of a point's marker
    for i in order:
        if i not in ok or len(placed) >= max_labels:
            continue
        bw, bh = text_box(texts[i], font_px)
        for ring in _RINGS:
            found = None
            for ux, uy in _DIRECTIONS:
                dx = ux * (ring + bw / 2 * abs(ux))
                dy = uy * (ring * 0.6 + bh / 2 * abs(uy))
                if _free(i, dx, dy, bw, bh, placed, ok, px, dot, texts, font_px):
                    found = Label(i, dx, dy)
                    break
            if found is not None:
                placed.append((found, (bw, bh)))
                break
    return [label for label, _ in placed]


def _free(i, dx, dy, bw, bh, placed, points, px, dot, texts, font_px) -> bool:
    for sx, sy in _SCALES:
        x, y = px(i, sx, sy)
        box = (x + dx - bw / 2, y + dy - bh / 2, x + dx + bw / 2, y + dy + bh / 2)
        if box[0] < 0 or box[1] < 0 or box[2] > PLOT_PX[0] * sx or box[3] > PLOT_PX[1] * sy:
            return False
        for j in points:
            qx, qy = px(j, sx, sy)
            if _overlap(box, (qx - dot, qy - dot, qx + dot, qy + dot)):
                return False
        for other, (ow, oh) in placed:
            ox, oy = px(other.index, sx, sy)
            obox = (ox + other.dx - ow / 2, oy + other.dy - oh / 2, ox + other.dx + ow / 2, oy + other.dy + oh / 2)
            if _overlap(box, obox):
                return False
    return True


def label_annotations(xs, ys, texts, labels: Sequence[Label], *, font_px: float = 12, colours=None,
                      xref: str = "x", yref: str = "y", prefix: str = "label") -> list[dict]:
    """Plotly annotations of placed ``labels``: the text at its offset, a thin leader line to its point."""
    out = []
    for lab in labels:
        i = lab.index
        colour = colours[i] if colours is not None else "#333333"
        out.append({"x": xs[i], "y": ys[i], "xref": xref, "yref": yref, "text": str(texts[i]), "showarrow": True,
                    "ax": lab.dx, "ay": lab.dy, "axref": "pixel", "ayref": "pixel", "arrowhead": 0,
                    "arrowwidth": 1, "arrowcolor": "rgba(90,90,90,0.6)", "standoff": 3,
                    "font": {"size": font_px, "color": colour}, "bgcolor": "rgba(255,255,255,0.8)",
                    "borderpad": 1, "name": f"{prefix} {texts[i]}"})
    return out
