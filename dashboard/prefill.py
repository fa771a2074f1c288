"""Fill the persistent moments cache with the demo's default moments, so a fresh server's first chart costs
reading them: ``python -m dashboard.prefill [DIR]`` (``make data`` runs it after writing the demo).

It runs the moments steps of the background preparation (:func:`dashboard.data.warmup.steps`: every reward
with a positive value at the default D and D0, and the default reward's log2 moments) through the same cached
functions the pages call, outside a server, so the entries are exactly the ones a server looks up.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

__all__ = ["prefill"]


def prefill(directory: str | Path | None = None) -> list[str]:
    """Compute (or find) the demo's default moments in the cache; the labels of the steps run."""
    from dashboard.data.datasets import demo_dir, load
    from dashboard.data.warmup import default_choices, steps

    ds = load(f"demo:{Path(directory) if directory else demo_dir()}")
    reward, policy = default_choices(ds)
    done = []
    for label, call in steps(ds, reward, policy):
        if label.startswith("moments of"):
            call()
            done.append(label)
    return done


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")  # no "no runtime found" warnings outside a server
    from offeval_core.moments_cache import MomentsCache

    args = sys.argv[1:] if argv is None else argv
    cache = MomentsCache.from_env()
    if cache is None:
        print("moments cache off (OFFEVAL_CACHE=0): nothing to fill")
        return 0
    t0 = time.perf_counter()
    done = prefill(args[0] if args else None)
    print(f"demo moments in {cache.directory}: {', '.join(done)} ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
