"""What a stakeholder sees, checked in the browser (tests/test_browser_layout.py): visible text without markup or
HTML entities, the first chart above the fold, titles and headlines inside their boxes, chart annotations that do
not overlap, table numbers with at most 4 significant digits unless whole numbers (counts, ranks, ids); and the
same checks on an exported SVG's text nodes. Each check returns a list of problems (empty: passed), so one page
visit reports every problem at once."""

from __future__ import annotations

import html
import re

MARKUP = re.compile(r"</?\s*(span|b|i|br|div|a|p|sup|sub|em|strong|img|font|table|tr|td|th|script|style)\b[^<>]*>",
                    re.IGNORECASE)
ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[A-Za-z]{2,8});")
NUMBER = re.compile(r"(?<![\w.])[-−+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MISSING = re.compile(r"^(nan|NaN|None|null|undefined)$|[=:]\s*(nan|NaN|None)\b")


def markup_problems(texts: list[str], where: str) -> list[str]:
    """Texts that show markup (an HTML tag) or an HTML entity instead of what they stand for, or a missing value
    as ``nan`` / ``None`` instead of ``n/a — why``."""
    out = [f"{where}: markup or entity shown as text: {t[:140]!r}" for t in texts
           if MARKUP.search(t) or ENTITY.search(t)]
    return out + [f"{where}: a missing value shown as {t[:80]!r}" for t in texts if MISSING.search(t.strip())]


def significant_digits(token: str) -> int:
    """Significant digits of a decimal number as written (``0.002685`` → 4, ``1.2e-17`` → 2); whole numbers
    count 0 (counts, ranks, ids and clip values are not measured to a precision)."""
    t = token.replace(",", "").lstrip("+-−")
    mantissa, _, exponent = t.lower().partition("e")
    if "." not in mantissa and not exponent:
        return 0
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits)


def number_problems(cells: list[str], where: str, *, limit: int = 4) -> list[str]:
    """Cells holding a decimal number with more than ``limit`` significant digits."""
    out = []
    for cell in cells:
        text = DATE.sub("", str(cell))
        for token in NUMBER.findall(text):
            if significant_digits(token) > limit:
                out.append(f"{where}: {token} has more than {limit} significant digits (cell {str(cell)[:80]!r})")
                break
    return out


def overlaps(boxes: list[dict], *, tolerance: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of named boxes ({text, x, y, width, height}) that intersect by more than ``tolerance`` px each way."""
    out = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            dx = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
            if dx > tolerance and dy > tolerance:
                out.append((a["text"], b["text"]))
    return out


# ----------------------------------------------------------------------------------------- in the page

PAGE_JS = r"""() => {
  const visible = el => el && el.checkVisibility && el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})
                   && el.getClientRects().length > 0;
  const texts = [];
  const walker = document.createTreeWalker(document.querySelector('[data-testid=stApp]') || document.body,
                                           NodeFilter.SHOW_TEXT);
  let n;
  while ((n = walker.nextNode())) {
    const t = n.textContent.trim();
    if (t && visible(n.parentElement) && !n.parentElement.closest('script,style,noscript')) texts.push(t);
  }
  const rect = el => { const r = el.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; };
  const overflow = [];
  // a metric's text is cut (…) inside its inner box, not the metric's own: both are checked
  document.querySelectorAll('.offeval-takeaway, [data-testid=stMain] h1, [data-testid=stMetricValue], '
                            + '[data-testid=stMetricValue] .stMarkdownEllipsis, '
                            + '[data-testid=stMetricLabel] .stMarkdownEllipsis').forEach(el => {
    if (visible(el) && el.scrollWidth > el.clientWidth + 1)
      overflow.push(`${el.className || el.tagName}: ${el.textContent.trim().slice(0, 80)} (${el.scrollWidth} > ${el.clientWidth})`);
  });
  const charts = Array.from(document.querySelectorAll('[data-testid=stPlotlyChart]')).filter(visible).map(el => {
    const svg = el.querySelector('.main-svg');
    const box = rect(svg || el);
    const title = el.querySelector('.gtitle');
    const notes = Array.from(el.querySelectorAll('g.annotation, g.textpoint'))
      .filter(g => g.textContent.trim() && visible(g))
      .map(g => ({text: g.textContent.trim(), ...rect(g.querySelector('text') || g)}));
    return {box, chartTop: rect(el).y, title: title ? {text: title.textContent, ...rect(title)} : null, notes};
  });
  const tables = Array.from(document.querySelectorAll('[data-testid=stDataFrame]')).map(df =>
    Array.from(df.querySelectorAll('td')).map(td => td.textContent));
  return {texts, overflow, charts, tables, height: window.innerHeight};
}"""


def page_problems(state: dict, where: str, *, fold: bool) -> list[str]:
    """Every problem of one page as ``PAGE_JS`` saw it; ``fold``: the first chart's top must be above the fold."""
    out = markup_problems(state["texts"], where)
    out += [f"{where}: overflows its box: {o}" for o in state["overflow"]]
    for i, chart in enumerate(state["charts"]):
        box, title = chart["box"], chart["title"]
        if title and (title["x"] < box["x"] - 1 or title["x"] + title["width"] > box["x"] + box["width"] + 1):
            out.append(f"{where}: chart {i} title runs past the chart: {title['text'][:80]!r}")
        out += [f"{where}: chart {i} texts overlap: {a[:40]!r} / {b[:40]!r}" for a, b in overlaps(chart["notes"])]
    for t, cells in enumerate(state["tables"]):
        out += number_problems(cells, f"{where} table {t}")
    if fold:
        if not state["charts"]:
            out.append(f"{where}: no chart shown")
        elif state["charts"][0]["chartTop"] > state["height"] - 200:
            out.append(f"{where}: the first chart starts at y = {state['charts'][0]['chartTop']:.0f}, below the fold "
                       f"of {state['height']} px (less than 200 px of it visible)")
    return out


# ----------------------------------------------------------------------------------------- exported SVG

SVG_JS = r"""() => {
  const svg = document.querySelector('svg');
  const frame = svg.getBoundingClientRect();  // the SVG as drawn (its width attribute may be scaled)
  const width = frame.width;
  const rect = el => { const r = el.getBoundingClientRect();
                       return {x: r.x - frame.x, y: r.y - frame.y, width: r.width, height: r.height}; };
  const texts = Array.from(svg.querySelectorAll('text')).map(t => t.textContent);
  const notes = Array.from(svg.querySelectorAll('g.annotation')).filter(g => g.textContent.trim())
    .map(g => ({text: g.textContent.trim(), ...rect(g.querySelector('text') || g)}));
  const title = svg.querySelector('.gtitle');
  return {texts, notes, width, title: title ? {text: title.textContent, ...rect(title)} : null};
}"""


def svg_problems(raw: str, state: dict, where: str) -> list[str]:
    """Problems of an exported SVG: its raw text nodes (kaleido writes ``<`` as ``&#60;``: unescaped first) and
    its texts as drawn (``SVG_JS``): markup, numbers, overlapping annotations, text past the right edge, and a
    footer naming the dataset."""
    raw_texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", raw, flags=re.S)]
    raw_texts = [re.sub(r"<tspan[^>]*>|</tspan>", "", t) for t in raw_texts]
    out = markup_problems([html.unescape(t) for t in raw_texts], f"{where} (SVG source)")
    out += markup_problems(state["texts"], f"{where} (SVG)")
    out += number_problems(state["texts"], f"{where} (SVG)")
    out += [f"{where} (SVG): texts overlap: {a[:40]!r} / {b[:40]!r}" for a, b in overlaps(state["notes"])]
    for n in state["notes"] + ([state["title"]] if state["title"] else []):
        if n["x"] + n["width"] > state["width"] + 1 or n["x"] < -1:
            out.append(f"{where} (SVG): text runs past the edge: {n['text'][:80]!r}")
    if not any(n["text"].startswith("Dataset:") for n in state["notes"]):
        out.append(f"{where} (SVG): no footer naming the dataset")
    return out
