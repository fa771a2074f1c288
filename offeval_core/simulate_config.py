"""Configuration of the feed simulator (:mod:`offeval_core.simulate`): the rankers, the presets (``small``,
``demo``, ``shallow``, ``large``) with where their numbers come from (data/README.md), the assumption switches, and the
true viewing (survival) curve of a configuration."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from dataclasses import dataclass

import numpy as np

from offeval_core.errors import InputError

__all__ = [
    "ARMS", "CANDIDATES", "EFFECTS", "PRESETS", "PRODUCTION", "SEGMENTS", "START_DAY", "SURVIVALS", "TREATMENTS",
    "RankerSpec", "SimulationConfig", "preset_config", "true_survival", "with_overrides",
]


START_DAY = _dt.date(2026, 3, 2)
ARMS = ("control", "treatment")
SEGMENTS = ("registered", "guest")
EFFECTS = ("positive", "neutral", "negative", "positive-registered")
SURVIVALS = ("learnt", "exponential", "powerlaw")


@dataclass(frozen=True, slots=True)
class RankerSpec:
    """A deterministic ranker, a noisy scorer of the true quality:

    score = w_quality·z_a + w_affinity·⟨u, e_a⟩ + w_short·(−log dur_a) − w_fresh·fresh_a + shared·η + σ·ε,

    where η is a model error common to all rankers (drawn once per (session, item): rankers that lean on it
    agree with each other and with production), ε is the ranker's own noise, and ``fresh_a`` marks new
    items (same true quality as the others) that a cautious ranker demotes. σ and ``shared`` may differ
    for registered users (``noise_registered``, ``shared_registered``; default: the same).
    """

    w_quality: float = 1.0
    w_affinity: float = 1.0
    w_short: float = 0.3
    noise: float = 0.4
    shared: float = 0.0
    w_fresh: float = 0.0
    noise_registered: float | None = None
    shared_registered: float | None = None


# Production ranker R0 and the per-effect treatment rankers Rt (one per experiment, chosen by its effect).
PRODUCTION = RankerSpec(noise=0.4, shared=1.6, w_fresh=2.5)
TREATMENTS = {
    "positive": RankerSpec(noise=0.4, shared=0.7, w_fresh=0.0),
    "neutral": RankerSpec(noise=0.4, shared=1.6, w_fresh=2.5),
    "negative": RankerSpec(noise=1.4, shared=1.6, w_fresh=2.5),
    # Gilotte et al. (WSDM'18) Table 1 flavour: better for registered users, unchanged for guests.
    "positive-registered": RankerSpec(noise=0.4, shared=1.6, w_fresh=2.5, shared_registered=0.5),
}
# Candidate rankers shared by all experiments: varied noise and feature mixes, some segment-tuned, some
# close to production (sharing its error η), some independent of it.
CANDIDATES = (
    RankerSpec(noise=0.3, shared=0.5, w_fresh=0.5),                          # cand_01 strong
    RankerSpec(noise=0.2, shared=1.5, w_fresh=3.0),                          # cand_02 production-like
    RankerSpec(noise=1.4, shared=0.0),                                       # cand_03 independent
    RankerSpec(noise=0.6, shared=1.0, w_fresh=1.5),                          # cand_04 medium
    RankerSpec(noise=1.0, shared=0.0, w_fresh=1.0),                          # cand_05 independent, medium
    RankerSpec(0.6, 1.0, 1.2, noise=0.5, shared=0.8, w_fresh=2.0),           # cand_06 favours short videos
    RankerSpec(noise=2.0, shared=0.8, noise_registered=0.3, w_fresh=2.0),    # cand_07 registered-tuned
    RankerSpec(noise=0.3, shared=0.8, noise_registered=2.0, w_fresh=2.0),    # cand_08 guest-tuned
    RankerSpec(1.0, 0.0, 0.0, noise=0.5),                                    # cand_09 popularity
    RankerSpec(0.0, 0.0, 0.0, noise=1.0),                                    # cand_10 random order
)


@dataclass(frozen=True)
class SimulationConfig:
    """Every knob of the simulated world (see data/README.md for what each one does).

    Traffic: ``sessions_per_arm_day`` sessions per (experiment, day, arm), scaled per day by a traffic
    factor with relative spread ``traffic_drift``. Drift: the registered share and the engagement level
    (a logit shift of every reward rate) change from day to day; with ``depth_drift`` the scroll depth
    does too (the survival scale is multiplied by exp(depth_drift·w_d)) and ``depth_engagement`` lowers
    the engagement of deep days by depth_engagement·w_d (see :func:`day_drift`). Within a day the viewing
    curve is the same for every session (Asm. 2 holds); a position-bias model pooled over days is then
    slightly wrong on each day. Viewing: ``survival`` is ``"learnt"``
    (stretched exponential S(r) = exp(−((r−1)/scale)^shape), heavy-tailed) or ``"exponential"``
    (S(r) = p^(r−1), the rank-biased-precision user model), over K = ``n_candidates`` ranks.
    """

    n_experiments: int = 6
    effects: tuple[str, ...] = ("positive", "neutral", "negative", "positive", "positive-registered",
                                "negative")
    n_days: int = 7
    start_day: _dt.date = START_DAY
    sessions_per_arm_day: int = 1800
    traffic_drift: float = 0.2
    chunk_sessions: int = 25_000
    n_candidates: int = 60
    n_items: int = 3001
    n_users: int = 50_000
    dim: int = 8
    # segments and drift
    registered_share: float = 0.3
    share_drift: float = 0.12
    engagement_drift: float = 0.25
    depth_drift: float = 0.0
    depth_engagement: float = 0.0
    fresh_drift: float = 0.0
    fresh_boost: float = 0.0
    # reward model: logit base rates per segment, latent weights
    like_base_registered: float = -3.4
    like_base_guest: float = -6.0
    watch_base_registered: float = -1.2
    watch_base_guest: float = -1.9
    like_w_quality: float = 0.9
    like_w_affinity: float = 0.9
    watch_w_quality: float = 0.3
    watch_w_affinity: float = 0.6
    watch_w_short: float = 0.9
    watch_time: bool = True
    # viewing model
    survival: str = "learnt"
    survival_scale: float = 4.0
    survival_shape: float = 0.8
    survival_p: float = 0.84
    survival_tail: float = 1.5
    # rankers; fresh_penalty = w_fresh of production (and of the treatments that copy it); production_error =
    # the weight of the model error η shared by production and the treatments that copy it (PRODUCTION.shared)
    n_cand_policies: int = 10
    fresh_penalty: float = 2.5
    production_error: float = 1.6
    # assumption-breaking switches (Jeunen et al. Sec. 4)
    cascade: bool = False
    cascade_strength: float = 0.6
    reward_interactions: bool = False
    interaction_decay: float = 0.6
    n_topics: int = 6
    fresh_share: float = 0.1
    contextual_position_bias: bool = False
    registered_depth_factor: float = 3.0
    support_depth: int | None = None

    def __post_init__(self) -> None:
        def _pos_int(name: str, minimum: int = 1) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < minimum:
                raise InputError(f"{name} must be an integer ≥ {minimum}, got {v!r}")

        for name in ("n_experiments", "n_days", "sessions_per_arm_day", "chunk_sessions", "n_users", "dim",
                     "n_topics"):
            _pos_int(name)
        _pos_int("n_candidates", 2)
        _pos_int("n_cand_policies", 1)
        if self.n_cand_policies > len(CANDIDATES):
            raise InputError(f"n_cand_policies must be ≤ {len(CANDIDATES)}, got {self.n_cand_policies!r}")
        if not isinstance(self.n_items, int) or self.n_items <= self.n_candidates:
            raise InputError(f"n_items must be an integer > n_candidates ({self.n_candidates}), "
                             f"got {self.n_items!r}")
        if len(self.effects) != self.n_experiments:
            raise InputError(f"effects must have one entry per experiment ({self.n_experiments}), "
                             f"got {len(self.effects)}: {self.effects!r}")
        for e in self.effects:
            if e not in EFFECTS:
                raise InputError(f"effects entries must be one of {EFFECTS}, got {e!r}")
        if self.survival not in SURVIVALS:
            raise InputError(f"survival must be one of {SURVIVALS}, got {self.survival!r}")
        if not self.survival_tail > 0:
            raise InputError(f"survival_tail must be > 0, got {self.survival_tail!r}")
        if not self.fresh_drift >= 0:
            raise InputError(f"fresh_drift must be ≥ 0, got {self.fresh_drift!r}")
        if not 0 < self.survival_p < 1:
            raise InputError(f"survival_p must be in (0, 1), got {self.survival_p!r}")
        if self.survival_scale <= 0 or self.survival_shape <= 0:
            raise InputError(f"survival_scale and survival_shape must be > 0, got "
                             f"{self.survival_scale!r}, {self.survival_shape!r}")
        if not (isinstance(self.fresh_penalty, int | float) and math.isfinite(self.fresh_penalty)):
            raise InputError(f"fresh_penalty must be a finite number, got {self.fresh_penalty!r}")
        if not (isinstance(self.production_error, int | float) and math.isfinite(self.production_error)
                and self.production_error >= 0):
            raise InputError(f"production_error must be a finite number ≥ 0, got {self.production_error!r}")
        if not self.depth_drift >= 0:
            raise InputError(f"depth_drift must be ≥ 0, got {self.depth_drift!r}")
        if not 0 <= self.registered_share <= 1:
            raise InputError(f"registered_share must be in [0, 1], got {self.registered_share!r}")
        if not 0 <= self.cascade_strength <= 1:
            raise InputError(f"cascade_strength must be in [0, 1], got {self.cascade_strength!r}")
        if not 0 < self.interaction_decay <= 1:
            raise InputError(f"interaction_decay must be in (0, 1], got {self.interaction_decay!r}")
        if self.support_depth is not None and (not isinstance(self.support_depth, int)
                                               or not 1 <= self.support_depth <= self.n_candidates):
            raise InputError(f"support_depth must be None or an integer in [1, n_candidates], "
                             f"got {self.support_depth!r}")

    @property
    def policies(self) -> tuple[str, ...]:
        """Policy names in column order: production, treatment, cand_01 …"""
        return ("production", "treatment", *(f"cand_{i + 1:02d}" for i in range(self.n_cand_policies)))

    @property
    def rewards(self) -> tuple[str, ...]:
        return ("like", "watch_complete", "watch_time") if self.watch_time else ("like", "watch_complete")

    @property
    def days(self) -> list[_dt.date]:
        return [self.start_day + _dt.timedelta(days=d) for d in range(self.n_days)]


# The demo: a feed like KDD'24's 2nd-level feed, where the method's assumptions hold (data/README.md, "The
# world", gives every value and where it comes from): K = 40 candidates that sessions work through (an
# exponential viewing curve, p = 0.88: mean 8.3 views, S(40) = 0.007, no day-to-day depth drift, so one learnt
# position-bias curve is right on every day), dense implicit rewards that follow the item's quality and the
# user's taste (like ≈ 5 %, complete watch ≈ 40 % of views, not driven by short videos), a production ranker
# with a large model error (production_error 2.0) that a better model improves on, and few fresh items (1 %)
# that production buries (w_fresh = 6) and the positive treatments surface: the weights at m = ∞ reach ~150.
# With 5 % fresh items the 99 % CI of DCG at m = ∞ missed the exact effect on the largest effects (coverage
# below 90 % on 3 of 6 seeds; data/README.md, "The world").
# 20 A/B tests with mixed true effects (positive, neutral, negative, positive for registered users) for the
# decision boxes, 650 sessions per arm and day (≈ 1.5 M rows).
DEMO_EFFECTS: tuple[str, ...] = ("positive", "neutral", "negative", "positive", "positive-registered") * 4
DEMO: dict = {"n_experiments": len(DEMO_EFFECTS), "effects": DEMO_EFFECTS, "sessions_per_arm_day": 650,
              "n_candidates": 40, "survival": "exponential", "survival_p": 0.88,
              "engagement_drift": 0.1, "share_drift": 0.06,
              "like_w_quality": 1.8, "like_w_affinity": 1.8, "like_base_registered": -5.0, "like_base_guest": -7.6,
              "watch_w_quality": 1.2, "watch_w_affinity": 1.2,
              "watch_w_short": 0.3, "production_error": 2.0, "fresh_share": 0.01, "fresh_penalty": 6.0}
# The earlier demo, kept as the preset ``shallow``: every departure the demo had at once — scroll depth that
# drifts by day (a PBM pooled over days is wrong on each), K = 60 candidates with 4 views per session (the
# target ranks unviewed items between the logged ones), short-video-driven completion, and 10 % fresh items
# buried at P(V | R) ≈ 1e-3 (weights in the thousands). Each is also an assumption switch on its own
# (analyses.assumptions.SWITCHES, data/README.md "Assumption switches").
SHALLOW_DRIFT: dict = {"depth_drift": 0.5, "depth_engagement": 0.25, "engagement_drift": 0.1, "share_drift": 0.06,
                       "survival_scale": 3.0}
SHALLOW: dict = {**SHALLOW_DRIFT, "n_experiments": len(DEMO_EFFECTS), "effects": DEMO_EFFECTS,
                 "sessions_per_arm_day": 1000, "fresh_penalty": 5.0}
PRESETS: dict[str, dict] = {
    "demo": dict(DEMO),
    "shallow": dict(SHALLOW),
    "small": {"n_experiments": 3, "effects": ("positive", "neutral", "negative"), "n_days": 3,
              "sessions_per_arm_day": 200, "n_candidates": 30, "n_items": 997, "n_users": 2000},
    "large": {**DEMO, "sessions_per_arm_day": 20_000},
}


def preset_config(name: str, **overrides) -> SimulationConfig:
    """The configuration of a named preset (``demo``, ``shallow``, ``small``, ``large``) with keyword overrides.

    >>> preset_config("small").n_experiments
    3
    """
    if name not in PRESETS:
        raise InputError(f"preset must be one of {', '.join(map(repr, PRESETS))}; got {name!r}")
    return SimulationConfig(**{**PRESETS[name], **overrides})


def true_survival(config: SimulationConfig, *, segment: str = "guest", depth: float = 1.0) -> np.ndarray:
    """The true viewing curve S(r) = P(L ≥ r) = P(V = 1 | R = r) for r = 1..K (Asm. 2, Eq. 4).

    With ``contextual_position_bias`` registered users scroll deeper (scale or mean length multiplied by
    ``registered_depth_factor``); with ``support_depth`` = d, S(r) = 0 beyond d.

    >>> cfg = preset_config("small", survival="exponential", survival_p=0.5)
    >>> true_survival(cfg)[:3].tolist()   # p^(r-1) for r = 1, 2, 3
    [1.0, 0.5, 0.25]
    """
    k = config.n_candidates
    r = np.arange(1, k + 1, dtype=np.float64)
    factor = config.registered_depth_factor if (config.contextual_position_bias
                                                and segment == "registered") else 1.0
    factor *= depth
    if config.survival == "learnt":
        s = np.exp(-(((r - 1.0) / (config.survival_scale * factor)) ** config.survival_shape))
    elif config.survival == "powerlaw":
        s = (1.0 + (r - 1.0) / (config.survival_scale * factor)) ** (-config.survival_tail)
    else:
        # deeper scrolling: same mean-length ratio, 1/(1-p) -> factor/(1-p)
        p = 1.0 - (1.0 - config.survival_p) / factor
        s = p ** (r - 1.0)
    if config.support_depth is not None:
        s[config.support_depth:] = 0.0
    return s


def _hazard(s: np.ndarray) -> np.ndarray:
    """Continuation probabilities h_r = S(r+1) / S(r) (h_K = 0), so that Π_{j<r} h_j = S(r)."""
    nxt = np.append(s[1:], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(s > 0, nxt / np.where(s > 0, s, 1.0), 0.0)
    return h


def with_overrides(config: SimulationConfig, **changes) -> SimulationConfig:
    """A copy of ``config`` with some fields changed (validated again)."""
    return dataclasses.replace(config, **changes)
