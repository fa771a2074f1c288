"""Cached held-out results of the dashboard: the simulated model zoo (KDD'24 App. A), the GS estimator lab,
the interval-coverage study of the lab page, the assumption contrast, and uploaded qrels / runs (read through a
private temporary directory)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import streamlit as st

from dashboard.data.datasets import UploadGone, mark_ready
from dashboard.data.notes import keeps_notes
from offeval_core.errors import InputError, LimitExceeded, UnreadableInput

__all__ = [
    "COVERAGE_BLOCK", "COVERAGE_REPS", "LAB_PRESETS", "assumption_contrast_result", "coverage_block",
    "estimator_lab_result", "heldout_bytes", "heldout_qrels", "heldout_runs", "interval_coverage_result",
    "runs_agreement_result", "slate_experiment_result", "table1_result", "zoo_agreement_result", "zoo_cache_dir",
]


# -------------------------------------------------------------------------------------------- held-out

#: Cut-offs, seeds and strata of the estimator lab's settings: ``quick`` (the default, ~10 s cold) and
#: ``full`` (the library defaults: 5 seeds, K = 5…100, 7 strata counts; ~50 s cold).
LAB_PRESETS = {
    "quick": {"seeds": (0, 1), "ks": (10, 20, 50, 100), "strata_grid": (1, 2, 5, 10, 20)},
    "full": {"seeds": (0, 1, 2, 3, 4), "ks": (5, 10, 20, 50, 100), "strata_grid": (1, 2, 3, 5, 10, 20, 50)},
}


def zoo_cache_dir() -> Path:
    """Where the trained zoo is saved between server runs: ``$OFFEVAL_CACHE_DIR/zoo`` or the temp dir."""
    base = os.environ.get("OFFEVAL_CACHE_DIR") or Path(tempfile.gettempdir()) / "offeval-cache"
    return Path(base) / "zoo"


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=8))
def zoo_agreement_result(grid: str, k: int, gain: str, n_boot: int, level: float, seed: int = 0):
    """KDD'24 App. A on the simulated model zoo (``heldout.zoo_agreement``; the zoo is also saved on disk)."""
    from offeval_core.heldout.analyses import zoo_agreement

    out = zoo_agreement(k=k, gain_kind=gain, grid=grid, n_boot=n_boot, level=level, seed=seed,
                        cache_dir=zoo_cache_dir())
    mark_ready("zoo", grid, k, gain, n_boot, level, seed)
    return out


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=1))
def assumption_contrast_result():
    """Assumption holds vs broken on small simulated worlds (``analyses.assumptions``), seeds 0 and 1."""
    from offeval_core.analyses.assumptions import assumption_contrast

    out = assumption_contrast(seeds=(0, 1))
    mark_ready("assumption_contrast")
    return out


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=4))
def estimator_lab_result(preset: str, lam: str, propensity: str):
    """The GS estimator lab (``heldout.estimator_lab``) with the seeds / cut-offs of ``LAB_PRESETS[preset]``."""
    from offeval_core.heldout.analyses import estimator_lab

    if preset not in LAB_PRESETS:
        raise InputError(f"preset must be one of {', '.join(map(repr, LAB_PRESETS))}; got {preset!r}")
    out = estimator_lab(lam=lam, propensity=propensity, **LAB_PRESETS[preset])
    mark_ready("lab", preset, lam, propensity)
    return out


@keeps_notes(st.cache_data(show_spinner=False, max_entries=8))
def slate_experiment_result(behaviour: str, n: int, reps: int):
    """The slate estimators against the exact truth of a stochastic-slate world (``slate.experiment``):
    ``reps`` replications of ``n`` sessions under the click ``behaviour`` (``+``-joined); (summary, truth)."""
    from offeval_core.slate import SlateConfig, build_world
    from offeval_core.slate.experiment import replicate, summarize

    world = build_world(SlateConfig(behaviours=tuple(behaviour.split("+"))), rng=7)
    runs = replicate(world, n_sessions=n, reps=reps, rng=11)
    return summarize(runs, world.value()), world.value()


@keeps_notes(st.cache_data(show_spinner=False, max_entries=2))
def table1_result(normaliser: str):
    """KDD'24 Table 1 recomputed (``analyses.table1_example``) and its two policies' DCG vs nDCG agreement."""
    from offeval_core.analyses import dcg_vs_ndcg, table1_example

    t1 = table1_example(normaliser=normaliser)
    return t1, dcg_vs_ndcg(t1.session_values, n_boot=0)
#: Replications of the interval-coverage study (Monte-Carlo error of a 95 % coverage ≈ 1 point), run in blocks
#: so the page can show its progress; ~2 s cold at 300 sessions per log, ~7 s at 1,000 (2 shared cores).
COVERAGE_REPS, COVERAGE_BLOCK = 500, 50


@st.cache_resource(show_spinner=False, max_entries=1)
def _coverage_world():
    from offeval_core.slate.coverage import HEAVY_TAILED
    from offeval_core.slate.simulator import build_world

    return build_world(HEAVY_TAILED, rng=0)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=64))
def coverage_block(n_sessions: int, block: int):
    """Replications ``block · COVERAGE_BLOCK`` … of the coverage study (``slate.coverage.coverage_runs``, seed 0)."""
    from offeval_core.slate.coverage import coverage_runs

    start = block * COVERAGE_BLOCK
    return coverage_runs(_coverage_world(), n_sessions=n_sessions, reps=range(start, start + COVERAGE_BLOCK), rng=0)


@keeps_notes(st.cache_data(show_spinner=False, max_entries=8))
def interval_coverage_result(n_sessions: int):
    """Coverage of the normal, bootstrap-t and empirical-Bernstein intervals of IIPS / RIPS / SIPS against the
    exact truth over ``COVERAGE_REPS`` replications (``slate.coverage.summarize_coverage``)."""
    import pandas as pd

    from offeval_core.slate.coverage import summarize_coverage

    runs = pd.concat([coverage_block(n_sessions, b) for b in range(COVERAGE_REPS // COVERAGE_BLOCK)],
                     ignore_index=True)
    out = summarize_coverage(runs, world=_coverage_world(), n_sessions=n_sessions)
    mark_ready("coverage", n_sessions)
    return out


@st.cache_resource(show_spinner=False, max_entries=16)
def heldout_bytes(sha: str, name: str, _data: bytes | None = None) -> bytes:
    """Keep an uploaded qrels / run file in the server's memory (keyed by its content hash)."""
    if _data is None:
        raise UploadGone(f"the uploaded file {name} is no longer in memory; upload it again")
    return bytes(_data)


def _read_heldout(sha: str, name: str, reader):
    """Parse an upload with the core's reader (the input boundary and its limits) from a private temporary
    directory deleted at once; messages name the uploaded file, never the temporary path or the content."""
    raw = heldout_bytes(sha, name)
    safe = Path(name).name or "upload.txt"
    with tempfile.TemporaryDirectory(prefix="offeval-heldout-") as tmp:
        path = Path(tmp) / safe
        path.write_bytes(raw)
        try:
            return reader(path, source=safe)
        except InputError:
            raise
        except MemoryError:
            raise LimitExceeded(f"{safe}: the file does not fit in memory", source=safe) from None
        except Exception as exc:  # a parser failure the boundary did not foresee: its type, never its text
            raise UnreadableInput(f"{safe}: cannot read the file ({type(exc).__name__})", source=safe) from None


@st.cache_resource(show_spinner=False, max_entries=8)
def heldout_qrels(sha: str, name: str):
    """Qrels read from an upload (TREC ``qid iter doc rel``, CSV or Parquet; ``heldout.read_qrels``)."""
    from offeval_core.heldout.io import read_qrels

    return _read_heldout(sha, name, read_qrels)


@st.cache_resource(show_spinner=False, max_entries=16)
def heldout_runs(sha: str, name: str) -> list:
    """Every run in an upload (TREC ``qid Q0 doc rank score tag``, CSV or Parquet; ``heldout.read_runs``)."""
    from offeval_core.heldout.io import read_runs

    return _read_heldout(sha, name, read_runs)


@keeps_notes(st.cache_resource(show_spinner=False, max_entries=8))
def runs_agreement_result(qrels: tuple[str, str], runs: tuple[tuple[str, str], ...], k: int, gain: str,
                          n_boot: int, level: float, seed: int = 0):
    """DCG@k vs nDCG@k over the uploaded runs on the uploaded qrels (``heldout.runs_agreement``)."""
    from offeval_core.heldout.analyses import runs_agreement

    q = heldout_qrels(*qrels)
    all_runs = [r for sha, name in runs for r in heldout_runs(sha, name)]
    return runs_agreement(q, all_runs, k=k, gain_kind=gain, n_boot=n_boot, level=level, seed=seed)
