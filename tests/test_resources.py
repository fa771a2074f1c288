"""Hostile inputs that used to exhaust memory or CPU end with the clear error in a subprocess whose
address space is capped at 2 GB (``resource.setrlimit(RLIMIT_AS)``).

Each case runs the real command line (``python -m offeval_core.cli``) under the cap; the subprocess's
exit status and first message line are checked, and a generous timeout only guards against a hang (the
measured times are in docs/security.md, not asserted here).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from security_support import big_rank_csv, gzip_bomb, small_logs, sparse_file, wide_csv

REPO = Path(__file__).resolve().parents[1]
CAP = 2 * 1024**3


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run_capped(*argv: str, timeout: float = 120) -> tuple[int, str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFEVAL_")}
    env["PYTHONPATH"] = str(REPO)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "offeval_core.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_cap, env=env, cwd=REPO)
    return proc.returncode, proc.stderr + proc.stdout, time.perf_counter() - t0


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("resources")
    ok = d / "ok.csv"
    small_logs().to_csv(ok, index=False)
    zeros = sparse_file(d, size=8 * 1024**3)
    zeros_small = sparse_file(d, size=512 * 1024**2, name="zeros_small.csv")
    gz_zeros = d / "zeros.csv.gz"
    import gzip

    with gzip.open(gz_zeros, "wb", compresslevel=9) as fh:  # 4 GiB of NUL bytes in ~4 MB
        block = b"\0" * (1 << 24)
        for _ in range(256):
            fh.write(block)
    return {"ok": ok, "bomb": gzip_bomb(d, rows=100_000_000), "wide": wide_csv(d), "rank": big_rank_csv(d),
            "zeros": zeros, "zeros_small": zeros_small, "gz_zeros": gz_zeros, "dir": d}


CASES = {
    "gzip bomb (600 MB of CSV rows)": (["validate", "{bomb}"], "more than 20,000,000 rows"),
    "gzip of 4 GiB of NUL bytes": (["validate", "{gz_zeros}"], "the first line (the header) is longer than"),
    "8 GiB sparse file of zeros": (["validate", "{zeros}"], "more than 1,073,741,824 bytes"),
    "512 MiB sparse file of zeros": (["validate", "{zeros_small}"], "the first line (the header) is longer than"),
    "/dev/zero as logs": (["validate", "/dev/zero"], "not a regular file"),
    "/dev/zero as a discount table": (["estimate", "{ok}", "--reward", "like", "--discount", "table:/dev/zero"],
                                      "not a regular file"),
    "sparse zeros as a discount table": (["estimate", "{ok}", "--reward", "like", "--discount", "table:{zeros}"],
                                         "more than 1,048,576 bytes"),
    "10 000 columns": (["validate", "{wide}"], "more than 1,000 columns"),
    "rank 2^31": (["validate", "{rank}"], "above the rank ceiling 100,000"),
    "rank 2^31 in estimate": (["estimate", "{rank}", "--reward", "like", "--policy", "treatment"],
                              "above the rank ceiling 100,000"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_ends_with_the_clear_error_under_2gb(name, hostile):
    argv, fragment = CASES[name]
    argv = [a.format(**hostile) for a in argv]
    code, text, seconds = run_capped(*argv)
    print(f"{name}: exit {code} in {seconds:.1f} s")
    assert code == 2, text
    assert fragment in text, text
    assert "Traceback" not in text and "MemoryError" not in text


@pytest.mark.slow
def test_valid_logs_load_under_the_same_cap(hostile):
    code, text, seconds = run_capped("validate", str(hostile["ok"]))
    print(f"valid 30-session logs (start-up baseline): exit {code} in {seconds:.1f} s")
    assert code == 0, text
    assert "valid ranking logs" in text


@pytest.mark.slow
def test_10000_columns_load_in_linear_time_when_the_operator_allows_them(hostile, tmp_path):
    """With the column limit raised, 10 000 columns validate (linear in columns) under the cap."""
    code, text, seconds = run_capped("--max-columns", "20000", "validate", str(hostile["wide"]))
    print(f"10 000 columns allowed: exit {code} in {seconds:.1f} s")
    assert code == 0, text
    assert "rows (impressions): 20" in text
