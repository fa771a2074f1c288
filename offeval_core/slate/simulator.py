"""A stochastic-slate world with exact truth: Plackett-Luce logging and target policies over a few items,
click models with or without interactions between slots, and the policies' values by enumeration.

Each session has a context x (a segment) and sees a slate a_1..a_K of distinct items drawn from the logging
policy's Plackett-Luce distribution, π0(a_k | x, a_<k) = exp(s0_x(a_k)) / Σ_{b ∉ a_<k} exp(s0_x(b)). Rewards
(clicks) follow one behaviour per context:

* ``independent`` (position-based model): r_k ~ Bernoulli(θ_x(a_k) · e_k), e_k = decay^(k−1); the reward at a
  slot depends on its own item only, so IIPS, RIPS and SIPS are all unbiased;
* ``cascade`` (cascade model): the user scans down and stops after the first click, r_k = 1 with
  probability θ_x(a_k) · Π_{l<k} (1 − θ_x(a_l)); the reward depends on the items above, so IIPS is biased
  while RIPS and Cascade-DR are not (Kiyohara et al. WSDM'22);
* ``standard`` (interaction with the item below): r_k ~ Bernoulli(θ_x(a_k) e_k (1 − β θ_x(a_{k+1})));
  only SIPS stays unbiased.

The truth V(π) = Σ_x P(x) Σ_slates π(slate | x) Σ_k λ_k E[r_k | slate, x] is computed exactly by
enumerating the n! / (n − K)! ordered slates, which also gives every marginal and conditional propensity.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offeval_core.errors import InputError
from offeval_core.slate.schema import SlateData, from_arrays

__all__ = [
    "BEHAVIOURS", "SlateConfig", "SlateSample", "SlateWorld", "build_world", "sample",
]


BEHAVIOURS = ("independent", "cascade", "standard")


@dataclass(frozen=True)
class SlateConfig:
    """Knobs of the stochastic-slate world (one behaviour and share per context)."""

    n_items: int = 6
    n_slots: int = 3
    behaviours: tuple[str, ...] = ("independent",)
    shares: tuple[float, ...] | None = None
    decay: float = 0.7
    interaction: float = 0.6
    logging_temperature: float = 0.5
    target_strength: float = 1.5
    attraction: tuple[float, float] = (0.1, 0.6)

    def __post_init__(self):
        if not 2 <= self.n_items <= 9 or not 1 <= self.n_slots <= self.n_items:
            raise InputError(f"need 2 ≤ n_items ≤ 9 and 1 ≤ n_slots ≤ n_items (enumeration), "
                             f"got {self.n_items}, {self.n_slots}")
        for b in self.behaviours:
            if b not in BEHAVIOURS:
                raise InputError(f"behaviour must be one of {', '.join(BEHAVIOURS)}, got {b!r}")
        if self.shares is not None and (len(self.shares) != len(self.behaviours)
                                        or not math.isclose(sum(self.shares), 1.0) or min(self.shares) < 0):
            raise InputError("shares must be one non-negative share per behaviour, summing to 1")


@dataclass(frozen=True, eq=False)
class SlateWorld:
    """An enumerated world: slates (S × K item indices) and, per context, every policy table."""

    config: SlateConfig
    slates: np.ndarray
    shares: np.ndarray
    attraction: np.ndarray                 # contexts × items
    logging_scores: np.ndarray             # contexts × items
    target_scores: np.ndarray
    logging_prob: np.ndarray = field(repr=False)        # contexts × S
    target_prob: np.ndarray = field(repr=False)
    logging_conditional: np.ndarray = field(repr=False)  # contexts × S × K
    target_conditional: np.ndarray = field(repr=False)
    target_next: np.ndarray = field(repr=False)          # contexts × S × K × items: π(· | x, a_<k)
    click_prob: np.ndarray = field(repr=False)           # contexts × S × K: E[r_k | slate, x]

    @property
    def n_contexts(self) -> int:
        return len(self.shares)

    def marginals(self, policy: str) -> np.ndarray:
        """contexts × K × items: probability of each item at each slot."""
        prob = self.logging_prob if policy == "logging" else self.target_prob
        out = np.zeros((self.n_contexts, self.config.n_slots, self.config.n_items))
        for k in range(self.config.n_slots):
            for x in range(self.n_contexts):
                out[x, k] = np.bincount(self.slates[:, k], weights=prob[x], minlength=self.config.n_items)
        return out

    def value(self, policy: str = "target", *, slot_weights=None) -> float:
        """Exact expected reward per session Σ_k λ_k E[r_k] under ``policy`` ("target" or "logging")."""
        lam = np.ones(self.config.n_slots) if slot_weights is None else np.asarray(slot_weights, float)
        prob = self.logging_prob if policy == "logging" else self.target_prob
        per_context = np.einsum("xs,xsk,k->x", prob, self.click_prob, lam)
        return float(self.shares @ per_context)


def _plackett_luce(scores: np.ndarray, slates: np.ndarray):
    """Slate probabilities, per-slot conditionals and next-item distributions of a PL policy."""
    s_count, k_slots = slates.shape
    n = scores.shape[0]
    e = np.exp(scores - scores.max())
    avail = np.ones((s_count, n))
    cond = np.empty((s_count, k_slots))
    nxt = np.empty((s_count, k_slots, n))
    for k in range(k_slots):
        mass = avail * e
        nxt[:, k] = mass / mass.sum(1, keepdims=True)
        cond[:, k] = nxt[np.arange(s_count), k, slates[:, k]]
        avail[np.arange(s_count), slates[:, k]] = 0
    return cond.prod(1), cond, nxt


def _click_prob(behaviour: str, theta: np.ndarray, slates: np.ndarray, config: SlateConfig) -> np.ndarray:
    t = theta[slates]                                      # S × K
    exam = config.decay ** np.arange(config.n_slots)
    if behaviour == "independent":
        return t * exam
    if behaviour == "cascade":
        survive = np.cumprod(np.c_[np.ones(len(t)), 1 - t[:, :-1]], axis=1)
        return t * survive
    below = np.c_[t[:, 1:], np.zeros(len(t))]
    return t * exam * (1 - config.interaction * below)


def build_world(config: SlateConfig = SlateConfig(), *, rng=None) -> SlateWorld:
    """Draw a world's attractions and policies (seeded) and enumerate every slate."""
    rng = np.random.default_rng(rng)
    slates = np.array(list(itertools.permutations(range(config.n_items), config.n_slots)), dtype=np.int64)
    n_ctx = len(config.behaviours)
    shares = np.full(n_ctx, 1 / n_ctx) if config.shares is None else np.asarray(config.shares, float)
    lo, hi = config.attraction
    theta = rng.uniform(lo, hi, size=(n_ctx, config.n_items))
    s0 = config.logging_temperature * rng.normal(size=(n_ctx, config.n_items))
    logit = np.log(theta / (1 - theta))
    s1 = s0 + config.target_strength * (logit - logit.mean(1, keepdims=True))
    tables = {"lp": [], "tp": [], "lc": [], "tc": [], "tn": [], "cp": []}
    for x, behaviour in enumerate(config.behaviours):
        p0, c0, _ = _plackett_luce(s0[x], slates)
        p1, c1, n1 = _plackett_luce(s1[x], slates)
        for key, val in zip(tables, (p0, p1, c0, c1, n1, _click_prob(behaviour, theta[x], slates, config)),
                            strict=True):
            tables[key].append(val)
    st = {k: np.stack(v) for k, v in tables.items()}
    return SlateWorld(config, slates, shares, theta, s0, s1, st["lp"], st["tp"], st["lc"], st["tc"], st["tn"], st["cp"])


@dataclass(frozen=True, eq=False)
class SlateSample:
    """Logged sessions from a world: the slate arrays, the target's next-item distribution per row (for the
    item-slot reward model of Cascade-DR) and the context of each session."""

    data: SlateData
    target_distribution: np.ndarray
    context: np.ndarray
    slate: np.ndarray

    def to_frame(self, *, policy: str = "target", reward: str = "click") -> pd.DataFrame:
        """The sample as logs in the offeval schema (one row per slot, all propensity columns)."""
        d = self.data
        return pd.DataFrame({
            "session_id": d.session, "rank": d.slot, "item_id": d.item, reward: d.reward,
            "segment": np.asarray([f"ctx{c}" for c in self.context])[d.session],
            "logging_propensity": d.logging_marginal, f"target_propensity__{policy}": d.target_marginal,
            "logging_conditional_propensity": d.logging_conditional,
            f"target_conditional_propensity__{policy}": d.target_conditional,
        })


def sample(world: SlateWorld, n_sessions: int, *, rng=None) -> SlateSample:
    """Draw ``n_sessions`` logged sessions (vectorised)."""
    rng = np.random.default_rng(rng)
    cfg = world.config
    k = cfg.n_slots
    ctx = rng.choice(world.n_contexts, size=n_sessions, p=world.shares)
    slate = np.empty(n_sessions, dtype=np.int64)
    for x in range(world.n_contexts):
        idx = np.flatnonzero(ctx == x)
        slate[idx] = rng.choice(len(world.slates), size=len(idx), p=world.logging_prob[x])
    items = world.slates[slate]                                  # n × K
    u = rng.random((n_sessions, k))
    clicks = np.zeros((n_sessions, k))
    for x, behaviour in enumerate(cfg.behaviours):
        idx = np.flatnonzero(ctx == x)
        theta = world.attraction[x][items[idx]]
        if behaviour == "cascade":
            c = u[idx] < theta
            first = np.cumsum(c, axis=1)
            clicks[idx] = (c & (first == 1) & (np.cumsum(first == 1, axis=1) == 1)).astype(float)
        else:
            clicks[idx] = (u[idx] < world.click_prob[x, slate[idx]]).astype(float)
    m0, m1 = world.marginals("logging"), world.marginals("target")
    slot = np.tile(np.arange(k), n_sessions)
    sess = np.repeat(np.arange(n_sessions), k)
    item = items.ravel()
    cx = ctx[sess]
    data = from_arrays(sess, slot + 1, clicks.ravel(), logging_marginal=m0[cx, slot, item],
                       target_marginal=m1[cx, slot, item],
                       logging_conditional=world.logging_conditional[cx, slate[sess], slot],
                       target_conditional=world.target_conditional[cx, slate[sess], slot], item=item,
                       contexts=pd.DataFrame({"segment": [f"ctx{c}" for c in ctx]}), source="<slate simulator>")
    return SlateSample(data, world.target_next[cx, slate[sess], slot], ctx, slate)
