"""A simulated user-item world with MNAR implicit feedback and an MCAR ground truth.

What real datasets such as Yahoo! R3 and Coat provide (GS paper Sec. 5.1.1), with everything known, shaped
like MovieLens-1M in the respects that matter for KDD'24 App. A:

- heavy-tailed user activity: user u consumes about t_u = t_min + LogNormal items (MovieLens-1M: 20 to
  more than 2000 ratings per user, median about 100), so users hold very different numbers of held-out items;
- true binary relevance Y_{u,i} from latent user / item factors and an item quality q_i; how much a user's
  taste leans towards high-quality (and therefore widely exposed) items decreases with activity — light users
  are mainstream, heavy users have niche tastes — and heavy users like more items;
- MNAR exposure: (u, i) is shown with probability P_{u,i} = min(1, e_u P_i), P_i log-normal and correlated
  with q_i (popular items are shown more), e_u the user's activity, solved so that u observes t_u items on
  average; an interaction is observed iff shown and relevant (the missing-data model of the ADG paper with
  popularity-dependent sampling). Light users therefore see mostly popular items, heavy users see most of what
  they like;
- a train / test split of the observed interactions: each interaction goes to train independently with
  probability f, so a relevant item not in train is in the MNAR test set with probability
  P_{u,i} (1 − f) / (1 − P_{u,i} f) (the true test propensity);
- an MCAR test set: for every user, ``n_mcar`` items drawn uniformly from the items not in the user's train
  set, with their true relevance revealed — the Naive average over it is unbiased (Alg. 1 line 5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offeval_core.errors import InputError

__all__ = [
    "Split", "World", "simulate_world", "split_world",
]


@dataclass(frozen=True, eq=False)
class World:
    """The fixed part: true relevance, item exposure, one MNAR observation."""

    relevant: np.ndarray  # (users, items) bool — the complete data S_u
    exposure: np.ndarray  # (items,) item exposure P_i
    activity: np.ndarray  # (users,) user activity e_u; P_{u,i} = min(1, e_u P_i)
    observed: np.ndarray  # (users, items) bool — shown and relevant
    seed: int

    @property
    def propensity(self) -> np.ndarray:
        """(users, items) true probability P_{u,i} = min(1, e_u P_i) that (u, i) is shown."""
        return np.minimum(self.activity[:, None] * self.exposure[None, :], 1.0)

    @property
    def n_users(self) -> int:
        return self.relevant.shape[0]

    @property
    def n_items(self) -> int:
        return self.relevant.shape[1]

    @property
    def popularity(self) -> np.ndarray:
        """Observed popularity pop_i = number of observed interactions of item i."""
        return self.observed.sum(axis=0)


@dataclass(frozen=True, eq=False)
class Split:
    """A train / MNAR-test split of a world's observations plus an MCAR sample of non-train items."""

    world: World
    train: np.ndarray  # (users, items) bool
    test: np.ndarray  # (users, items) bool — MNAR held-out interactions (subset of observed)
    train_frac: float
    mcar_items: np.ndarray  # (users, n_mcar) item indices, never in train
    seed: int

    @property
    def test_propensity(self) -> np.ndarray:
        """(users, items) true probability that a relevant, non-train item is in the MNAR test set."""
        p = self.world.propensity
        f = self.train_frac
        return p * (1 - f) / (1 - p * f)

    @property
    def target(self) -> np.ndarray:
        """(users, items) bool: relevant items not in train — the S_u the held-out metric targets."""
        return self.world.relevant & ~self.train

    @property
    def mcar_relevance(self) -> np.ndarray:
        return np.take_along_axis(self.world.relevant, self.mcar_items, axis=1)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _solve_increasing(f, target: np.ndarray, lo: float, hi: float, *, log: bool, n_iter: int) -> np.ndarray:
    """Per-row bisection for c with f(c) = target, f increasing in c (geometric midpoints when ``log``)."""
    lo_v = np.full(target.shape, lo)
    hi_v = np.full(target.shape, hi)
    for _ in range(n_iter):
        mid = np.sqrt(lo_v * hi_v) if log else (lo_v + hi_v) / 2
        below = f(mid) < target
        lo_v = np.where(below, mid, lo_v)
        hi_v = np.where(below, hi_v, mid)
    return np.sqrt(lo_v * hi_v) if log else (lo_v + hi_v) / 2


def simulate_world(
    *,
    n_users: int = 1000,
    n_items: int = 600,
    dim: int = 8,
    relevance_rate: float = 0.15,
    min_interactions: int = 10,
    median_interactions: float = 40.0,
    activity_spread: float = 1.2,
    taste_strength: float = 2.0,
    quality_weight: float = 0.5,
    mainstream_slope: float = 1.2,
    exposure_mean: float = 0.3,
    exposure_spread: float = 2.5,
    exposure_quality_corr: float = 0.5,
    seed: int = 0,
) -> World:
    """Draw a world: true relevance, popularity-dependent exposure and one MNAR observation.

    Activity: a_u ~ N(0, 1), target number of interactions t_u = ``min_interactions`` +
    (``median_interactions`` − ``min_interactions``) exp(``activity_spread`` a_u), capped at 75 % of the items.
    Relevance: Y_{u,i} ~ Bernoulli(σ(c_u + ``taste_strength`` ⟨x_u, z_i⟩/√dim + β_u q_i)) with
    β_u = ``quality_weight`` − ``mainstream_slope`` a_u (heavier users lean less towards high-quality, widely
    exposed items) and c_u solved so that u likes about R_u = clip(t_u / 0.85, ``relevance_rate`` · items,
    0.9 · items) items. Exposure: P_{u,i} = min(1, e_u P_i), item exposure P_i log-normal (σ =
    ``exposure_spread``, mean ``exposure_mean``, correlation ``exposure_quality_corr`` between log P_i and q_i),
    user activity e_u solved so that Σ_i Y_{u,i} P_{u,i} = t_u. The numbers of held-out items per user are
    then heavy-tailed — the situation in which nDCG and DCG disagree (KDD'24 App. A).

    >>> w = simulate_world(n_users=200, n_items=50, seed=1)
    >>> bool((w.observed <= w.relevant).all())  # only relevant items can be observed
    True
    """
    for name, v in (("n_users", n_users), ("n_items", n_items), ("dim", dim)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 2:
            raise InputError(f"{name} must be an integer ≥ 2, got {v!r}")
    if isinstance(min_interactions, bool) or not isinstance(min_interactions, int) or min_interactions < 1:
        raise InputError(f"min_interactions must be a positive integer, got {min_interactions!r}")
    if not median_interactions > min_interactions:
        raise InputError(f"median_interactions must exceed min_interactions ({min_interactions}), "
                         f"got {median_interactions!r}")
    if not 0 < relevance_rate < 1:
        raise InputError(f"relevance_rate must lie in (0, 1), got {relevance_rate!r}")
    if not 0 < exposure_mean <= 1:
        raise InputError(f"exposure_mean must lie in (0, 1], got {exposure_mean!r}")
    if not -1 <= exposure_quality_corr <= 1:
        raise InputError(f"exposure_quality_corr must lie in [-1, 1], got {exposure_quality_corr!r}")
    if activity_spread < 0:
        raise InputError(f"activity_spread must be ≥ 0, got {activity_spread!r}")
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_users, dim))
    z = rng.normal(size=(n_items, dim))
    quality = rng.normal(size=n_items)
    a = rng.normal(size=n_users)
    target = min_interactions + (median_interactions - min_interactions) * np.exp(activity_spread * a)
    target = np.minimum(target, 0.75 * n_items)
    liked = np.clip(target / 0.85, relevance_rate * n_items, 0.9 * n_items)
    beta = quality_weight - mainstream_slope * a
    logits = taste_strength * (x @ z.T) / np.sqrt(dim) + beta[:, None] * quality[None, :]
    c = _solve_increasing(lambda v: _sigmoid(logits + v[:, None]).sum(axis=1), liked, -40.0, 40.0,
                          log=False, n_iter=45)
    relevant = rng.random((n_users, n_items)) < _sigmoid(logits + c[:, None])
    score = exposure_quality_corr * quality + np.sqrt(1 - exposure_quality_corr**2) * rng.normal(size=n_items)
    raw = np.exp(exposure_spread * score)
    exposure = np.clip(raw * exposure_mean / raw.mean(), 1e-3, 1.0)
    rel = relevant.astype(float)
    activity = _solve_increasing(lambda v: (rel * np.minimum(v[:, None] * exposure[None, :], 1.0)).sum(axis=1),
                                 target, 1e-4, 1.0 / exposure.min(), log=True, n_iter=45)
    propensity = np.minimum(activity[:, None] * exposure[None, :], 1.0)
    shown = rng.random((n_users, n_items)) < propensity
    return World(relevant, exposure, activity, relevant & shown, int(seed))


def split_world(world: World, *, train_frac: float = 0.5, n_mcar: int = 20, seed: int = 0) -> Split:
    """Split the observed interactions into train / MNAR test (each to train w.p. ``train_frac``) and draw
    the MCAR sample of ``n_mcar`` non-train items per user.

    >>> s = split_world(simulate_world(n_users=100, n_items=40, seed=2), n_mcar=5, seed=3)
    >>> bool((s.train & s.test).any()), bool(((s.train | s.test) == s.world.observed).all())
    (False, True)
    """
    if not 0 < train_frac < 1:
        raise InputError(f"train_frac must lie in (0, 1), got {train_frac!r}")
    if isinstance(n_mcar, bool) or not isinstance(n_mcar, int) or n_mcar < 1:
        raise InputError(f"n_mcar must be a positive integer, got {n_mcar!r}")
    rng = np.random.default_rng([world.seed, seed])
    to_train = rng.random(world.observed.shape) < train_frac
    train = world.observed & to_train
    test = world.observed & ~to_train
    n_users, n_items = train.shape
    # MCAR: n_mcar uniformly random non-train items per user (random keys, train items pushed to the end)
    keys = rng.random((n_users, n_items)) + train * 2.0
    n_free = (~train).sum(axis=1).min()
    if n_mcar > n_free:
        raise InputError(f"n_mcar must be ≤ the smallest number of non-train items of a user ({n_free}), got {n_mcar}")
    mcar = np.argsort(keys, axis=1)[:, :n_mcar]
    return Split(world, train, test, float(train_frac), mcar, int(seed))
