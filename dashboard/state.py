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

from offeval_core.engine import DEFAULT_CLIPS

DATASETS = ("demo", "sim", "upload")
LEVELS = (0.8, 0.9, 0.95, 0.99, 0.999)
CORRELATION_METHODS = ("pearson", "kendall", "spearman")


def clip_to_text(m: float) -> str:
    """``inf`` for m = ∞, else the number without trailing zeros: ``64``."""
    return "inf" if math.isinf(m) else f"{m:g}"


def clip_from_text(text: str) -> float:
    """Inverse of :func:`clip_to_text`; raises ValueError for anything that is not a number ≥ 1 or inf."""
    t = str(text).strip().lower()
    if t in {"inf", "infinity", "∞"}:
        return math.inf
    value = float(t)
    if not value >= 1:
        raise ValueError(f"clip must be ≥ 1, got {text!r}")
    return value


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
    level: float = 0.99
    present: bool = False
    method: str = "pearson"
    estimators: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    experiment: str | None = None
    problems: tuple[str, ...] = field(default=(), compare=False)

    def replace(self, **changes) -> Settings:
        return dataclasses.replace(self, **changes)


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
    ("ignored clip='0.5': clip must be ≥ 1, got '0.5'",)
    """
    values: dict = {}
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
                values["clip"] = clip_from_text(raw)
            except ValueError as exc:
                msg = str(exc) if "≥ 1" in str(exc) else "clip must be a number ≥ 1 or inf"
                bad(name, raw, msg)
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
        # anything else (e.g. parameters of other tools) is left alone
    if values.get("moments"):
        values["dataset"] = "moments"  # ?moments=NAME opens that file of the data directory (OFFEVAL_DATA_DIR)
    return Settings(**values, problems=tuple(problems))


def to_query_params(settings: Settings) -> dict[str, str]:
    """URL query parameters for ``settings``: only the values that differ from the defaults.

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
        if value == getattr(DEFAULTS, f.name):
            continue
        if f.name == "dataset" and value == "moments":
            continue  # implied by the moments parameter
        if f.name == "clip":
            out["clip"] = clip_to_text(value)
        elif f.name == "present":
            out["present"] = "1" if value else "0"
        elif f.name == "level":
            out["level"] = f"{value:g}"
        elif f.name in _LISTS:
            out[f.name] = ",".join(value)
        elif value is not None:
            out[f.name] = str(value)
    return out


CLIP_CHOICES: tuple[float, ...] = DEFAULT_CLIPS
