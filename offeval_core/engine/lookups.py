"""Per-rank lookups of a reduce: discount models resolved for a source (the learnt ``pbm`` from its logs or
session-length histogram), the rank table 1 / D0(r), D(r) that queries join on, and the variant ids."""

from __future__ import annotations

import math

import ibis
import ibis.expr.types as ir
import numpy as np
import pandas as pd

from offeval_core.discounts import PBM_FLOOR, DiscountModel, parse_discount, survival_from_counts
from offeval_core.engine.grid import INF_CLIP, Grid
from offeval_core.engine.sources import Source, _prepared

__all__ = ["pbm_from_histogram", "rank_lookup", "rank_table", "source_discount", "variant_table"]


def source_discount(spec: str, source: Source, *, floor: float | None = None) -> DiscountModel:
    """Parse a discount spec for a source: a learnt ``pbm`` comes from its logs or length histogram."""
    kwargs = {} if floor is None else {"floor": floor}
    if source.logs is not None:
        cache = _prepared(source.logs)["pbm"]
        key = (spec, floor)
        if key not in cache:
            cache[key] = parse_discount(spec, logs=source.logs, **kwargs)
        return cache[key]
    if source.lengths is None:
        return parse_discount(spec, **kwargs)
    curve = pbm_from_histogram(source.lengths, floor=PBM_FLOOR if floor is None else floor)
    return parse_discount(spec, curve=curve, **kwargs)


def pbm_from_histogram(lengths: pd.DataFrame, *, floor: float) -> np.ndarray:
    """The learnt ``pbm`` curve of :func:`offeval_core.discounts.learn_pbm` from a length histogram.

    ``lengths`` has one row per session length with ``n`` sessions (``n_control`` of them in the control
    arm); the control arm is used when it has sessions, as in ``learn_pbm``.

    >>> h = pd.DataFrame({"length": [1, 2], "n": [3, 1], "n_control": [1, 1]})
    >>> pbm_from_histogram(h, floor=0.01).tolist()  # both control sessions reach rank 1, one of two rank 2
    [1.0, 0.5]
    """
    col = "n_control" if int(lengths["n_control"].sum()) > 0 else "n"
    length = lengths["length"].to_numpy(dtype=np.int64)
    counts = np.zeros(int(length.max()) + 1, dtype=np.int64)
    np.add.at(counts, length, lengths[col].to_numpy(dtype=np.int64))
    return survival_from_counts(counts[1:], floor=floor)


def rank_lookup(model: DiscountModel, rank: ir.IntegerValue, max_rank: int) -> ir.FloatingValue:
    """D(rank) as an Ibis expression: an array literal indexed by rank, 0 outside 1..max_rank (a rank no logged
    session reaches has no learnt value; D(0) and D(max_rank + 1) are 0, never an index error)."""
    arr = ibis.literal([float(v) for v in model.table(max_rank)], type="array<float64>")
    return ibis.ifelse((rank >= 1) & (rank <= max_rank), arr[rank - 1], 0.0)


def variant_table(grid: Grid) -> pd.DataFrame:
    """One row per (discount, exposure, clip) with integer ids used inside the queries."""
    rows = []
    for dm, d in enumerate(grid.discounts):
        for em, e in enumerate(grid.exposures):
            for m in grid.clips:
                rows.append({"v": len(rows), "dm": dm, "em": em, "clip": INF_CLIP if math.isinf(m) else float(m),
                             "discount": d, "exposure": e, "clip_value": float(m)})
    return pd.DataFrame(rows)


def rank_table(discount: DiscountModel, exposure: DiscountModel, max_rank: int) -> pd.DataFrame:
    """Per rank 1..max_rank: the inverse exposure ``w`` = 1 / D0(r) (inf where D0 = 0) and the discount
    ``d`` = D(r); the queries join ranks on it (ranks outside 1..max_rank find no row: D = 0). 1 / D0 beyond
    double precision is inf too (a finite clip caps it; the reduce refuses m = ∞ there)."""
    with np.errstate(divide="ignore", over="ignore"):
        inv = 1.0 / exposure.table(max_rank)
    return pd.DataFrame({"r": np.arange(1, max_rank + 1, dtype=np.int64), "w": inv, "d": discount.table(max_rank)})
