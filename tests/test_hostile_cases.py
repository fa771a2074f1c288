"""Table-driven acceptance test of numbers, writes, outputs and messages: each row is one hostile or broken
input to the command line with its exit status, an exact message fragment and, where a number comes out, that
number worked out by hand. Then the writes (nothing replaced without --force, atomic under kill -9, the umask
honoured), the terminal and CSV outputs, and the dashboard's notices.

Over 400 lines on purpose: it is one catalogue, read top to bottom, of the cases this round fixed."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from offeval_core import errors
from offeval_core.cli import main
from offeval_core.logs import read_logs
from offeval_core.safe_io import atomic_write_text, check_output

ROOT = Path(__file__).resolve().parents[1]
D2 = 1 / math.log2(3)  # log2 discount at rank 2
ESC = "\x1b"


def _one_row_sessions(n: int, like, **extra) -> pd.DataFrame:
    s = np.arange(n)
    return pd.DataFrame({"session_id": s, "rank": 1, "like": like(s), **{k: v(s) if callable(v) else v
                                                                           for k, v in extra.items()}})


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cases")
    f: dict[str, Path] = {"dir": d}

    def put(name: str, frame: pd.DataFrame | None = None, text: str | bytes | None = None) -> None:
        f[name] = d / name
        if frame is not None:
            frame.to_parquet(f[name]) if name.endswith(".parquet") else frame.to_csv(f[name], index=False)
        elif isinstance(text, bytes):
            f[name].write_bytes(text)
        else:
            f[name].write_text(text)

    # 2000 sessions, rewards 1e8 + (0, 1, 0, 1, …); policy 'new' moves the item to rank 2
    put("big1e8.csv", _one_row_sessions(2000, lambda s: 1e8 + s % 2, rank__new=2))
    put("r1e150.csv", _one_row_sessions(40, lambda s: np.where(s % 2 == 0, 1e150, 0.0), rank__new=1))
    put("r1e200.csv", _one_row_sessions(40, lambda s: np.where(s % 2 == 0, 1e200, 0.0), rank__new=1))
    put("r1e308.csv", _one_row_sessions(40, lambda s: np.full(len(s), 1e308), rank__new=1))
    put("prop.csv", _one_row_sessions(200, lambda s: (s % 3 == 0).astype(float),
                                      logging_propensity=lambda s: np.where(s % 10 == 0, 1e-300, 0.5),
                                      target_propensity__new=0.5))
    rows = [{"session_id": s, "rank": r, "like": float((s + r) % 2), "rank__new": 4 - r}
            for s in range(60) for r in (1, 2, 3)]
    put("three.csv", pd.DataFrame(rows))
    ok = _one_row_sessions(50, lambda s: (s % 2).astype(float), rank__new=1)
    put("ok.parquet", ok)
    put("ok.csv", ok)
    put("trunc.parquet", text=f["ok.parquet"].read_bytes()[:300])
    (d / "mixed").mkdir()
    ok.to_parquet(d / "mixed" / "a.parquet")
    (d / "mixed" / "b.parquet").write_bytes(f["ok.parquet"].read_bytes()[:300])
    f["mixed"] = d / "mixed"
    put("cr.csv", text="session_id,rank,like\r1,1,1\r2,1,0\r")
    put("dup.csv", text="session_id,rank,like,like\n1,1,1,0\n2,1,0,1\n")
    put("ansi.csv", text=f"session_id,rank,like,evil{ESC}]0;pwned\x07{ESC}[31m\n1,1,1,2\n2,1,0,3\n")
    put("existing.parquet", text="keep me")
    put("cachefile", text="not a directory")
    (d / "qdir").mkdir()
    f["qdir"] = d / "qdir"
    return f


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    status: int
    fragment: str
    check: object = None  # a function of the JSON output: the number worked out by hand


def row(id, *argv, status=2, fragment="", check=None):
    return Case(id, argv, status, fragment, check)


def _fill(arg: str, files: dict[str, Path]) -> str:
    for k, v in files.items():
        arg = arg.replace("{" + k + "}", str(v))
    return arg


def near(x, want, rel=1e-9):
    return x == pytest.approx(want, rel=rel)


SE_1E8 = 0.5 / math.sqrt(1999)  # values 1e8 + (0, 1) over 2000 sessions: s² = 0.25 · 2000 / 1999, SE = s / √2000


def _big1e8(out):
    g = out["groups"][0]
    mean = 1e8 + 0.5
    return (near(g["logging"]["value"], mean, 1e-15) and near(g["logging"]["stderr"], SE_1E8, 1e-6)
            and g["logging"]["ci"][1] - g["logging"]["ci"][0] > 0.05  # a real interval, not [x, x]
            and near(g["target"]["value"], mean * D2, 1e-12) and near(g["target"]["stderr"], SE_1E8 * D2, 1e-6)
            and near(g["effect"]["value"], mean * (D2 - 1), 1e-12)
            and near(g["effect"]["stderr"], SE_1E8 * (1 - D2), 1e-6) and g["effect"]["p_value"] == 1.0)


def _r1e150(out):
    g = out["groups"][0]["logging"]
    return near(g["value"], 0.5e150, 1e-12) and near(g["stderr"], 1e150 * 0.5 / math.sqrt(39), 1e-12)


def _prop_capped(out):
    # IS with w = 0.5 / 1e-300 capped at 10 on sessions s % 10 == 0, else 0.5 / 0.5 = 1; reward 1 on s % 3 == 0
    s = np.arange(200)
    x = np.where(s % 10 == 0, 10.0, 1.0) * (s % 3 == 0)
    g = out["groups"][0]["target"]
    return near(g["value"], x.mean(), 1e-12) and near(g["stderr"], x.std(ddof=1) / math.sqrt(200), 1e-9)


def _three_clip64(out):
    # rows (s, r): like = (s + r) % 2; D0 = exponential:1e-300, so 1/D0 = 1, 1e300, ∞ clipped at 64 → 1, 64, 64;
    # target rank 4 - r under log2: D(3), D(2), D(1)
    value = []
    for s in range(60):
        c = [(s + r) % 2 for r in (1, 2, 3)]
        value.append(c[0] * 1 / math.log2(4) + c[1] * 64 / math.log2(3) + c[2] * 64 * 1.0)
    return near(out["groups"][0]["target"]["value"], float(np.mean(value)), 1e-12)


CASES = [
    # ------------------------------------------------------------------------------- numbers (stable moments)
    row("1e8+{0,1}: SE 0.5/√1999 by hand (was 0.0, a zero-width CI)", "estimate", "{big1e8.csv}", "--reward", "like",
        "--policy", "new", "--discount", "log2", "--exposure", "log2", "--json", status=0, check=_big1e8),
    row("1e150: squares fit, exact", "estimate", "{r1e150.csv}", "--reward", "like", "--discount", "log2",
        "--exposure", "log2", "--json", status=0, check=_r1e150),
    row("1e200: squares overflow (was SE 0, p = 0)", "estimate", "{r1e200.csv}", "--reward", "like",
        fragment="the moments of reward 'like' are not finite at"),
    row("1e200: the column and what to do", "estimate", "{r1e200.csv}", "--reward", "like",
        fragment="(column 'm2'; "),
    row("1e308: the sum overflows (was a mean of 5.99e307)", "estimate", "{r1e308.csv}", "--reward", "like",
        fragment="(column 'sum'; "),
    row("1e308: rescale", "estimate", "{r1e308.csv}", "--reward", "like",
        fragment="beyond double precision (about 1.8e308); rescale the reward"),
    row("exposure exponential:1e-300 at m = ∞", "estimate", "{three.csv}", "--reward", "like", "--policy", "new",
        "--discount", "log2", "--exposure", "exponential:1e-300",
        fragment="exposure model 'exponential:1e-300' gives rank 3 a probability of 0, so the unclipped (m = ∞) "
                 "weight 1 / D0 there is beyond double precision"),
    row("exposure exponential:1e-300 at m = 64: the number by hand", "estimate", "{three.csv}", "--reward", "like",
        "--policy", "new", "--discount", "log2", "--exposure", "exponential:1e-300", "--clip", "64", "--json",
        status=0, check=_three_clip64),
    row("propensity 1e-300, IS uncapped", "estimate", "{prop.csv}", "--reward", "like", "--policy", "new",
        "--estimator", "is", fragment="the second moments are not finite: the values (or their squares) are beyond"),
    row("propensity 1e-300, CIS capped at 10: the number by hand", "estimate", "{prop.csv}", "--reward", "like",
        "--policy", "new", "--estimator", "cis", "--clip", "10", "--json", status=0, check=_prop_capped),
    # ----------------------------------------------------------------------------------------------- writes
    row("reduce onto an existing file", "reduce", "{ok.parquet}", "--out", "{existing.parquet}",
        fragment="existing.parquet already exists; pass --force to replace it, or choose another --out"),
    row("report onto its input", "report", "{ok.csv}", "--out", "{ok.csv}", "--no-progress",
        fragment="refusing to write the output onto an input: ok.csv"),
    row("--out in a directory that cannot be written", "reduce", "{ok.parquet}", "--out", "/sys/offeval-m.parquet",
        fragment="cannot write offeval-m.parquet"),
    row("--out empty", "reduce", "{ok.parquet}", "--out", "", fragment="--out is empty; name the file to write"),
    # ------------------------------------------------------------------------------------- one-line messages
    row("reduce --threads -1", "reduce", "{ok.parquet}", "--out", "{dir}/m1.parquet", "--threads", "-1",
        fragment="argument --threads: must be a positive integer (1, 2, …), got '-1'"),
    row("reduce --memory-limit lots", "reduce", "{ok.parquet}", "--out", "{dir}/m1.parquet", "--memory-limit",
        "lots", fragment="argument --memory-limit: must be a positive size with a unit such as 2GB"),
    row("reduce a truncated Parquet file", "reduce", "{trunc.parquet}", "--out", "{dir}/m1.parquet",
        fragment="trunc.parquet: 1 problem(s) in the logs:\n  - cannot read the file: not a valid Parquet file "
                 "(corrupt or truncated: "),
    row("reduce a directory holding a truncated file", "reduce", "{mixed}", "--out", "{dir}/m1.parquet",
        fragment="mixed: 1 problem(s) in the logs:\n  - b.parquet: cannot read the file: not a valid Parquet file "
                 "(corrupt or truncated: "),
    row("reduce a glob matching nothing", "reduce", "{dir}/nothing/*.parquet", "--out", "{dir}/m1.parquet",
        fragment="nothing/*.parquet: no .parquet file matches this pattern"),
    row("reduce --rewards rank", "reduce", "{ok.parquet}", "--out", "{dir}/m1.parquet", "--rewards", "rank",
        fragment="--rewards names 'rank', a column of the log schema, not a reward"),
    row("report --heldout-cache FILE", "report", "{ok.csv}", "--out", "{dir}/r.html", "--heldout",
        "--heldout-cache", "{cachefile}", "--no-progress", fragment="is not a directory; it names the directory"),
    row("heldout --qrels DIR", "heldout", "--qrels", "{qdir}", "--run", "{ok.csv}",
        fragment="qdir: is a directory; --qrels must name a file"),
    row("CSV with CR-only line ends", "validate", "{cr.csv}",
        fragment="the lines end in a carriage return alone (CR, as in classic Mac OS files)"),
    row("discount cut-off with a superscript digit", "estimate", "{ok.csv}", "--reward", "like", "--discount",
        "log2@²", fragment="discount cut-off must be a positive integer after '@', got 'log2@²'"),
    row("--by day,day", "estimate", "{ok.csv}", "--reward", "like", "--by", "day,day",
        fragment="--by names 'day' twice"),
    row("simulate --seed -1", "simulate", "--out", "{dir}/sim_seed", "--seed", "-1",
        fragment="--seed must be between 0 and 4,294,967,295"),
    row("estimate --seed -1", "estimate", "{ok.csv}", "--reward", "like", "--seed", "-1",
        fragment="argument --seed: must be a non-negative integer"),
    row("duplicate CSV header", "validate", "{dup.csv}",
        fragment="column 'like' appears more than once in the header; column names must be unique"),
    row("--map foo=like", "validate", "{ok.csv}", "--map", "foo=like",
        fragment="a mapping entry names a schema field on its left side, and 'foo' is none of session_id"),
    row("validate ''", "validate", "", fragment="no file named: the path is empty"),
    row("dashboard --host ''", "dashboard", "--host", "",
        fragment="argument --host: must be an IP address or a host name"),
    row("dashboard --host with a space", "dashboard", "--host", "my host",
        fragment="argument --host: must be an IP address or a host name"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, files, capsys):
    argv = [_fill(a, files) for a in case.argv]
    before = {k: _digest(files[k]) for k in ("ok.csv", "ok.parquet", "existing.parquet", "cachefile")}
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out = capsys.readouterr()
    text = out.err + out.out
    assert code == case.status, text
    assert "Traceback" not in text
    assert case.fragment in text, text
    if case.check is not None:
        assert case.check(json.loads(out.out)), out.out
    assert {k: _digest(files[k]) for k in before} == before  # inputs and existing outputs unchanged


def _digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_table_has_every_row_once():
    assert len({c.id for c in CASES}) == len(CASES) >= 30


# ---------------------------------------------------------------------------------------- terminal output


def test_control_sequences_in_names_are_escaped_on_the_terminal(files, capsys):
    assert main(["validate", str(files["ansi.csv"])]) == 0
    text = capsys.readouterr().out
    assert ESC not in text and "\x07" not in text
    assert "evil\\x1b]0;pwned\\x07\\x1b[31m" in text
    assert main(["estimate", str(files["ansi.csv"]), "--reward", f"evil{ESC}]0;pwned\x07{ESC}[31m"]) == 0
    assert ESC not in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------- writes


def _simulate(out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "offeval_core.cli", "simulate", "--out", str(out), "--preset",
                             "small", "--seed", "2", *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_simulate_keeps_existing_files_without_force(tmp_path, capsys):
    (tmp_path / "logs.parquet").write_bytes(b"earlier logs")
    assert main(["simulate", "--out", str(tmp_path), "--preset", "small"]) == 2
    assert "1 output file(s) already exist (logs.parquet); pass --force" in capsys.readouterr().err
    assert (tmp_path / "logs.parquet").read_bytes() == b"earlier logs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs.parquet"]
    days = tmp_path / "byday"
    (days / "logs").mkdir(parents=True)
    (days / "logs" / "day-2020-01-01.parquet").write_bytes(b"an earlier day")
    assert main(["simulate", "--out", str(days), "--preset", "small", "--partition-by-day"]) == 2
    assert "logs/day-2020-01-01.parquet" in capsys.readouterr().err
    assert (days / "logs" / "day-2020-01-01.parquet").read_bytes() == b"an earlier day"


def test_simulate_force_replaces_and_removes_earlier_day_files(tmp_path, capsys):
    days = tmp_path / "byday"
    (days / "logs").mkdir(parents=True)
    (days / "logs" / "day-2020-01-01.parquet").write_bytes(b"an earlier day")
    (days / "ground_truth.parquet").write_bytes(b"earlier truth")
    assert main(["simulate", "--out", str(days), "--preset", "small", "--partition-by-day", "--force"]) == 0
    names = sorted(p.name for p in (days / "logs").iterdir())
    assert names == ["day-2026-03-02.parquet", "day-2026-03-03.parquet", "day-2026-03-04.parquet"]
    assert len(read_logs(days / "logs").sessions) > 0
    assert pd.read_parquet(days / "ground_truth.parquet").shape[0] > 0
    assert not [p for p in days.rglob(".*.tmp")]


def test_simulate_killed_while_writing_leaves_the_earlier_files_whole(tmp_path):
    out = tmp_path / "world"
    assert main(["simulate", "--out", str(out), "--preset", "small", "--seed", "1"]) == 0
    before = {p.name: _digest(p) for p in out.iterdir()}
    # a world that takes seconds to write, within the simulation caps (sessions per arm and day ≤ 20,000)
    proc = _simulate(out, "--force", "--impressions", "3000000", "--days", "30")
    deadline = time.time() + 300
    while not list(out.glob(".logs.parquet.*.tmp")):  # kill once the new logs are being written
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert {p.name: _digest(p) for p in out.iterdir() if not p.name.startswith(".")} == before
    read_logs(out / "logs.parquet")  # complete and readable


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = atomic_write_text(tmp_path / "report.html", "x")
        assert stat.S_IMODE(path.stat().st_mode) == mode
    finally:
        os.umask(old)


def test_force_keeps_the_mode_of_the_file_it_replaces(tmp_path, files, capsys):
    out = tmp_path / "m.parquet"
    out.write_bytes(b"old")
    out.chmod(0o644)
    old = os.umask(0o077)
    try:
        assert main(["reduce", str(files["ok.parquet"]), "--out", str(out), "--clips", "1,inf", "--force"]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # was turned into 0600
    new = tmp_path / "new.parquet"
    old = os.umask(0o022)
    try:
        assert main(["reduce", str(files["ok.parquet"]), "--out", str(new), "--clips", "1,inf"]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644  # was always 0600


def test_an_unwritable_directory_is_an_input_error(tmp_path, monkeypatch):
    def refuse(path, mode):
        return False

    monkeypatch.setattr(os, "access", refuse)
    with pytest.raises(errors.UnwritableOutput, match="permission denied"):
        check_output(tmp_path / "x.parquet")


# ---------------------------------------------------------------------------------------------- dashboard


def test_csv_download_keeps_names_on_their_line_and_neutralises_cells():
    import datetime as dt

    from dashboard.render import table_csv

    name = 'like\n=HYPERLINK("http://e","x")'
    frame = pd.DataFrame({name: ["+1+1", "-2+3", "ok"], "value": [-1.5, 2.0, 3.0]})
    text = table_csv(frame, name="per_setting", dataset=f"uploaded file {name}", settings={"reward": name},
                     units=None, when=dt.datetime(2026, 1, 1))
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith(("=", "+", "-", "@"))]
    assert lines[0].startswith("# per setting") and "\\n=HYPERLINK" in lines[0]
    back = pd.read_csv(__import__("io").StringIO(text), comment=None, skiprows=2)
    assert back.iloc[:, 0].tolist() == ["'+1+1", "'-2+3", "ok"] and back["value"].tolist() == [-1.5, 2.0, 3.0]


def test_dashboard_disables_the_tables_own_export_and_names_an_ignored_clip(tmp_path):
    import streamlit as st
    from dashboard_support import environment, open_page, write_small_world

    out = write_small_world(tmp_path)
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        at = open_page()
        assert st.get_option("client.disableDataExport") is True
        from dashboard_support import APP
        from streamlit.testing.v1 import AppTest

        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["clip"] = "nan"
        at.switch_page("views/sensitivity.py").run()
        assert not at.exception
        assert ["ignored clip='nan': clip must be a number ≥ 1 or inf"] == [
            w.value for w in at.warning if "clip='nan'" in w.value]
    assert "disableDataExport = true" in (ROOT / ".streamlit" / "config.toml").read_text()


def test_an_upload_with_cr_line_ends_or_a_twice_named_column_is_an_error_notice(tmp_path):
    from dashboard_support import environment, open_page, write_small_world

    from dashboard import data

    out = write_small_world(tmp_path)
    for payload, fragment in ((b"session_id,rank,like\r1,1,1\r2,1,0\r", "carriage return alone"),
                              (b"session_id,rank,like,like\n1,1,1,0\n", "column 'like' appears more than once")):
        with pytest.raises(errors.InputError) as info:  # the upload callback catches InputError
            data.upload_raw(data.content_key(payload), "up.csv", payload)
        with environment(OFFEVAL_DEMO_DIR=str(out)):
            at = open_page()
            at.session_state["upload_error"] = info.value  # what the upload callback stores
            at.session_state["w_source"] = "upload"  # the Data page's "Upload a file" view
            at.session_state["_source_for"] = at.session_state["w_dataset"]
            at.run()
            assert not at.exception
            assert any(fragment in e.value for e in at.error), [e.value for e in at.error]
