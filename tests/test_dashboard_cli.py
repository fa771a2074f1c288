"""`offeval dashboard FILE --map …`: checks the file first, serves it bound to 127.0.0.1 only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from tests.user_names import MAP, user_named

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def my_csv(tmp_path_factory):
    raw = pd.read_parquet(ROOT / "data" / "logs.parquet")
    path = tmp_path_factory.mktemp("user") / "my.csv"
    user_named(raw[raw["session_id"] % 20 == 0]).to_csv(path, index=False)
    return path


def offeval(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "offeval_core.cli", *args], capture_output=True, text=True,
                          env=ENV, timeout=timeout, cwd=ROOT)


def test_check_prints_what_was_understood(my_csv):
    r = offeval("dashboard", str(my_csv), "--map", MAP, "--check")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "my.csv: valid ranking logs"
    assert ("  target policies:    production (rank, the logging policy), treatment (rank), cand_01 (rank), cand_02 "
            "(rank), cand_03 (rank), cand_04 (rank), cand_05 (rank), cand_06 (rank), cand_07 (rank), cand_08 (rank), "
            "cand_09 (rank), cand_10 (rank); from columns pos_<policy>") in lines
    assert "  default target:     treatment (the policy named treatment)" in lines
    assert "  rewards:            clicked, completed (named like a reward)" in lines
    assert ("  note:               guessed column mapping: day=date; experiment_id=test; arm=variant; "
            "segment=user_type (name them explicitly to change this)") in lines


def test_a_bad_file_fails_before_serving_with_the_loaders_message(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("visit,pos,clicked\n1,1,0\n1,1,1\n")
    r = offeval("dashboard", str(bad), "--port", "1")
    assert r.returncode == 2
    assert "each (session_id, rank) must appear once" in r.stderr
    assert "Traceback" not in r.stderr
    r = offeval("dashboard", str(tmp_path / "missing.csv"))
    assert r.returncode == 2 and r.stderr.strip().endswith("missing.csv: no such file or directory")
    r = offeval("dashboard", "--map", "rank=pos")
    assert r.returncode == 2 and "--map, --arms and --reward apply to a file" in r.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """Local addresses listening on ``port`` (from /proc/net/tcp and tcp6)."""
    out = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(name):
            continue
        for line in Path(name).read_text().splitlines()[1:]:
            fields = line.split()
            addr, state = fields[1], fields[3]
            host, p = addr.rsplit(":", 1)
            if int(p, 16) == port and state == "0A":
                out.add(host)
    return out


def test_serves_the_file_on_127_0_0_1_only(my_csv):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "offeval_core.cli", "dashboard", str(my_csv), "--map", MAP,
                             "--port", str(port)], env=ENV, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read()
            assert time.time() < deadline, "the server did not answer"
            time.sleep(0.5)
        assert _listening(port) == {"0100007F"}  # 127.0.0.1, nothing on 0.0.0.0 or ::
        # a second server on the same port is refused in one line
        r = offeval("dashboard", str(my_csv), "--map", MAP, "--port", str(port))
        assert r.returncode == 2
        assert r.stderr.strip().splitlines()[-1] == (f"offeval dashboard: error: port {port} on 127.0.0.1 is in "
                                                     "use; pick another with --port")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_validate_estimate_and_reduce_speak_the_users_names(my_csv, tmp_path):
    r = offeval("validate", str(my_csv), "--map", MAP, "--json")
    import json

    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["valid"]
    assert list(out["reward_rates"]) == ["clicked", "completed"]  # no rank column counted as a reward
    assert out["policies"][:3] == ["production", "treatment", "cand_01"]
    r = offeval("estimate", str(my_csv), "--map", MAP, "--reward", "clicked", "--policy", "treatment", "--by", "test")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split()[0] == "test"  # the user's column name heads the table
    assert [line.split()[0] for line in r.stdout.splitlines()[1:7]] == [f"exp0{i}" for i in range(1, 7)]
    r = offeval("reduce", str(my_csv), "--out", str(tmp_path / "m.parquet"))
    assert r.returncode == 2
    assert r.stderr.strip() == (f"offeval reduce: error: {my_csv}: reduce reads Parquet logs only (a file, a "
                                "directory of Parquet files or a glob); for a CSV use `offeval estimate`, `offeval report` or "
                                "`offeval dashboard`, or convert it to Parquet first")
