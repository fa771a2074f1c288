"""A zoo of real top-n recommenders trained on a train split, over hyper-parameter grids.

Families (all closed form, numpy only):

- ``pop``      most-popular items (train counts);
- ``ease``     EASE^R: B = I − P diag(1 / diag P), P = (XᵀX + λI)⁻¹ (zero diagonal), scores X B — λ grid;
- ``itemknn``  cosine item-item similarity, each target item keeps its k most similar items, scores X S —
  k grid;
- ``userknn``  cosine user-user similarity, each user keeps its k most similar users, scores S_k X — k grid
  (the user half of KUNN-style neighbourhood models);
- ``puresvd``  rank-r truncated SVD X ≈ U_r Σ_r V_rᵀ, scores X V_r V_rᵀ — rank grid;
- ``rp3beta``  three-step random walk user → item → user → item, W_ij = Σ_v (x_vi / |i|)(x_vj / |v|),
  divided by pop_j^β (popularity penalty β), scores X W — β grid.

The grids move each family between popularity-leaning and personalised rankings (large λ, large k, small
rank, β = 0 lean to popular items), which is the trade-off between users with few and with many
interactions that makes DCG and nDCG disagree (KDD'24 App. A).

Each model ranks, for every user, the items not in the user's train set: score (rounded to
``SCORE_DECIMALS``) descending, ties by item index ascending; the top ``depth`` items are kept (``top_items``:
models × users × depth). KDD'24 App. A trains 192 EASE^R / KUNN models on a fixed 50 % of MovieLens-1M; the
default grid here trains 192 models of the six families. :func:`cached_zoo` memoises per parameters
(in-process and optionally on disk).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse

from offeval_core.errors import InputError
from offeval_core.heldout.world import Split, simulate_world, split_world
from offeval_core.safe_io import atomic_write

__all__ = [
    "CACHE_VERSION", "GRIDS", "SCORE_DECIMALS", "Zoo", "cached_zoo", "model_grid", "train_zoo",
]


GRIDS = ("default", "small", "paper")
#: Scores are rounded to this many decimals (and then stored as float32) before ranking, so values that are
#: zero in exact arithmetic but carry float round-off (EASE via an eigendecomposition, float32 products) tie
#: exactly and fall back to the item-index tie rule.
SCORE_DECIMALS = 6
#: Part of the on-disk cache key; bump it whenever the world, the grids or the models change, so that files
#: saved by an earlier version are not reused.
CACHE_VERSION = 2


def _single_thread_blas():
    """Limit BLAS to one thread: the zoo's many small products are slower multi-threaded on a shared machine
    (a 400 × 400 eigendecomposition went from 0.06 s to 2.5 s with contended threads)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its default threads
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


@dataclass(frozen=True, eq=False)
class Zoo:
    """Trained models' top-n lists: ``top_items[m, u]`` are model m's item indices for user u in rank order."""

    names: tuple[str, ...]
    families: tuple[str, ...]
    params: tuple[float, ...]
    top_items: np.ndarray  # (models, users, depth)

    @property
    def n_models(self) -> int:
        return len(self.names)

    def ranks(self, m: int) -> np.ndarray:
        """(users, items) 1-based rank of every item under model m; ``depth + 1`` for items below the top-n."""
        top = self.top_items[m]
        n_users, depth = top.shape
        n_items = int(self.top_items.max()) + 1
        out = np.full((n_users, max(n_items, 1)), depth + 1, dtype=np.int32)
        np.put_along_axis(out, top.astype(np.int64), np.arange(1, depth + 1, dtype=np.int32)[None, :], axis=1)
        return out


def _int_grid(lo: int, hi: int, n: int) -> np.ndarray:
    """``min(n, hi − lo + 1)`` distinct integers from ``lo`` to ``hi`` (both included), roughly geometric:
    dense where small values are distinct, as close to a geometric grid as rounding allows elsewhere."""
    hi = max(hi, lo)
    n = min(n, hi - lo + 1)
    m = n
    while True:
        vals = np.unique(np.geomspace(lo, hi, m).round().astype(int))
        if vals.size >= n:
            return vals[np.linspace(0, vals.size - 1, n).round().astype(int)]
        m *= 2


def model_grid(n_items: int, *, grid: str = "default", n_users: int | None = None) -> list[tuple[str, float]]:
    """(family, hyper-parameter) pairs. ``default`` (600 items, ≥ 1000 users): 1 popularity + 40 EASE λ + 36
    item-kNN k + 36 user-kNN k + 40 PureSVD ranks + 39 RP3β β = 192 models, as many as KDD'24 App. A;
    ``small``: 25 models; ``paper``: the near-identical grids of the App. A notebook (111 EASE λ in 500 … 1600,
    item-kNN k = 70 … 110, user-kNN k = 71 … 110: 192 models). ``n_users`` bounds the user-kNN k grid (default:
    ``n_items``)."""
    if grid not in GRIDS:
        raise InputError(f"grid must be one of {', '.join(map(repr, GRIDS))}; got {grid!r}")
    n_users = n_items if n_users is None else n_users
    if grid == "paper":
        # the grids of the App. A notebook: EASE l2 ∈ linspace(500, 1600, 111) and neighbourhood sizes
        # 70 … 110 (its KUNN grid; here item-kNN and user-kNN), 192 near-identical models in three families
        out = [("ease", float(v)) for v in np.linspace(500.0, 1600.0, 111)]
        out += [("itemknn", float(v)) for v in range(70, 111) if v < n_items]
        out += [("userknn", float(v)) for v in range(71, 111) if v < n_users]
        return out
    if grid == "small":
        lambdas = np.geomspace(5.0, 5000.0, 6)
        ks = _int_grid(3, n_items - 1, 5)
        uks = _int_grid(5, n_users - 1, 4)
        ranks = _int_grid(2, min(100, n_items - 1), 6)
        betas = np.linspace(0.0, 1.0, 3)
    else:
        lambdas = np.geomspace(1.0, 20000.0, 40)
        ks = _int_grid(2, n_items - 1, 36)
        uks = _int_grid(2, n_users - 1, 36)
        ranks = _int_grid(1, min(150, n_items - 1), 40)
        betas = np.linspace(0.0, 1.0, 39)
    out: list[tuple[str, float]] = [("pop", 0.0)]
    out += [("ease", float(v)) for v in lambdas]
    out += [("itemknn", float(v)) for v in ks]
    out += [("userknn", float(v)) for v in uks]
    out += [("puresvd", float(v)) for v in ranks]
    out += [("rp3beta", float(v)) for v in betas]
    return out


def _top_n(scores: np.ndarray, train: np.ndarray, depth: int) -> np.ndarray:
    """Top-``depth`` items per row: score (rounded, then float32) descending, ties by item index; train items
    never chosen."""
    s = np.round(scores, SCORE_DECIMALS).astype(np.float32)
    s[train] = -np.inf
    n_items = s.shape[1]
    if depth >= n_items:
        return np.argsort(-s, axis=1, kind="stable")
    part = np.argpartition(s, n_items - depth, axis=1)[:, n_items - depth:]
    vals = np.take_along_axis(s, part, axis=1)
    kth = vals.min(axis=1)
    ambiguous = np.count_nonzero(s >= kth[:, None], axis=1) > depth  # ties straddle the cut-off: sort fully
    order = np.lexsort((part, -vals), axis=1)
    top = np.take_along_axis(part, order, axis=1)
    if ambiguous.any():
        top[ambiguous] = np.argsort(-s[ambiguous], axis=1, kind="stable")[:, :depth]
    return top


def train_zoo(split: Split, *, grid: str = "default", depth: int = 100) -> Zoo:
    with _single_thread_blas():
        return _train_zoo(split, grid=grid, depth=depth)


def _train_zoo(split: Split, *, grid: str, depth: int) -> Zoo:
    """Train every model of the grid on ``split.train`` and keep each user's top-``depth`` items.

    EASE for all λ from one eigendecomposition XᵀX = Q Λ Qᵀ: P = Q diag(1/(Λ+λ)) Qᵀ, and with the zero
    diagonal constraint the scores are X B = X − (X P) diag(1/diag P). RP3β for all β from one walk matrix:
    the penalty only rescales its columns. The kNN models sort each similarity matrix once.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError(f"depth must be a positive integer, got {depth!r}")
    x = split.train.astype(np.float64)
    xs = sparse.csr_matrix(split.train.astype(np.float32))
    n_users, n_items = x.shape
    depth = min(depth, n_items)
    specs = model_grid(n_items, grid=grid, n_users=n_users)
    gram = x.T @ x
    counts = np.diag(gram).copy()
    user_counts = x.sum(axis=1)
    norm = np.sqrt(np.maximum(counts, 1e-12))
    cosine = gram / norm[:, None] / norm[None, :]
    np.fill_diagonal(cosine, 0.0)
    order_sim = np.argsort(-cosine, axis=0, kind="stable")  # per target item (column), most similar first
    unorm = np.sqrt(np.maximum(user_counts, 1e-12))
    ucos = np.asarray((xs @ xs.T).todense(), dtype=np.float64) / unorm[:, None] / unorm[None, :]
    np.fill_diagonal(ucos, 0.0)
    order_users = np.argsort(-ucos, axis=1, kind="stable")  # per user, most similar users first
    evals, q = np.linalg.eigh(gram)
    xq = np.asarray(xs @ q.astype(np.float32))
    qt32 = q.T.astype(np.float32)
    q2 = q * q
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    # RP3 (α = 1): W_ij = Σ_v x_vi x_vj / (|i| |v|); X W is computed once, β divides column j by pop_j^β
    walk = (x / np.maximum(counts, 1.0)[None, :]).T @ (x / np.maximum(user_counts, 1.0)[:, None])
    np.fill_diagonal(walk, 0.0)
    walk_scores = np.asarray(xs @ walk.astype(np.float32))
    log_pop = np.log(np.maximum(counts, 1.0))
    names, fams, params, tops = [], [], [], []
    for fam, val in specs:
        if fam == "pop":
            scores = np.broadcast_to(counts, (n_users, n_items))
            name = "pop"
        elif fam == "ease":
            inv = 1.0 / (np.maximum(evals, 0.0) + val)
            diag_p = q2 @ inv
            scores = x - ((xq * inv[None, :].astype(np.float32)) @ qt32) / diag_p[None, :].astype(np.float32)
            name = f"ease(lambda={val:.3g})"
        elif fam == "itemknn":
            k = int(val)
            keep = np.zeros_like(cosine, dtype=bool)
            np.put_along_axis(keep, order_sim[:k, :], True, axis=0)
            scores = np.asarray(xs @ np.where(keep, cosine, 0.0).astype(np.float32))
            name = f"itemknn(k={k})"
        elif fam == "userknn":
            k = int(val)
            cols = order_users[:, :k]
            sim = sparse.csr_matrix(
                (np.take_along_axis(ucos, cols, axis=1).ravel().astype(np.float32),
                 (np.repeat(np.arange(n_users), k), cols.ravel())), shape=(n_users, n_users))
            scores = np.asarray((sim @ xs).todense())
            name = f"userknn(k={k})"
        elif fam == "puresvd":
            r = int(val)
            v = vt[:r].T
            scores = np.asarray(xs @ v) @ v.T
            name = f"puresvd(rank={r})"
        else:
            scores = walk_scores * np.exp(-val * log_pop)[None, :].astype(np.float32)
            name = f"rp3beta(beta={val:.3g})"
        names.append(name)
        fams.append(fam)
        params.append(val)
        tops.append(_top_n(scores, split.train, depth).astype(np.int16 if n_items < 32768 else np.int32))
    return Zoo(tuple(names), tuple(fams), tuple(params), np.stack(tops))


@functools.lru_cache(maxsize=8)
def _cached(world_kw: tuple, split_kw: tuple, grid: str, depth: int, cache_dir: str | None):
    world = simulate_world(**dict(world_kw))
    split = split_world(world, **dict(split_kw))
    path = None
    if cache_dir is not None:
        key = hashlib.sha256(json.dumps([CACHE_VERSION, world_kw, split_kw, grid, depth], sort_keys=True).encode()).hexdigest()[:16]
        path = Path(cache_dir) / f"zoo-{key}.npz"
        if path.exists():
            d = np.load(path, allow_pickle=False)
            zoo = Zoo(tuple(d["names"].tolist()), tuple(d["families"].tolist()), tuple(d["params"].tolist()),
                      d["top_items"])
            return split, zoo
    zoo = train_zoo(split, grid=grid, depth=depth)
    if path is not None:  # temporary file + rename: a report killed while saving leaves no truncated cache
        def save(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, names=np.array(zoo.names), families=np.array(zoo.families),
                                    params=np.array(zoo.params), top_items=zoo.top_items)

        atomic_write(path, save, flag="--heldout-cache")
    return split, zoo


def cached_zoo(
    *,
    world_seed: int = 0,
    split_seed: int = 0,
    n_users: int = 1000,
    n_items: int = 600,
    train_frac: float = 0.5,
    n_mcar: int = 20,
    grid: str = "default",
    depth: int = 100,
    cache_dir: str | Path | None = None,
) -> tuple[Split, Zoo]:
    """The simulated split and its trained zoo, memoised per parameters (and saved under ``cache_dir``)."""
    world_kw = (("n_items", n_items), ("n_users", n_users), ("seed", world_seed))
    split_kw = (("n_mcar", n_mcar), ("seed", split_seed), ("train_frac", train_frac))
    return _cached(world_kw, split_kw, grid, depth, None if cache_dir is None else str(cache_dir))
