"""The bootstraps' resampling replayed independently of ``stats.resample_counts``: per resample, n unit indices
drawn uniformly (``rng.integers``) and counted one resample at a time (``np.bincount`` of the row), the resamples
drawn in chunks of ``2,000,000 // n`` (the chunks the library draws at once)."""

from __future__ import annotations

import numpy as np


def replay_counts(rng, n: int, n_boot: int) -> np.ndarray:
    """The (n_boot, n) unit counts the library's bootstraps draw from ``rng`` (a seed or a Generator)."""
    rng = np.random.default_rng(rng)
    chunk = max(1, 2_000_000 // n)
    rows = []
    for start in range(0, n_boot, chunk):
        for idx in rng.integers(0, n, size=(min(chunk, n_boot - start), n)):
            rows.append(np.bincount(idx, minlength=n).astype(float))
    return np.array(rows).reshape(n_boot, n)
