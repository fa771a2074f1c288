"""The dashboard's global settings and their round trip through the URL query string.

Pure Python (no Streamlit): :func:`parse_query_params` turns the query parameters of a shared link into
:class:`Settings`, :func:`to_query_params` turns settings back into parameters. Unknown or malformed values
fall back to the defaults and are reported in ``Settings.problems`` so the page can say what it ignored.
Only values that differ from the defaults are written, so links stay short.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from offeval_core.defaults import LEVEL, ONLINE_ALPHA
from offeval_core.engine import DEFAULT_CLIPS
from offeval_core.errors import InputError
from offeval_core.multiple import METHODS as ADJUST_METHODS
from offeval_core.validation import format_clip, parse_clip

DATASETS = ("demo", "sim", "upload", "file")  # file: the logs the server was started on (offeval dashboard FILE)
LEVELS = (0.8, 0.9, 0.95, 0.99, 0.999)
CORRELATION_METHODS = ("pearson", "kendall", "spearman")


@dataclass(frozen=True)
class Control:
    """A page's own control in the URL: its kind (``str``, ``float``, ``int``, ``bool``, ``list``), its default
    (None: the page derives it from the data), the allowed choices or range."""

    kind: str
    default: object = None
    choices: tuple = ()
    lo: float | None = None
    hi: float | None = None


PAGE_CONTROLS: dict[str, Control] = {
    # Data
    "pbm_p": Control("float", 0.85, lo=0.5, hi=0.99),
    "pbm_ranks": Control("int", None, lo=5, hi=100_000),
    # Sensitivity
    "sens_metrics": Control("list", ("dcg", "ndcg")),
    # KDD'24 Sec. 6.2: online improvements (TPR); online negatives are a separate view, never mixed in
    "sens_side": Control("str", "improvements", ("improvements", "negatives")),
    "sens_eff": Control("float", 0.0, lo=0.0, hi=1e6),  # the online effect an improvement must exceed
    "sens_alpha": Control("float", ONLINE_ALPHA, (0.05, 0.01, 0.001, 0.0001)),
    "sens_all": Control("bool", True),  # Fig. 1 pools its reward signals
    "sens_adj": Control("str", "none", tuple(ADJUST_METHODS)),  # multiple testing over the settings
    # Correlation
    "corr_row": Control("str"),
    "corr_full": Control("bool", False),  # the full heatmap instead of the per-variant summary
    # DCG vs nDCG
    "agr_source": Control("str", "logged", ("logged", "heldout")),
    "agr_policies": Control("list"),
    "agr_boot": Control("int", 200, (0, 100, 200, 500, 1000)),
    "ho_kind": Control("str", "zoo", ("zoo", "upload")),
    "ho_grid": Control("str", "default", ("default", "small")),
    "ho_k": Control("int", 100, (100, 10, 20, 50)),
    "ho_gain": Control("str", "linear", ("linear", "exponential")),
    "ho_boot": Control("int", 500, (100, 200, 500, 1000)),
    "ho_up_k": Control("int", 100, (100, 10, 20, 50)),
    "ho_up_gain": Control("str", "linear", ("linear", "exponential")),
    "ho_up_boot": Control("int", 500, (100, 200, 500, 1000)),
    "t1_norm": Control("str", "paper", ("paper", "top1")),
    # Estimator lab
    "lab_preset": Control("str", "quick", ("quick", "full")),
    "lab_lam": Control("str", "recall", ("recall", "dcg")),
    "lab_prop": Control("str", "true", ("true", "popularity")),
    "lab_k": Control("int", None, lo=1, hi=10_000),
    "lab_cov_n": Control("int", 300, (300, 100, 1000)),  # sessions per log of the interval-coverage study
    # Decisions
    "dec_est": Control("str"),
    "dec_rel": Control("bool", False),
    "dec_adj": Control("str", "none", tuple(ADJUST_METHODS)),  # multiple testing over the A/B tests
    # Clip tuning
    "clip_rule": Control("str", "slope", ("slope", "mse")),
    # Which estimator?
    "which_alpha": Control("float", 0.05, (0.01, 0.05, 0.1)),  # significance level of every assumption test
    "which_model": Control("str", "independent", ("independent", "cascade", "standard", "independent+cascade")),
    "which_n": Control("int", 500, (200, 500, 1000)),  # sessions per log of the slate world
    "which_reps": Control("int", 100, (50, 100, 200)),
    # Candidates
    "cand_adj": Control("str", "holm", tuple(ADJUST_METHODS)),  # multiple testing over the candidates
    "cand_clip": Control("str", "recommended", ("recommended", "sidebar")),
    "cand_rank": Control("str", "dcg", ("dcg", "pndcg", "ndcg")),
    "cand_prop": Control("str", "cis", ("cis", "ncis", "snips", "is")),
    # presentation: the pages stepped through with the arrow keys
    "deck": Control("list"),
}
"""Every page control that travels in the URL, by name; its widget key is ``w_<name>``."""

PROPENSITY_CONTROLS: dict[str, object] = {"sens_metrics": ("cis", "ncis")}
"""Page-control defaults that differ for a propensity policy (importance weights π_t / π_p): Sensitivity's curves
are capped and normalised capped IS over the cap c (Gilotte Sec. 4.2, Eq. 1) instead of DCG and nDCG over m."""


def _parse_control(name: str, spec: Control, raw: str):
    """The value of one page control from its URL text; raises InputError saying what is expected."""
    if spec.kind == "list":
        return tuple(p for p in (x.strip() for x in raw.split(",")) if p)
    if spec.kind == "bool":
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise InputError(f"{name} must be 1 or 0")
    if spec.kind == "str":
        if spec.choices and raw not in spec.choices:
            raise InputError(f"{name} must be one of {', '.join(spec.choices)}")
        return raw
    try:
        value = float(raw) if spec.kind == "float" else int(raw)
    except ValueError:
        raise InputError(f"{name} must be a{'n integer' if spec.kind == 'int' else ' number'}") from None
    if spec.choices and value not in spec.choices:
        raise InputError(f"{name} must be one of {', '.join(f'{c:g}' for c in spec.choices)}")
    if (spec.lo is not None and value < spec.lo) or (spec.hi is not None and value > spec.hi):
        raise InputError(f"{name} must be between {spec.lo:g} and {spec.hi:g}")
    return value


def control_text(value) -> str:
    """A page control's value as URL text (lists comma-separated, booleans 1 / 0, numbers without zeros)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


@dataclass(frozen=True)
class Settings:
    """Everything that defines a view: the sidebar's global controls plus a few per-page choices.

    ``reward`` / ``policy`` None mean "the first one the data offers" (resolved by the app once the data
    is loaded). ``estimators`` are ``name@clip`` strings (``dcg@1``, ``ncis@inf``), ``variants`` are
    ``metric:discount:clip`` strings for the correlation table. ``moments`` is the plain name of a moments
    file (``offeval reduce``) in the operator's data directory ``OFFEVAL_DATA_DIR``, opened with
    ``dataset="moments"``; never a path (docs/security.md).
    """

    dataset: str = "demo"
    sim: str = ""
    moments: str = ""
    reward: str | None = None
    policy: str | None = None
    discount: str = "pbm"
    exposure: str = "pbm"
    clip: float = math.inf
    level: float = LEVEL
    present: bool = False
    method: str = "pearson"
    estimators: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    experiment: str | None = None
    controls: tuple[tuple[str, object], ...] = ()
    problems: tuple[str, ...] = field(default=(), compare=False)

    def replace(self, **changes) -> Settings:
        return dataclasses.replace(self, **changes)

    def control(self, name: str, default=None):
        """A page control's value (``PAGE_CONTROLS``), else ``default``, else the control's own default."""
        for k, v in self.controls:
            if k == name:
                return v
        return default if default is not None else PAGE_CONTROLS[name].default

    def with_controls(self, **values) -> Settings:
        """These settings with page controls set (None removes one); kept sorted by name."""
        merged = dict(self.controls)
        for k, v in values.items():
            if k not in PAGE_CONTROLS:
                raise KeyError(f"unknown page control {k!r}")
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = tuple(v) if PAGE_CONTROLS[k].kind == "list" else v
        return self.replace(controls=tuple(sorted(merged.items())))


DEFAULTS = Settings()
_LISTS = ("estimators", "variants")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _first(value):
    if isinstance(value, list | tuple):
        return value[-1] if value else ""
    return value


def parse_query_params(params: Mapping[str, str | list[str]]) -> Settings:
    """Settings from URL query parameters (as given by ``st.query_params.to_dict()``).

    >>> s = parse_query_params({"reward": "like", "clip": "64", "level": "0.95", "present": "1"})
    >>> s.reward, s.clip, s.level, s.present
    ('like', 64.0, 0.95, True)
    >>> parse_query_params({"clip": "0.5"}).problems   # m < 1 is not a clip value: ignored, said so
    ("ignored clip='0.5': clip must be ≥ 1 (1 = raw labels, inf = unclipped)",)
    """
    values: dict = {}
    controls: dict = {}
    problems: list[str] = []

    def bad(name, raw, why):
        problems.append(f"ignored {name}={raw!r}: {why}")

    for name, raw in params.items():
        raw = _first(raw)
        if raw is None:
            continue
        raw = str(raw)
        if name == "dataset":
            if raw in DATASETS:
                values["dataset"] = raw
            else:
                bad(name, raw, f"dataset must be one of {', '.join(DATASETS)}")
        elif name in ("sim", "discount", "exposure", "moments"):
            if raw.strip():
                values[name] = raw.strip()
        elif name in ("reward", "policy", "experiment"):
            values[name] = raw or None
        elif name == "clip":
            try:
                values["clip"] = parse_clip(raw)
            except ValueError:  # the clip codec's SpecError; the raw text is quoted once, by bad()
                numeric = raw.strip().lstrip("+-").replace(".", "", 1).isdigit()
                bad(name, raw, "clip must be ≥ 1 (1 = raw labels, inf = unclipped)" if numeric
                    else "clip must be a number ≥ 1 or inf")
        elif name == "level":
            try:
                level = float(raw)
            except ValueError:
                bad(name, raw, "level must be a number between 0 and 1")
                continue
            if 0 < level < 1:
                values["level"] = level
            else:
                bad(name, raw, "level must be strictly between 0 and 1")
        elif name == "present":
            if raw.lower() in _TRUE | _FALSE:
                values["present"] = raw.lower() in _TRUE
            else:
                bad(name, raw, "present must be 1 or 0")
        elif name == "method":
            if raw in CORRELATION_METHODS:
                values["method"] = raw
            else:
                bad(name, raw, f"method must be one of {', '.join(CORRELATION_METHODS)}")
        elif name in _LISTS:
            values[name] = tuple(p for p in (x.strip() for x in raw.split(",")) if p)
        elif name in PAGE_CONTROLS:
            try:
                controls[name] = _parse_control(name, PAGE_CONTROLS[name], raw)
            except ValueError as exc:
                bad(name, raw, str(exc))
        # anything else (e.g. parameters of other tools) is left alone
    if values.get("moments"):
        values["dataset"] = "moments"  # ?moments=NAME opens that file of the data directory (OFFEVAL_DATA_DIR)
    return Settings(**values, controls=tuple(sorted(controls.items())), problems=tuple(problems))


def to_query_params(settings: Settings, page_defaults: Mapping[str, object] | None = None) -> dict[str, str]:
    """URL query parameters for ``settings``: only the values that differ from the defaults.

    ``page_defaults`` holds the defaults a page derived from the data (the first reward with positives, the
    first estimator, every policy…): a value equal to one is left out too, as for ``reward`` / ``policy``.

    >>> to_query_params(Settings(reward="like", clip=64.0, present=True))
    {'reward': 'like', 'clip': '64', 'present': '1'}
    >>> parse_query_params(to_query_params(Settings(clip=math.inf, level=0.9))) == Settings(level=0.9)
    True
    """
    out: dict[str, str] = {}
    for f in dataclasses.fields(Settings):
        if f.name == "problems":
            continue
        value = getattr(settings, f.name)
        if f.name == "controls":
            for name, v in value:
                spec = PAGE_CONTROLS[name]
                if v is None or v == spec.default or (page_defaults and _same(v, page_defaults.get(name))):
                    continue
                out[name] = control_text(v)
            continue
        if value == getattr(DEFAULTS, f.name) or (page_defaults and f.name in page_defaults
                                                  and _same(value, page_defaults[f.name])):
            continue
        if f.name == "dataset" and value == "moments":
            continue  # implied by the moments parameter
        if f.name == "clip":
            out["clip"] = format_clip(value)
        elif f.name == "present":
            out["present"] = "1" if value else "0"
        elif f.name == "level":
            out["level"] = f"{value:g}"
        elif f.name in _LISTS:
            out[f.name] = ",".join(value)
        elif value is not None:
            out[f.name] = str(value)
    return out


def _same(a, b) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return tuple(a) == tuple(b)
    return a == b


CLIP_CHOICES: tuple[float, ...] = DEFAULT_CLIPS


GLOBAL = ("dataset", "reward", "policy", "discount", "exposure", "clip", "level")
USES: dict[str, tuple[str, ...]] = {
    "data": ("dataset",),
    "sensitivity": GLOBAL,
    "correlation": ("dataset", "reward", "policy", "discount", "clip"),
    "dcg-vs-ndcg": ("dataset", "reward", "discount", "exposure", "clip", "level"),
    "estimator-lab": (),
    "decisions": GLOBAL,
    "clip-tuning": GLOBAL,
    "candidates": ("dataset", "reward", "discount", "exposure", "clip", "level"),
    "which-estimator": ("dataset", "reward", "policy", "discount", "level"),  # D0 is the learnt PBM; no clip
    "method": ("dataset",),
}
"""The sidebar controls each page reads (by URL path); the others are hidden on that page. A page that reads the
clip also shows the recommended clip under it (:func:`recommends_clip`)."""


def recommends_clip(page: str) -> bool:
    """Whether the sidebar shows the recommended clip of the target policy under its clip slider on the page at
    url path ``page`` (``dashboard.clip_choice``): every page that reads the clip but Candidates, whose comparison's
    clip has its own rule. The sidebar reads it, and the background preparation (``dashboard.data.warmup``), which
    counts the clip-tuning result among that page's steps.

    >>> [p for p in USES if recommends_clip(p)]
    ['sensitivity', 'correlation', 'dcg-vs-ndcg', 'decisions', 'clip-tuning']
    """
    return "clip" in USES.get(page, ()) and page != "candidates"
