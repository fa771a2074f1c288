"""Table-driven acceptance test of "every door checked": the same input refused by every way in with the same
message, and the right number where an input is valid. One row per case and its neighbours: a command line
(exit status and message fragment; for valid inputs the number, worked out by hand in the row's comment) or a
library call (exception type and fragment). The doors: ``validate``, ``estimate``, ``reduce`` (DuckDB; Spark in
test_spark_engine.py), ``dashboard --check``, moments files through ``report``, held-out qrels / runs, simulated
worlds named by a spec or ``offeval simulate``, the memory limit, uploaded discount tables."""

from __future__ import annotations

import gzip
import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from security_support import SECRET, fifo, moments_file, parquet_bomb, rewrite_moments

from offeval_core import errors
from offeval_core.cli import main
from offeval_core.discounts import MAX_REGISTERED, parse_discount, register_table, restrict_table_files
from offeval_core.moments_io import read_moments
from offeval_core.sim_spec import simulated_config, world_size

BASE = {"session_id": ["a", "a", "b", "b"], "rank": [1, 2, 1, 2], "like": [1.0, 0.0, 1.0, 1.0],
        "arm": ["control", "control", "treatment", "treatment"], "rank__new": [2, 1, 1, 2]}
SPOILED = {  # name: the columns that replace BASE's
    "rank_frac": {"rank": [1, 1.5, 1, 2]},
    "dup": {"rank": [1, 1, 1, 2]},
    "arm_ctrl": {"arm": ["ctrl", "ctrl", "treatment", "treatment"]},
    "arm_unknown": {"arm": ["ctrl", "ctrl", "control", "control"]},
    "arm_AB": {"arm": ["A", "A", "B", "B"]},
    "arm_Control": {"arm": ["Control", "Control", " treatment", "treatment"]},
    "sid_null": {"session_id": ["a", None, "b", "b"]},
    "pol0": {"rank__new": [0, 1, 1, 2]},
    "polneg": {"rank__new": [-5, 1, 1, 2]},
    "polfrac": {"rank__new": [1.5, 1, 1, 2]},
    "poldup": {"rank__new": [1, 1, 1, 2]},
    "polgap": {"rank__new": [3, 1, 7, None]},
    "rank_3e8": {"rank": [1, 300_000_000, 1, 2]},
    "rank11": {"rank": [1, 11, 1, 2]},
    "arm_mixed": {"arm": ["control", "treatment", "treatment", "treatment"]},
}


@pytest.fixture(scope="module")
def f(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("doors")
    out: dict[str, Path] = {"dir": d}
    for name, change in {"ok": {}, **SPOILED}.items():
        out[name] = d / f"{name}.parquet"
        pd.DataFrame({**BASE, **change}).to_parquet(out[name], index=False)
    twice = pa.table([pa.array(["a", "b"]), pa.array([1, 1]), pa.array([1.0, 0.0]), pa.array([0.0, 1.0])],
                     names=["session_id", "rank", "like", "like"])
    pq.write_table(twice, d / "twice.parquet")
    out["twice"] = d / "twice.parquet"
    # target ranks by hand: session 1 likes the item the target ranks 2nd, session 2 too
    out["ndcg.csv"] = d / "ndcg.csv"
    pd.DataFrame({"session_id": [1, 1, 2, 2], "rank": [1, 2, 1, 2], "like": [1, 0, 0, 1],
                  "rank__new": [2, 1, 1, 2]}).to_csv(out["ndcg.csv"], index=False)
    out["ndcg_dup.csv"] = d / "ndcg_dup.csv"
    pd.DataFrame({"session_id": [1, 1, 2, 2], "rank": [1, 2, 1, 2], "like": [1, 1, 0, 1],
                  "rank__new": [1, 1, 1, 2]}).to_csv(out["ndcg_dup.csv"], index=False)
    # Parquet directories
    a = pd.DataFrame({"session_id": ["s1", "s1"], "rank": [1, 2], "like": [1.0, 0.0], "arm": ["control"] * 2})
    b = pd.DataFrame({"session_id": ["s2", "s2"], "rank": [1, 2], "like": [0.0, 1.0], "arm": ["treatment"] * 2})
    for name, (x, y) in {"lacks_arm": (a.drop(columns="arm"), b), "later_policy": (a, b.assign(rank__p=[1, 2])),
                         "widths": (a.astype({"rank": "int32"}), b), "types": (a, b.astype({"rank": str})),
                         "same": (a, b)}.items():
        (d / name).mkdir()
        x.to_parquet(d / name / "day-1.parquet", index=False)
        y.to_parquet(d / name / "day-2.parquet", index=False)
        out[name] = d / name
    # moments files
    m = moments_file(d)
    out["m"] = m

    def first_offline(col, value):
        def change(df):
            df = df.copy()
            df.loc[np.flatnonzero((df["kind"] == "offline").to_numpy())[0], col] = value
            return df
        return change

    for name, kw in {
        "m_negative": {"frame": first_offline("sum", -3.0)},
        "m_negative_m2": {"frame": first_offline("den_m2", -1e-3)},
        "m_duplicated": {"frame": lambda df: pd.concat([df, df[df["kind"] == "offline"].iloc[:2]], ignore_index=True)},
        "m_online_n": {"frame": lambda df: df.assign(n=np.where(df["kind"] == "online", df["n"] * 1000, df["n"]))},
        "m_missing_row": {"frame": lambda df: df.drop(index=[3])},
        "m_cross": {"frame": first_offline("co_den", 1e6)},
        "m_meta_format": {"meta": lambda doc: {**doc, "format": "other/9"}},
        "m_meta_format_object": {"meta": lambda doc: {**doc, "format": {"clips": [0]}}},
        "m_meta_format_list": {"meta": lambda doc: {**doc, "format": ["offeval-moments/1"]}},
        "m_meta_format_old": {"meta": lambda doc: {**doc, "format": "offeval-moments/1"}},
        "m_meta_policy": {"meta": lambda doc: {**doc, "grid": {**doc["grid"], "policies": ["other"]}}},
        "m_meta_clips": {"meta": lambda doc: {**doc, "grid": {**doc["grid"], "clips": [1.0, 4.0, "inf"]}}},
    }.items():
        out[name] = rewrite_moments(m, d / f"{name}.parquet", **kw)
    # held-out
    (d / "q.txt").write_text("u1 0 a 1\nu1 0 b 0\nu2 0 c 2\n")
    (d / "r.txt").write_text("u1 Q0 b 1 2 m\nu1 Q0 a 2 1 m\nu2 Q0 c 1 1 m\n")
    (d / "q_bad.txt").write_text(f"u1 0 a 1\nu1 0 b {SECRET}\n")
    (d / "q_header.csv").write_text(f"{SECRET}:x:0:0\n1\n")
    (d / "qdir").mkdir()
    out["qfifo"] = fifo(d, "q.fifo")
    pq.write_table(pa.table({"user": np.zeros(200_000, dtype=np.int64), "item": np.arange(200_000),
                             "rel": np.ones(200_000)}), d / "q_big.parquet")
    return out


@pytest.fixture(scope="module")
def bombs(f):
    """Small files of 19 M rows (made once, for the slow rows)."""
    f["bomb"] = parquet_bomb(f["dir"] / "bomb.parquet")
    with gzip.open(f["dir"] / "bomb.csv.gz", "wb", compresslevel=9) as fh:
        fh.write(b"session_id,rank,like\n")
        chunk = b"1,1,0\n" * 1_000_000
        for _ in range(19):
            fh.write(chunk)
    return f


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    status: int
    fragment: str
    value: float | None = None  # for valid inputs: the number, by hand
    absent: str = ""  # text that must not appear (file content, the wrong diagnosis)


def cli(id, *argv, status=2, fragment="", value=None, absent=""):
    return Case(id, argv, status, fragment, value, absent)


def _same(id, file, fragment, *options, status=2):
    """The same refusal (or, with ``status=0``, the same sentence) from validate, estimate, reduce and dashboard
    --check; ``options`` (e.g. ``--arms``) given to each."""
    return [cli(f"{id}-validate", "validate", file, *options, status=status, fragment=fragment),
            cli(f"{id}-estimate", "estimate", file, "--reward", "like", *options, status=status, fragment=fragment),
            cli(f"{id}-reduce", "reduce", file, "--out", "{dir}/" + id + ".m.parquet", *options, status=status,
                fragment=fragment),
            cli(f"{id}-dashboard-check", "dashboard", file, "--check", *options, status=status, fragment=fragment)]


ROWS = [
    # ------------------------------------------------ reduce refuses what read_logs refuses (and the neighbours)
    *_same("rank-1.5", "{rank_frac}", "column 'rank' must hold positive integers (1 = top position); found 1.5 at "
           "data row 2"),
    *_same("duplicate-session-rank", "{dup}", "each (session_id, rank) must appear once, found duplicates: session "
           "'a' rank 1 (data rows 1 and 2)"),
    # arm labels: a common pair is mapped and said by every door; labels no pair names are a question for the
    # user; labels given with --arms are mapped before the rule, and a label the mapping leaves out is refused
    *_same("arm-ctrl", "{arm_ctrl}", "guessed arm labels of column 'arm': ctrl → control, treatment → treatment (a "
           "common pair)", status=0),
    *_same("arm-unknown", "{arm_unknown}", "column 'arm' has the labels 'control', 'ctrl': say which label is the "
           "control arm and which the treatment arm"),
    # A / B given with --arms: session a (A) is the control arm, b (B) the treatment arm; the online means are a's
    # 1 + 0 = 1 and b's 1 + 1 = 2 (the reduce's moments are checked in the test)
    cli("arm-AB-given-validate", "validate", "{arm_AB}", "--arms", "control=A,treatment=B", status=0,
        fragment="arms:               control 1 session, treatment 1 session (column arm; A → control, B → treatment, "
        "labels mapped by you)"),
    cli("arm-AB-given-estimate", "estimate", "{arm_AB}", "--reward", "like", "--arms", "control=A,treatment=B",
        status=0, fragment="1.0000          2.0000"),
    cli("arm-AB-given-reduce", "reduce", "{arm_AB}", "--out", "{dir}/ab.m.parquet", "--arms", "control=A,treatment=B",
        status=0, fragment='"sessions": 2'),
    cli("arm-AB-given-dashboard-check", "dashboard", "{arm_AB}", "--check", "--arms", "control=A,treatment=B",
        status=0, fragment="(column arm; A → control, B → treatment, labels mapped by you)"),
    *_same("arm-AB-unnamed", "{arm_AB}", "column 'arm' has labels the arm mapping (B → control, C → treatment) does "
           "not name, or empty values; found 'A', 'A' at data rows 1, 2", "--arms", "control=B,treatment=C"),
    *_same("session-id-null", "{sid_null}", "column 'session_id' must not be empty; found empty values at data row 2"),
    *_same("target-rank-0", "{pol0}", "column 'rank__new' must hold positive integers (1 = top position); found 0 "
           "at data row 1"),
    *_same("target-rank-negative", "{polneg}", "column 'rank__new' must hold positive integers (1 = top position); "
           "found -5 at data row 1"),
    *_same("target-rank-1.5", "{polfrac}", "found 1.5 at data row 1"),
    *_same("target-ranks-repeated", "{poldup}", "column 'rank__new' must give each item of a session its own rank "
           "(a ranking has one item per position), found duplicates: session 'a' rank 1 (data rows 1 and 2)"),
    *_same("duplicate-columns", "{twice}", "column name 'like' appears twice"),
    *_same("rank-3e8", "{rank_3e8}", "column 'rank' has ranks above the rank ceiling 100,000 (OFFEVAL_MAX_RANK / "
           "--max-rank); found 300000000 at data row 2"),
    *_same("arm-mixed", "{arm_mixed}", "column 'arm' must be the same on every row of a session; session 'a' has "
           "'control' and 'treatment' (data row 2)"),
    cli("rank-ceiling-flag-reduce", "--max-rank", "10", "reduce", "{rank11}", "--out", "{dir}/r11.m.parquet",
        fragment="above the rank ceiling 10 "),
    cli("rank-ceiling-flag-neighbour", "--max-rank", "11", "reduce", "{rank11}", "--out", "{dir}/r11b.m.parquet",
        status=0, fragment='"sessions": 2'),
    # 'Control' and ' treatment' are the schema's arms for every door: the control arm's online mean is
    # session a's reward 1 + 0 = 1, the treatment arm's session b's 1 + 1 = 2
    cli("arm-Control-reduce", "reduce", "{arm_Control}", "--out", "{dir}/ctl.m.parquet", "--clips", "1", status=0,
        fragment='"sessions": 2'),
    cli("arm-Control-validate", "validate", "{arm_Control}", status=0, fragment="arms:               control 1 "
        "session, treatment 1 session (column arm; Control → control"),
    # a target policy may leave items unranked and skip ranks; only repeats are refused
    cli("target-ranks-with-gaps", "validate", "{polgap}", status=0, fragment="target policies:    new"),
    # ------------------------------------------------ target rankings: nDCG of a valid ranking, and the impossible one
    # each session's liked item is at target rank 2: DCG = 1 / log2(3) = 0.6309, iDCG = 1 (labels, clip 1)
    cli("ndcg-by-hand", "estimate", "{ndcg.csv}", "--reward", "like", "--policy", "new", "--metric", "ndcg",
        "--discount", "log2", "--exposure", "log2", "--clip", "1", "--json", status=0, fragment='"target"',
        value=1 / math.log2(3)),
    cli("ndcg-two-items-at-rank-1", "estimate", "{ndcg_dup.csv}", "--reward", "like", "--policy", "new", "--metric",
        "ndcg", "--discount", "log2", "--exposure", "log2", "--clip", "1",
        fragment="column 'rank__new' must give each item of a session its own rank"),
    # ------------------------------------------------ Parquet directories and globs: one schema or a clear refusal
    *_same("dir-file-lacks-arm", "{lacks_arm}", "the Parquet files do not have the same columns: day-2.parquet has "
           "column 'arm' that day-1.parquet lacks"),
    *_same("dir-policy-only-later", "{later_policy}", "day-2.parquet has column 'rank__p' that day-1.parquet lacks"),
    *_same("dir-column-types", "{types}", "column 'rank' holds integers in day-1.parquet but text in day-2.parquet"),
    cli("dir-int32-int64-validate", "validate", "{widths}", status=0, fragment="sessions:           2"),
    cli("dir-int32-int64-reduce", "reduce", "{widths}", "--out", "{dir}/w.m.parquet", status=0, fragment='"sessions": 2'),
    cli("glob-validate", "validate", "{same}/day-*.parquet", status=0, fragment="rows (impressions): 4"),
    cli("glob-reduce", "reduce", "{same}/day-*.parquet", "--out", "{dir}/g.m.parquet", status=0, fragment='"rows": 4'),
    cli("glob-lacks-arm", "validate", "{lacks_arm}/*.parquet", fragment="do not have the same columns"),
    cli("glob-matches-nothing-validate", "validate", "{dir}/nothing-*.parquet",
        fragment="no .parquet file matches this pattern"),
    cli("glob-matches-nothing-reduce", "reduce", "{dir}/nothing-*.parquet", "--out", "{dir}/n.m.parquet",
        fragment="no .parquet file matches this pattern"),
    cli("empty-path", "validate", "", fragment="no file named: the path is empty"),
    # ------------------------------------------------ moments files: invariants, reported as moments problems
    *[cli(f"moments-{name}", "report", "{" + name + "}", "--out", "{dir}/" + name + ".html", "--no-progress",
          "--discount", "log2", fragment=frag, absent="problem(s) in the logs")
      for name, frag in [
          ("m_negative", "offline column 'sum' is a sum of non-negative values and cannot be negative; rows 1"),
          ("m_negative_m2", "offline second moments 'den_m2' must be ≥ 0 (a sum of squared deviations Σ(x − x̄)²); "
           "rows 1"),
          ("m_duplicated", "offline rows 1, 2, 17, 18 repeat the same group and variant"),
          ("m_online_n", "do not match the online sessions of their group (n = 15 where the online rows count 15,000)"),
          ("m_missing_row", "the grid is incomplete: 1 offline row(s) missing"),
          ("m_cross", "cross moments 'co_den' are larger than √('m2' · 'den_m2') (Cauchy-Schwarz)"),
          ("m_meta_format", "unsupported moments format 'other/9'"),
          ("m_meta_format_object", "unsupported moments format of JSON type dict, expected"),
          ("m_meta_format_list", "unsupported moments format of JSON type list, expected"),
          ("m_meta_format_old", "written by an earlier offeval (format 'offeval-moments/1': raw sums of squares"),
          ("m_meta_policy", "are for a group or variant the grid does not list"),
          ("m_meta_clips", "the grid is incomplete"),
      ]],
    cli("moments-valid-dashboard-check", "dashboard", "{m}", "--check", status=0, fragment="moments file"),
    cli("moments-m_online_n-dashboard-check", "dashboard", "{m_online_n}", "--check",
        fragment="do not match the online sessions of their group", absent="problem(s) in the logs"),
    cli("moments-m_meta_format-dashboard-check", "dashboard", "{m_meta_format}", "--check",
        fragment="unsupported moments format 'other/9'", absent="problem(s) in the logs"),
    # ------------------------------------------------ held-out qrels and runs: the boundary, no content in messages
    cli("qrels-etc-passwd", "heldout", "--qrels", "/etc/passwd", "--run", "{dir}/r.txt",
        fragment="/etc/passwd: line 1: expected 4 whitespace-separated fields 'qid iter doc rel', got 1",
        absent="root:"),
    cli("qrels-fifo", "heldout", "--qrels", "{qfifo}", "--run", "{dir}/r.txt", fragment="not a regular file"),
    cli("qrels-dev-zero", "heldout", "--qrels", "/dev/zero", "--run", "{dir}/r.txt", fragment="not a regular file"),
    # the command line names the flag (the readers themselves: tests/test_heldout_io.py)
    cli("qrels-directory", "heldout", "--qrels", "{dir}/qdir", "--run", "{dir}/r.txt",
        fragment="qdir: is a directory; --qrels must name a file (TREC, .csv or .parquet)"),
    cli("qrels-empty-path", "heldout", "--qrels", "", "--run", "{dir}/r.txt",
        fragment="--qrels is empty; name a qrels or run file"),
    cli("qrels-bad-value", "heldout", "--qrels", "{dir}/q_bad.txt", "--run", "{dir}/r.txt",
        fragment="column 'relevance' must be numeric and finite; 1 bad value(s), first: line 2", absent=SECRET),
    cli("qrels-header-is-content", "heldout", "--qrels", "{dir}/q_header.csv", "--run", "{dir}/r.txt",
        fragment="missing user column (expected one of user, user_id, qid, query, query_id); its 1 column(s) have "
                 "none of these names", absent=SECRET),
    # 200,000 × (120 + 16 × 3) + 2 × 200,000 × 24 decoded bytes = 43,200,000 bytes = 41 MiB > 10 MB
    cli("qrels-over-memory", "--max-memory", "10MB", "heldout", "--qrels", "{dir}/q_big.parquet", "--run",
        "{dir}/r.txt", fragment="q_big.parquet: the file would take about 41 MiB of memory once loaded (200,000 "
                                "rows × 3 columns)"),
    cli("run-etc-passwd", "heldout", "--qrels", "{dir}/q.txt", "--run", "/etc/passwd",
        fragment="expected 6 whitespace-separated fields", absent="root:"),
    # user 1: relevant a at position 2 → 1/log2(3); user 2: relevant c at position 1 → 1; mean (1 + 0.6309) / 2
    cli("heldout-by-hand", "heldout", "--qrels", "{dir}/q.txt", "--run", "{dir}/r.txt", "--metric", "ndcg@2",
        "--json", status=0, fragment='"runs"', value=(1 + 1 / math.log2(3)) / 2),
    # ------------------------------------------------ simulated worlds from the command line: the widgets' caps
    cli("simulate-days-365", "simulate", "--out", "{dir}/sim", "--days", "365",
        fragment="--days must be between 1 and 30 (days), got 365"),
    cli("simulate-seed-negative", "simulate", "--out", "{dir}/sim", "--seed", "-1",
        fragment="--seed must be between 0 and 4,294,967,295"),
    cli("simulate-support-61", "simulate", "--out", "{dir}/sim", "--support-depth", "61",
        fragment="--support-depth must be between 1 and 60"),
    cli("simulate-impressions", "simulate", "--out", "{dir}/sim", "--preset", "small", "--impressions", "900000000",
        fragment="the sessions that --impressions 900,000,000 asks for must be between 1 and 20,000"),
    # ------------------------------------------------ memory: what the data decompresses to (the 19 M-row rows are slow)
    cli("parquet-19M-rows-validate", "validate", "{bomb}", fragment="the file would take about 3.8 GiB of memory "
        "once loaded (19,000,000 rows × 3 columns), more than the limit 2,147,483,648 bytes (OFFEVAL_MAX_MEMORY"),
    cli("parquet-19M-rows-estimate", "estimate", "{bomb}", "--reward", "like", fragment="about 3.8 GiB of memory"),
    cli("csv-gz-19M-rows-validate", "validate", "{dir}/bomb.csv.gz",
        fragment="would take about 3.8 GiB of memory once loaded (19,000,001 rows × 3 columns)"),
    cli("memory-flag-neighbour", "--max-memory", "500", "validate", "{ok}", fragment="more than the limit 500 bytes"),
]


def _fill(text: str, files: dict) -> str:
    for key, value in files.items():
        text = text.replace("{" + key + "}", str(value))
    return text


@pytest.fixture
def clean_env(monkeypatch):
    for var in ("OFFEVAL_MAX_BYTES", "OFFEVAL_MAX_ROWS", "OFFEVAL_MAX_COLUMNS", "OFFEVAL_MAX_RANK",
                "OFFEVAL_MAX_MEMORY", "OFFEVAL_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)


SLOW = ("parquet-19M-rows-", "csv-gz-19M-rows-")


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.id.startswith(SLOW) else [])
                                  for c in ROWS])
def test_every_door(case, f, clean_env, capsys, request):
    files = request.getfixturevalue("bombs") if case.id.startswith(SLOW) else f
    argv = [_fill(a, files) for a in case.argv]
    code = main(argv)
    out = capsys.readouterr()
    text = out.err + out.out
    assert code == case.status, text
    assert case.fragment in text, text
    assert "Traceback" not in text
    if case.absent:
        assert case.absent not in text, text
    if case.id in ("arm-Control-reduce", "arm-ctrl-reduce", "arm-AB-given-reduce"):
        m = read_moments(argv[argv.index("--out") + 1])
        on = m.online.set_index("arm")
        assert on["n"].to_dict() == {"control": 1, "treatment": 1}
        assert on["sum"].to_dict() == {"control": 1.0, "treatment": 2.0}
    if case.value is not None:
        doc = json.loads(out.out)
        got = doc["groups"][0]["target"]["value"] if "groups" in doc else doc["runs"][0]["metrics"]["ndcg@2"]["mean"]
        assert got == pytest.approx(case.value, rel=1e-12)


def test_the_table_has_every_door():
    ids = {c.id for c in ROWS}
    assert len(ids) == len(ROWS) and len(ROWS) >= 80
    for door in ("validate", "estimate", "reduce", "dashboard-check"):
        assert sum(i.endswith("-" + door) for i in ids) >= 12


# ---------------------------------------------------------------------------- library doors: specs and tables


@pytest.mark.parametrize(("spec", "error", "fragment"), [
    ("demo;sessions=1000000;days=365", errors.SpecError,
     "simulation option 'sessions' must be between 1 and 20,000 (sessions per arm and day), got 1,000,000"),
    ("demo;days=31", errors.SpecError, "simulation option 'days' must be between 1 and 30"),
    ("demo;seed=-1", errors.SpecError, "simulation option 'seed' must be between 0 and 4,294,967,295"),
    ("demo;support=61", errors.SpecError, "simulation option 'support' must be between 1 and 60"),
    ("small;support=45", errors.SpecError, "support_depth must be None or an integer in [1, n_candidates]"),
    ("demo;sessions=1e6", errors.SpecError, "simulation option 'sessions' needs an integer, got '1e6'"),
    ("demo;sessions=" + "9" * 400, errors.SpecError, "simulation option 'sessions' needs an integer"),
    ("large;seed=1", errors.SpecError, "simulation spec must start with a preset (small, demo)"),
    ("demo;depth=3", errors.SpecError, "unknown simulation option 'depth'"),
    ("demo;seed=1;sessions=20000;days=30", errors.LimitExceeded,
     "would have up to 238,556,163 impressions (20 experiments × 30 days × 2 arms × 20,000 sessions"),
    ("small;seed=1;sessions=20000;days=30", errors.LimitExceeded, "OFFEVAL_MAX_MEMORY"),
])
def test_a_simulated_world_named_by_a_link_is_checked(spec, error, fragment, clean_env):
    with pytest.raises(error) as info:
        simulated_config(spec)
    assert fragment in str(info.value)


def test_a_simulated_world_within_the_caps_has_the_size_by_hand(clean_env):
    config, seed = simulated_config("small;seed=3;days=2")
    # 3 experiments × 2 days × 2 arms × 200 sessions, up to 1.2 × that on a busy day (traffic drift 0.2)
    sessions, rows, columns = world_size(config)
    assert (seed, config.n_days, sessions) == (3, 2, round(3 * 2 * 2 * 200 * 1.2))
    assert columns == 7 + 3 + 12  # ids and keys, three rewards, production + treatment + ten candidates
    from offeval_core.simulate_config import true_survival

    mean_length = true_survival(config).sum()  # E[L] = Σ_r P(L ≥ r); no segment scrolls deeper in this world
    assert 1 < mean_length < 30 and rows == round(sessions * mean_length)


def test_uploaded_discount_tables_are_kept_in_a_bounded_registry():
    names = [register_table(f"rank,probability\n1,1\n2,{k / 1000:.3f}\n".encode(), name=f"t{k}.csv")
             for k in range(1, MAX_REGISTERED + 2)]
    box: dict = {}

    def restricted(spec):
        restrict_table_files()
        try:
            box[spec] = parse_discount(spec)(np.array([1, 2, 3])).tolist()
        except errors.InputError as exc:
            box[spec] = exc

    for name in (names[0], names[-1]):
        t = threading.Thread(target=restricted, args=(f"table:{name}",))
        t.start()
        t.join()
    forgotten = box[f"table:{names[0]}"]
    assert isinstance(forgotten, errors.MissingInput) and "is no longer in memory; upload it again" in str(forgotten)
    assert box[f"table:{names[-1]}"] == [1.0, (MAX_REGISTERED + 1) / 1000, 0.0]  # rank 3 is past the table: 0


def test_a_moments_file_with_ndcg_rule_drop_keeps_its_empty_ndcg_groups(tmp_path):
    """n = 0 is a valid count for nDCG rows when sessions without a reward are dropped (and then every sum is 0)."""
    from security_support import small_logs

    from offeval_core.engine import Grid, reduce
    from offeval_core.logs import read_logs
    from offeval_core.moments_io import write_moments

    df = small_logs()
    df.loc[df["arm"] == "treatment", "like"] = 0  # the treatment arm's group has no rewarded session
    m = reduce(read_logs(df), Grid(rewards=("like",), policies=("treatment",), discounts=("log2",),
                                   exposures=("log2",), clips=(1.0, math.inf), ndcg_rule="drop"))
    back = read_moments(write_moments(m, tmp_path / "drop.parquet"))
    empty = back.offline[(back.offline["metric"] == "ndcg") & (back.offline["arm"] == "treatment")]
    assert len(empty) == 4 and (empty["n"] == 0).all() and (empty["sum"] == 0).all()
