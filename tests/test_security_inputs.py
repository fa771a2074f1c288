"""Table-driven acceptance test: bad inputs to the command line and the library loaders (files, URL
parameters, discount specs, moments files, outputs) each end with the expected exit status (or error type)
and a specific message, and no message ever quotes a server file's content.

Over 400 lines on purpose: it is one table (150 cases) read top to bottom as the catalogue of bad inputs."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from security_support import (
    SECRET,
    big_rank_csv,
    fifo,
    gzip_bomb,
    moments_file,
    rewrite_moments,
    small_logs,
    wide_csv,
    write_csv,
)

from dashboard.state import parse_query_params
from offeval_core import errors
from offeval_core.cli import main
from offeval_core.discounts import parse_discount, register_table, restrict_table_files
from offeval_core.inputs import data_file
from offeval_core.logs import read_logs
from offeval_core.moments_io import read_moments

OK_HEADER = "session_id,rank,like\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    data = d / "datadir"
    data.mkdir()
    f: dict[str, Path] = {"dir": d, "data": data}
    logs = small_logs()
    f["ok.csv"] = d / "ok.csv"
    logs.to_csv(f["ok.csv"], index=False)
    f["ok.parquet"] = d / "ok.parquet"
    logs.to_parquet(f["ok.parquet"])

    def csv(name, text):
        f[name] = write_csv(d, name, text)

    csv("empty.csv", "")
    csv("header_only.csv", OK_HEADER)
    csv("logs.xlsx", "PK\x03\x04 not really")
    csv("garbage.csv", bytes(range(256)) * 8)
    csv("latin1.csv", OK_HEADER.encode() + "1,1,0\n\xe9t\xe9,2,1\n".encode("latin-1"))
    csv("ragged.csv", OK_HEADER + "1,1,0\n1,2,1,9,9\n")
    csv("rank0.csv", OK_HEADER + "1,0,1\n")
    csv("rank_neg.csv", OK_HEADER + "1,-1,1\n")
    csv("rank_frac.csv", OK_HEADER + "1,1.5,1\n")
    csv("rank_text.csv", OK_HEADER + "1,abc,1\n")
    csv("rank_empty.csv", OK_HEADER + "1,,1\n")
    csv("sid_empty.csv", OK_HEADER + ",1,1\n")
    csv("no_sid.csv", "rank,like\n1,0\n")
    csv("no_rank.csv", "session_id,like\n1,0\n")
    csv("no_reward.csv", "session_id,rank,comment\n1,1,hello\n")
    csv("reward_nan.csv", OK_HEADER + "1,1,nan\n")
    csv("reward_inf.csv", OK_HEADER + "1,1,inf\n")
    csv("reward_neg.csv", OK_HEADER + "1,1,-2\n")
    csv("reward_text.csv", OK_HEADER + "1,1,1\n2,1,1\n3,1,yes\n")
    csv("arm_bad.csv", "session_id,rank,like,arm\n1,1,0,placebo\n")
    csv("dup.csv", OK_HEADER + "1,1,0\n1,1,1\n")
    csv("lprop0.csv", "session_id,rank,like,logging_propensity\n1,1,0,0\n")
    csv("lprop_big.csv", "session_id,rank,like,logging_propensity\n1,1,0,1.5\n")
    csv("tprop_neg.csv", "session_id,rank,like,target_propensity__new\n1,1,0,-0.1\n")
    csv("rank_prefix.csv", "session_id,rank,like,rank__\n1,1,0,1\n")
    csv("rank_logging.csv", "session_id,rank,like,rank__logging\n1,1,0,1\n")
    csv("day_mixed.csv", "session_id,rank,like,day\n1,1,0,1\n1,2,0,2\n")
    csv("exp_mixed.csv", "session_id,rank,like,experiment_id\n1,1,0,a\n1,2,0,b\n")
    csv("segment_empty.csv", "session_id,rank,like,segment\n1,1,0,\n")
    csv("visit.csv", "visit,session_id,rank,like\n1,1,1,0\n")
    csv("tsv_as_csv.tsv", "session_id,rank,like\n1,1,0\n")
    csv("bom_only.csv", "\ufeff")
    csv("only_newlines.csv", "\n\n\n")
    csv("rank_big.csv", OK_HEADER + "1,11,0\n")
    csv("policy_big.csv", "session_id,rank,like,rank__new\n1,1,0,2147483648\n")
    csv("ten_rows.csv", OK_HEADER + "".join(f"{i},1,0\n" for i in range(10)))
    f["trunc.csv.gz"] = d / "trunc.csv.gz"
    raw = gzip.compress(f["ok.csv"].read_bytes())
    f["trunc.csv.gz"].write_bytes(raw[: len(raw) // 2])
    csv("notgzip.csv.gz", OK_HEADER + "1,1,0\n")
    f["trunc.csv.bz2"] = d / "trunc.csv.bz2"
    b = bz2.compress(f["ok.csv"].read_bytes())
    f["trunc.csv.bz2"].write_bytes(b[: len(b) // 2])
    f["bomb.csv.gz"] = gzip_bomb(d)
    f["wide.csv"] = wide_csv(d)
    f["rank31.csv"] = big_rank_csv(d)
    pq_bytes = f["ok.parquet"].read_bytes()
    csv("garbage.parquet", b"PAR1" + bytes(range(200)) + b"PAR1")
    csv("trunc.parquet", pq_bytes[: len(pq_bytes) // 2])
    csv("empty.parquet", b"")
    csv("csv_as.parquet", OK_HEADER + "1,1,0\n")
    wide_pq = pd.DataFrame(np.zeros((2, 1500)), columns=[f"c{i}" for i in range(1500)])
    f["wide.parquet"] = d / "wide.parquet"
    wide_pq.to_parquet(f["wide.parquet"])
    (d / "emptydir").mkdir()
    f["emptydir"] = d / "emptydir"
    (d / "dir.csv").mkdir()
    f["dir.csv"] = d / "dir.csv"
    f["fifo.csv"] = fifo(d, "fifo.csv")

    # discount tables
    csv("secret.csv", f"{SECRET}=1,PATH=/usr/bin\nx,y\n")
    csv("table_gap.csv", "rank,probability\n1,1\n3,0.2\n")
    csv("table_prob.csv", "rank,probability\n1,1\n2,1.5\n")
    csv("table_empty.csv", "")
    csv("table_big.csv", "rank,probability\n" + "".join(f"{i},0.5\n" for i in range(1, 200_001)))
    csv("table_text.csv", "rank,probability\n1,high\n")
    csv("table_ok.csv", "rank,probability\n1,1\n2,0.5\n")

    # moments files
    m = moments_file(d)
    f["moments.parquet"] = m

    def mom(name, **kw):
        f[name] = rewrite_moments(m, d / name, **kw)

    def set_col(col, value, row=0, kind="offline"):
        def change(df):
            df = df.copy()
            idx = np.flatnonzero((df["kind"] == kind).to_numpy())[row]
            if df[col].dtype.kind in "iu" and not float(value).is_integer():
                df[col] = df[col].astype(float)
            df.loc[idx, col] = value
            return df
        return change

    mom("m_nneg.parquet", frame=set_col("n", -5))
    mom("m_nzero.parquet", frame=set_col("n", 0))
    mom("m_nfrac.parquet", frame=set_col("n", 1.5))
    mom("m_sumnan.parquet", frame=set_col("sum", float("nan")))
    mom("m_suminf.parquet", frame=set_col("sum", float("inf")))
    mom("m_m2.parquet", frame=_m2_negative)
    mom("m_online_n.parquet", frame=set_col("n", -1, kind="online"))
    mom("m_online_nan.parquet", frame=set_col("sum", float("nan"), kind="online"))
    mom("m_den.parquet", frame=_den_too_small)
    mom("m_clip.parquet", frame=set_col("clip", 0.5))
    mom("m_nometa.parquet", drop_meta=True)
    mom("m_badjson.parquet", raw_meta=b"{not json")
    mom("m_format.parquet", meta=lambda doc: {**doc, "format": "other/9"})
    mom("m_nogrid.parquet", meta=lambda doc: {k: v for k, v in doc.items() if k != "grid"})
    mom("m_gridclips.parquet", meta=lambda doc: {**doc, "grid": {**doc["grid"], "clips": [0.5]}})
    mom("m_gridrule.parquet", meta=lambda doc: {**doc, "grid": {**doc["grid"], "ndcg_rule": "maybe"}})
    mom("m_gridtypes.parquet", meta=lambda doc: {**doc, "grid": {**doc["grid"], "rewards": [1, 2]}})
    mom("m_labels.parquet", meta=lambda doc: {**doc, "discount_labels": ["x"]})
    mom("m_nom2.parquet", frame=lambda df: df.drop(columns="m2"))
    mom("m_kind.parquet", frame=lambda df: df.assign(kind=np.where(df["kind"] == "online", "weird", df["kind"])))
    mom("m_nooffline.parquet", frame=lambda df: df[df["kind"] == "online"])
    mom("m_nokind.parquet", frame=lambda df: df.drop(columns="kind"))
    mb = m.read_bytes()
    csv("m_trunc.parquet", mb[: len(mb) - 100])

    # the operator's data directory
    (data / "good.parquet").write_bytes(mb)
    (data / "table.csv").write_text("rank,probability\n1,1\n2,0.25\n")
    fifo(data, "fifo.parquet")
    fifo(data, "pipe.csv")
    (data / "escape.parquet").symlink_to(f["moments.parquet"])
    (data / ".hidden.parquet").write_bytes(mb)
    (data / "notes.csv").write_text("x")
    return f


def _m2_negative(df):
    df = df.copy()
    idx = np.flatnonzero(((df["kind"] == "offline") & (df["sum"] > 0)).to_numpy())[0]
    df.loc[idx, "m2"] = -0.5
    return df


def _den_too_small(df):
    df = df.copy()
    idx = np.flatnonzero((df["kind"] == "offline").to_numpy())[0]
    df.loc[idx, "den_m2"] = -1e-3
    return df


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...] = ()  # a command line ({name} = a file of the fixture), or
    call: object = None  # a library call taking the fixture's files
    status: int | type = 2  # exit status of the command line, or the exception type of a library call
    fragment: str = ""
    env: tuple[tuple[str, str], ...] = ()


def cli(id, *argv, fragment, status=2, env=()):
    return Case(id=id, argv=argv, status=status, fragment=fragment, env=tuple(env))


def lib(id, call, status, fragment, env=()):
    return Case(id=id, call=call, status=status, fragment=fragment, env=tuple(env))


CASES = [
    # ------------------------------------------------------------------ logs files through `validate`
    cli("missing", "validate", "{dir}/nope.csv", fragment="nope.csv: no such file or directory"),
    cli("empty", "validate", "{empty.csv}", fragment="the file is empty (0 bytes)"),
    cli("header-only", "validate", "{header_only.csv}", fragment="no data rows"),
    cli("xlsx", "validate", "{logs.xlsx}", fragment="unsupported file type '.xlsx'"),
    cli("dev-zero", "validate", "/dev/zero", fragment="not a regular file"),
    cli("dev-null-csv", "validate", "/dev/null", fragment="not a regular file"),
    cli("proc-environ", "validate", "/proc/self/environ", fragment="not a regular file"),
    cli("directory-named-csv", "validate", "{dir.csv}", fragment="the directory holds no .parquet files"),
    cli("fifo", "validate", "{fifo.csv}", fragment="not a regular file"),
    cli("garbage-bytes", "validate", "{garbage.csv}", fragment="cannot read the file"),
    cli("latin1", "validate", "{latin1.csv}", fragment="it is not UTF-8 text"),
    cli("ragged", "validate", "{ragged.csv}", fragment="a row has the wrong number of fields (line 3"),
    cli("truncated-gz", "validate", "{trunc.csv.gz}", fragment="the compressed data is corrupt or truncated"),
    cli("not-gzip", "validate", "{notgzip.csv.gz}", fragment="the compressed data is corrupt or truncated"),
    cli("truncated-bz2", "validate", "{trunc.csv.bz2}", fragment="the compressed data is corrupt or truncated"),
    cli("gzip-bomb", "validate", "{bomb.csv.gz}", fragment="more than 20,000,000 rows"),
    cli("10000-columns", "validate", "{wide.csv}", fragment="more than 1,000 columns"),
    cli("rank-2^31", "validate", "{rank31.csv}", fragment="column 'rank' has ranks above the rank ceiling 100,000"),
    cli("policy-rank-2^31", "validate", "{policy_big.csv}",
        fragment="column 'rank__new' has ranks above the rank ceiling 100,000"),
    cli("rank-0", "validate", "{rank0.csv}", fragment="column 'rank' must hold positive integers (1 = top position); found 0"),
    cli("rank-negative", "validate", "{rank_neg.csv}", fragment="must hold positive integers (1 = top position); found -1"),
    cli("rank-fraction", "validate", "{rank_frac.csv}", fragment="found 1.5 at data row 1"),
    cli("rank-text", "validate", "{rank_text.csv}", fragment="found non-numbers 'abc' at data row 1"),
    cli("rank-empty", "validate", "{rank_empty.csv}", fragment="column 'rank' must hold positive integers; found empty"),
    cli("session-empty", "validate", "{sid_empty.csv}", fragment="column 'session_id' must not be empty"),
    cli("no-session-column", "validate", "{no_sid.csv}", fragment="missing required column 'session_id'"),
    cli("no-rank-column", "validate", "{no_rank.csv}", fragment="missing required column 'rank'"),
    cli("no-reward", "validate", "{no_reward.csv}", fragment="no reward column"),
    cli("reward-nan", "validate", "{reward_nan.csv}", fragment="reward column 'like' must hold finite numbers"),
    cli("reward-inf", "validate", "{reward_inf.csv}", fragment="reward column 'like' must hold finite numbers"),
    cli("reward-negative", "validate", "{reward_neg.csv}", fragment="reward column 'like' must be non-negative"),
    cli("reward-text", "validate", "{reward_text.csv}", fragment="reward column 'like' must be numeric; found 'yes'"),
    cli("arm-unknown", "validate", "{arm_bad.csv}", fragment="column 'arm' has the label 'placebo': say which label "
                                                             "is the control arm and which the treatment arm"),
    cli("duplicate-rank", "validate", "{dup.csv}", fragment="each (session_id, rank) must appear once"),
    cli("logging-propensity-0", "validate", "{lprop0.csv}", fragment="column 'logging_propensity' must hold probabilities in (0, 1]"),
    cli("logging-propensity-1.5", "validate", "{lprop_big.csv}", fragment="must hold probabilities in (0, 1]; found 1.5"),
    cli("target-propensity-neg", "validate", "{tprop_neg.csv}",
        fragment="column 'target_propensity__new' must hold probabilities in [0, 1]"),
    cli("rank-prefix-only", "validate", "{rank_prefix.csv}", fragment="has no policy name after the 'rank__' prefix"),
    cli("rank-logging-reserved", "validate", "{rank_logging.csv}", fragment="column 'rank__logging' is reserved"),
    cli("day-mixed", "validate", "{day_mixed.csv}", fragment="column 'day' must be the same on every row of a session"),
    cli("experiment-mixed", "validate", "{exp_mixed.csv}",
        fragment="column 'experiment_id' must be the same on every row of a session"),
    cli("segment-empty", "validate", "{segment_empty.csv}", fragment="column 'segment' must not be empty"),
    cli("map-duplicate", "validate", "{visit.csv}", "--map", "session_id=visit",
        fragment="column names appear twice after mapping: session_id"),
    cli("map-missing", "validate", "{ok.csv}", "--map", "rank=pos", fragment="column mapping rank=pos: the logs have no column 'pos'"),
    cli("map-malformed", "validate", "{ok.csv}", "--map", "rank", fragment="--map entries must look like schema_name=your_column"),
    cli("tsv-with-commas", "validate", "{tsv_as_csv.tsv}", fragment="missing required column 'session_id'"),
    cli("bom-only", "validate", "{bom_only.csv}", fragment="no columns"),
    cli("only-newlines", "validate", "{only_newlines.csv}", fragment="no columns"),
    cli("json-problems", "validate", "{dup.csv}", "--json", fragment='"valid": false'),
    cli("unknown-reward-validate", "validate", "{ok.csv}", "--reward", "clicks", fragment="unknown reward 'clicks'"),
    # ------------------------------------------------------------------ Parquet
    cli("parquet-garbage", "validate", "{garbage.parquet}", fragment="not a valid Parquet file"),
    cli("parquet-truncated", "validate", "{trunc.parquet}", fragment="not a valid Parquet file"),
    cli("parquet-empty", "validate", "{empty.parquet}", fragment="the file is empty (0 bytes)"),
    cli("parquet-is-csv", "validate", "{csv_as.parquet}", fragment="not a valid Parquet file"),
    cli("parquet-1500-columns", "validate", "{wide.parquet}", fragment="1,500 columns, more than the limit 1,000"),
    cli("parquet-empty-dir", "validate", "{emptydir}", fragment="the directory holds no .parquet files"),
    # ------------------------------------------------------------------ limits set by flags / environment
    cli("max-rows-flag", "--max-rows", "5", "validate", "{ten_rows.csv}", fragment="more than 5 rows"),
    cli("max-rows-env", "validate", "{ten_rows.csv}", fragment="more than 5 rows", env=[("OFFEVAL_MAX_ROWS", "5")]),
    cli("max-bytes-flag", "--max-bytes", "20", "validate", "{ten_rows.csv}", fragment="more than 20 bytes"),
    cli("max-columns-flag", "--max-columns", "2", "validate", "{ok.csv}", fragment="more than 2 columns"),
    cli("max-rank-flag", "--max-rank", "10", "validate", "{rank_big.csv}", fragment="above the rank ceiling 10"),
    cli("max-rows-parquet", "--max-rows", "5", "validate", "{ok.parquet}", fragment="more than 5 rows"),
    cli("max-bytes-malformed", "--max-rows", "lots", "validate", "{ok.csv}",
        fragment="--max-rows must be a positive whole number"),
    cli("max-bytes-unit", "--max-bytes", "5XB", "validate", "{ok.csv}", fragment="--max-bytes must be a positive whole number"),
    cli("max-env-malformed", "validate", "{ok.csv}", fragment="OFFEVAL_MAX_COLUMNS must be a positive whole number",
        env=[("OFFEVAL_MAX_COLUMNS", "-3")]),
    # ------------------------------------------------------------------ estimate options and discount specs
    cli("unknown-reward", "estimate", "{ok.csv}", "--reward", "clicks", fragment="unknown reward 'clicks'"),
    cli("unknown-policy", "estimate", "{ok.csv}", "--reward", "like", "--policy", "new",
        fragment="unknown policy 'new'"),
    cli("clip-below-1", "estimate", "{ok.csv}", "--reward", "like", "--clip", "0.5", fragment="clip"),
    cli("clip-text", "estimate", "{ok.csv}", "--reward", "like", "--clip", "lots", fragment="clip"),
    cli("level-2", "estimate", "{ok.csv}", "--reward", "like", "--level", "2", fragment="level"),
    cli("discount-unknown", "estimate", "{ok.csv}", "--reward", "like", "--discount", "log3", fragment="unknown discount 'log3'"),
    cli("discount-exp-1.5", "estimate", "{ok.csv}", "--reward", "like", "--discount", "exponential:1.5",
        fragment="exponential discount parameter must be in (0, 1]"),
    cli("discount-cutoff-0", "estimate", "{ok.csv}", "--reward", "like", "--discount", "log2@0",
        fragment="discount cut-off must be a positive integer"),
    cli("table-missing", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{dir}/none.csv",
        fragment="no such file or directory"),
    cli("table-proc-environ", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:/proc/self/environ",
        fragment="discount table /proc/self/environ: not a regular file"),
    cli("table-dev-zero", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:/dev/zero",
        fragment="not a regular file"),
    cli("table-fifo", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{fifo.csv}",
        fragment="not a regular file"),
    cli("table-secret-header", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{secret.csv}",
        fragment="must have the columns 'rank' and 'probability'"),
    cli("table-gap", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{table_gap.csv}",
        fragment="column 'rank' must list every rank 1..n exactly once"),
    cli("table-prob", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{table_prob.csv}",
        fragment="column 'probability' must hold numbers in [0, 1]; rows 2 are outside it"),
    cli("table-text", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{table_text.csv}",
        fragment="column 'probability' must hold numbers in [0, 1]; rows 1 are not numbers"),
    cli("table-empty", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{table_empty.csv}",
        fragment="the file is empty"),
    cli("table-too-big", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{table_big.csv}",
        fragment="more than 1,048,576 bytes"),
    cli("table-directory", "estimate", "{ok.csv}", "--reward", "like", "--discount", "table:{dir.csv}",
        fragment="not a regular file"),
    cli("exposure-table-environ", "estimate", "{ok.csv}", "--reward", "like", "--exposure", "table:/proc/self/environ",
        fragment="not a regular file"),
    # ------------------------------------------------------------------ moments files through `report`
    cli("report-moments-n-neg", "report", "{m_nneg.parquet}", "--out", "{dir}/r1.html", "--no-progress",
        fragment="offline counts 'n' must be positive integers; rows 1 are not"),
    cli("report-moments-sum-nan", "report", "{m_sumnan.parquet}", "--out", "{dir}/r2.html", "--no-progress",
        fragment="offline column 'sum' must hold finite numbers"),
    cli("report-moments-truncated", "report", "{m_trunc.parquet}", "--out", "{dir}/r3.html", "--no-progress",
        fragment="not a valid Parquet file"),
    cli("report-onto-input", "report", "{ok.csv}", "--out", "{ok.csv}", fragment="refusing to write the output onto an input"),
    cli("report-existing", "report", "{ok.csv}", "--out", "{secret.csv}", fragment="already exists; pass --force"),
    cli("report-out-directory", "report", "{ok.csv}", "--out", "{emptydir}", "--force", fragment="is a directory"),
    cli("reduce-onto-input", "reduce", "{ok.parquet}", "--out", "{ok.parquet}",
        fragment="refusing to write the output onto an input: ok.parquet"),
    cli("reduce-existing", "reduce", "{ok.parquet}", "--out", "{moments.parquet}", fragment="already exists; pass --force"),
    cli("reduce-into-input-dir", "reduce", "{emptydir}", "--out", "{emptydir}/m.parquet",
        fragment="refusing to write the output onto an input"),
    cli("reduce-csv", "reduce", "{ok.csv}", "--out", "{dir}/m9.parquet", fragment="reads Parquet logs"),
    cli("reduce-dev-zero", "reduce", "/dev/zero.parquet", "--out", "{dir}/m8.parquet", fragment="not a regular file"),
    cli("reduce-proc", "reduce", "/proc/self/environ", "--out", "{dir}/m7.parquet", fragment="reads Parquet logs"),
    # ------------------------------------------------------------------ moments files through the library
    *[lib(f"moments-{name}", lambda f, name=name: read_moments(f[name]), errors.MomentsValidationError, frag)
      for name, frag in [
          ("m_nneg.parquet", "counts 'n' must be positive integers"),
          ("m_nzero.parquet", "counts 'n' must be positive integers"),
          ("m_nfrac.parquet", "counts 'n' must be positive integers"),
          ("m_sumnan.parquet", "column 'sum' must hold finite numbers"),
          ("m_suminf.parquet", "column 'sum' must hold finite numbers"),
          ("m_m2.parquet", "second moments 'm2' must be ≥ 0"),
          ("m_den.parquet", "second moments 'den_m2' must be ≥ 0"),
          ("m_online_n.parquet", "online counts 'n' must be positive integers"),
          ("m_online_nan.parquet", "online column 'sum' must hold finite numbers"),
          ("m_clip.parquet", "column 'clip' must be ≥ 1 or inf"),
          ("m_nometa.parquet", "not an offeval moments file (no 'offeval' metadata)"),
          ("m_badjson.parquet", "its metadata is not JSON"),
          ("m_format.parquet", "unsupported moments format 'other/9'"),
          ("m_nogrid.parquet", "its metadata lacks the grid"),
          ("m_gridclips.parquet", "grid 'clips' must be a list of numbers ≥ 1 or 'inf'"),
          ("m_gridrule.parquet", "grid 'ndcg_rule' must be 'zero' or 'drop'"),
          ("m_gridtypes.parquet", "grid 'rewards' must be a list of names"),
          ("m_labels.parquet", "'discount_labels' must map names to labels"),
          ("m_nom2.parquet", "missing column(s) m2"),
          ("m_kind.parquet", "column 'kind' must be 'offline' or 'online'"),
          ("m_nooffline.parquet", "no offline rows"),
          ("m_nokind.parquet", "no 'kind' column"),
      ]],
    lib("moments-truncated", lambda f: read_moments(f["m_trunc.parquet"]), errors.UnreadableInput,
        "not a valid Parquet file"),
    lib("moments-csv", lambda f: read_moments(f["ok.csv"]), errors.UnreadableInput, "not a valid Parquet file"),
    lib("moments-dev-zero", lambda f: read_moments("/dev/zero"), errors.UnreadableInput, "not a regular file"),
    lib("moments-fifo", lambda f: read_moments(f["fifo.csv"]), errors.UnreadableInput, "not a regular file"),
    lib("moments-missing", lambda f: read_moments(f["dir"] / "none.parquet"), errors.MissingInput, "no such file"),
    # ------------------------------------------------------------------ logs through the library
    lib("logs-bomb-env", lambda f: read_logs(f["bomb.csv.gz"]), errors.LimitExceeded, "more than 1,000 bytes",
        env=[("OFFEVAL_MAX_BYTES", "1000")]),
    lib("logs-wide", lambda f: read_logs(f["wide.csv"]), errors.LimitExceeded, "more than 1,000 columns"),
    lib("logs-truncated-gz", lambda f: read_logs(f["trunc.csv.gz"]), errors.UnreadableInput, "corrupt or truncated"),
    lib("logs-missing", lambda f: read_logs(f["dir"] / "x.csv"), FileNotFoundError, "no such file or directory"),
    lib("logs-rank-dataframe", lambda f: read_logs(pd.DataFrame({"session_id": [1], "rank": [2**31], "like": [0]})),
        errors.LogValidationError, "above the rank ceiling"),
    # ------------------------------------------------------------------ URL parameters and data-directory names
    lib("url-moments-etc-passwd", lambda f: data_file("/etc/passwd", kinds=(".parquet",), what="moments file"),
        errors.UnreadableInput, "moments file '/etc/passwd' is not a plain file name", env=[("@data", "")]),
    lib("url-moments-traversal", lambda f: data_file("../moments.parquet", kinds=(".parquet",), what="moments file"),
        errors.UnreadableInput, "is not a plain file name", env=[("@data", "")]),
    lib("url-moments-dotdot-inside", lambda f: data_file("a..parquet", kinds=(".parquet",), what="moments file"),
        errors.UnreadableInput, "is not a plain file name", env=[("@data", "")]),
    lib("url-moments-hidden", lambda f: data_file(".hidden.parquet", kinds=(".parquet",), what="moments file"),
        errors.UnreadableInput, "is not a plain file name", env=[("@data", "")]),
    lib("url-moments-nul", lambda f: data_file("good.parquet\x00", kinds=(".parquet",), what="moments file"),
        errors.UnreadableInput, "is not a plain file name", env=[("@data", "")]),
    lib("url-moments-fifo", lambda f: data_file("fifo.parquet", kinds=(".parquet",), what="moments file"),
        errors.UnreadableInput, "is not a regular file", env=[("@data", "")]),
    lib("url-moments-symlink-out", lambda f: data_file("escape.parquet", kinds=(".parquet",), what="moments file"),
        errors.UnreadableInput, "is outside the data directory", env=[("@data", "")]),
    lib("url-moments-missing", lambda f: data_file("nope.parquet", kinds=(".parquet",), what="moments file"),
        errors.MissingInput, "is not in the data directory", env=[("@data", "")]),
    lib("url-moments-wrong-kind", lambda f: data_file("notes.csv", kinds=(".parquet",), what="moments file"),
        errors.UnreadableInput, "must end with .parquet", env=[("@data", "")]),
    lib("url-moments-no-data-dir", lambda f: data_file("good.parquet", kinds=(".parquet",), what="moments file"),
        errors.MissingInput, "no data directory is configured"),
    lib("url-table-environ", lambda f: _restricted(lambda: parse_discount("table:/proc/self/environ")),
        errors.UnreadableInput, "discount table '/proc/self/environ' is not a plain file name", env=[("@data", "")]),
    lib("url-table-dev-zero", lambda f: _restricted(lambda: parse_discount("table:/dev/zero@3")),
        errors.UnreadableInput, "is not a plain file name", env=[("@data", "")]),
    lib("url-table-traversal", lambda f: _restricted(lambda: parse_discount("table:../secret.csv")),
        errors.UnreadableInput, "is not a plain file name", env=[("@data", "")]),
    lib("url-table-subdir", lambda f: _restricted(lambda: parse_discount("table:sub/table.csv")),
        errors.UnreadableInput, "is not a plain file name", env=[("@data", "")]),
    lib("url-table-fifo", lambda f: _restricted(lambda: parse_discount("table:pipe.csv")),
        errors.UnreadableInput, "is not a regular file", env=[("@data", "")]),
    lib("url-table-no-data-dir", lambda f: _restricted(lambda: parse_discount("table:table.csv")),
        errors.MissingInput, "no data directory is configured"),
    lib("url-table-relative-cwd", lambda f: _restricted(lambda: parse_discount("table:./secret.csv")),
        errors.UnreadableInput, "is not a plain file name", env=[("@data", "")]),
    lib("upload-table-garbage", lambda f: register_table(b"\x00\xff" * 100, name="x.csv"), errors.InputError,
        "discount table x.csv"),
    lib("upload-table-huge", lambda f: register_table(b"rank,probability\n" + b"1,1\n" * 400_000, name="big.csv"),
        errors.LimitExceeded, "larger than 1,048,576 bytes"),
    lib("upload-table-secret", lambda f: register_table(f["secret.csv"].read_bytes(), name="s.csv"),
        errors.InputError, "must have the columns 'rank' and 'probability'"),
    lib("url-clip", lambda f: _url_problem({"clip": "0.5"}), ValueError,
        "ignored clip='0.5': clip must be ≥ 1 (1 = raw labels, inf = unclipped)"),
    lib("url-clip-text", lambda f: _url_problem({"clip": "=1+1"}), ValueError, "clip must be a number ≥ 1 or inf"),
    lib("url-level", lambda f: _url_problem({"level": "2"}), ValueError, "level must be strictly between 0 and 1"),
    lib("url-level-text", lambda f: _url_problem({"level": "high"}), ValueError, "level must be a number between 0 and 1"),
    lib("url-dataset", lambda f: _url_problem({"dataset": "../../etc"}), ValueError, "dataset must be one of"),
    lib("url-method", lambda f: _url_problem({"method": "magic"}), ValueError, "method must be one of"),
    lib("url-present", lambda f: _url_problem({"present": "maybe"}), ValueError, "present must be 1 or 0"),
]


def _restricted(fn):
    """Run ``fn`` in a fresh thread restricted like the dashboard's script thread; re-raise its error."""
    box: dict = {}

    def target():
        restrict_table_files()
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(30)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _url_problem(params):
    problems = parse_query_params(params).problems
    if problems:
        raise ValueError("; ".join(problems))


def _fill(text: str, files: dict) -> str:
    for key, value in files.items():
        text = text.replace("{" + key + "}", str(value))
    return text


@pytest.fixture
def env_for(files, monkeypatch):
    def apply(pairs):
        for k, v in pairs:
            if k == "@data":
                monkeypatch.setenv("OFFEVAL_DATA_DIR", str(files["data"]))
            else:
                monkeypatch.setenv(k, v)
    monkeypatch.delenv("OFFEVAL_DATA_DIR", raising=False)
    for var in ("OFFEVAL_MAX_BYTES", "OFFEVAL_MAX_ROWS", "OFFEVAL_MAX_COLUMNS", "OFFEVAL_MAX_RANK",
                "OFFEVAL_MAX_TABLE_BYTES"):
        monkeypatch.delenv(var, raising=False)
    return apply


def test_there_are_at_least_100_cases():
    assert len(CASES) >= 100
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, files, env_for, capsys):
    env_for(case.env)
    before = {k: _digest(files[k]) for k in ("ok.csv", "ok.parquet", "secret.csv", "moments.parquet")}
    if case.argv:
        argv = [_fill(a, files) for a in case.argv]
        code = main(argv)
        out = capsys.readouterr()
        text = out.err + out.out
        assert code == case.status, text
        assert "Traceback" not in text
    else:
        with pytest.raises(case.status) as info:
            case.call(files)
        text = str(info.value)
        if isinstance(case.status, type) and issubclass(case.status, errors.OffevalError):
            assert isinstance(info.value, errors.InputError)
    assert case.fragment in text, text
    assert SECRET not in text and "PATH=" not in text  # never a file's content
    assert str(files["data"]) not in text  # never the data directory's path
    after = {k: _digest(files[k]) for k in before}
    assert after == before  # inputs and existing outputs unchanged


def _digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------ what must still work


def test_leading_zero_session_ids_stay_distinct(files, tmp_path):
    path = write_csv(tmp_path, "ids.csv", "session_id,rank,like\n001,1,1\n1,1,0\n01,1,0\n")
    logs = read_logs(path)
    assert logs.n_sessions == 3
    assert sorted(logs.sessions["session_id"]) == ["001", "01", "1"]


def test_data_directory_and_registered_tables_are_readable_when_restricted(files, env_for):
    env_for([("@data", "")])
    model = _restricted(lambda: parse_discount("table:table.csv"))
    assert model(np.array([1, 2, 3])).tolist() == [1.0, 0.25, 0.0]
    name = register_table(b"rank,probability\n1,1\n2,0.5\n", name="bias.csv")
    assert _restricted(lambda: parse_discount(f"table:{name}@1"))(np.array([1, 2])).tolist() == [1.0, 0.0]
    assert data_file("good.parquet", kinds=(".parquet",)) == (files["data"] / "good.parquet").resolve()


def test_validate_lists_policies_from_propensity_columns(tmp_path, capsys):
    path = write_csv(tmp_path, "p.csv", "session_id,rank,like,logging_propensity,target_propensity__greedy\n"
                                        "1,1,1,0.5,0.25\n2,1,0,0.5,1\n")
    assert main(["validate", str(path)]) == 0
    assert "target policies:    greedy" in capsys.readouterr().out


def test_report_without_a_treatment_policy_uses_the_first_one(files, tmp_path, capsys):
    df = small_logs().rename(columns={"rank__treatment": "rank__ranker_b"})
    path = tmp_path / "b.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--out", str(out), "--no-progress", "--n-boot", "10"]) == 0
    html = out.read_text()
    assert "ranker_b" in html and "no column rank__treatment" not in html


def test_reduce_force_replaces_and_an_interrupted_write_keeps_the_old_file(files, tmp_path, monkeypatch, capsys):
    import offeval_core.moments_io as mio

    out = tmp_path / "m.parquet"
    assert main(["reduce", str(files["ok.parquet"]), "--out", str(out), "--clips", "1,inf"]) == 0
    first = out.read_bytes()
    assert main(["reduce", str(files["ok.parquet"]), "--out", str(out), "--clips", "1,4,inf", "--force"]) == 0
    second = out.read_bytes()
    assert second != first and read_moments(out).grid.clips == (1.0, 4.0, float("inf"))

    def broken(table, where, **kw):  # the disk fills up half-way through the write
        Path(where).write_bytes(b"PAR1 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(mio.pq, "write_table", broken)
    with pytest.raises(KeyboardInterrupt):
        main(["reduce", str(files["ok.parquet"]), "--out", str(out), "--clips", "1,inf", "--force"])
    assert out.read_bytes() == second
    assert [p.name for p in tmp_path.iterdir()] == ["m.parquet"]  # no temporary file left behind


def test_limits_from_flags_do_not_leak_into_the_process(files, capsys):
    assert main(["--max-rows", "5", "validate", str(files["ten_rows.csv"])]) == 2
    assert "OFFEVAL_MAX_ROWS" not in os.environ
    assert main(["validate", str(files["ten_rows.csv"])]) == 0
