"""A database table by URL, without a server: the URL's checks (scheme of an installed Ibis backend, the table
an identifier, credentials in no message), and a real DuckDB database file (``duckdb:///path?table=NAME``)
reduced where it lives, equal to the same logs as a Parquet file, refused like ``validate`` refuses the file,
and left unchanged. tests/test_warehouse_postgres.py runs the same against a real PostgreSQL server."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from offeval_core.cli import main
from offeval_core.engine.warehouse import is_database_url, parse_table_url
from offeval_core.errors import SpecError
from offeval_core.moments_io import read_moments
from offeval_core.simulate import preset_config, simulate

SECRET = "hunter2-Zq9"


@pytest.mark.parametrize("text, expected", [
    ("postgresql://me@db:5432/feeds?table=impressions", True),
    ("postgres://db/feeds?table=impressions", True),
    ("duckdb:///data/logs.duckdb?table=impressions", True),
    ("mysql://me@db/feeds?table=impressions", True),  # an Ibis backend, installed or not
    ("anything://host/path?table=t", True),  # a table parameter: refused below with the reason
    ("s3a://feeds/logs/2026-03/", False),
    ("hdfs:///logs/", False),
    ("data/logs.parquet", False),
    ("logs/*.parquet", False),
])
def test_which_inputs_are_database_urls(text, expected):
    assert is_database_url(text) is expected


@pytest.mark.parametrize("text, message", [
    (f"postgresql://me:{SECRET}@db:5432/feeds",
     "postgresql://***@db:5432/feeds: name the table once, as ?table=NAME (or ?table=schema.NAME)"),
    (f"postgresql://me:{SECRET}@db:5432/feeds?table=a&table=b",
     "postgresql://***@db:5432/feeds: name the table once, as ?table=NAME (or ?table=schema.NAME)"),
    (f"postgresql://me:{SECRET}@db/feeds?table=impressions;DROP TABLE x",
     "postgresql://***@db/feeds: the table must be an identifier (letters, digits and _, not starting with a digit, "
     "at most 63 characters), or schema.identifier"),
    ("postgresql://db/feeds?table=a.b.c",
     "postgresql://db/feeds: the table must be an identifier (letters, digits and _, not starting with a digit, "
     "at most 63 characters), or schema.identifier"),
    ("postgresql://db/feeds?table=1st", "postgresql://db/feeds: the table must be an identifier (letters, digits "
     "and _, not starting with a digit, at most 63 characters), or schema.identifier"),
    ('postgresql://db/feeds?table="quoted"', "postgresql://db/feeds: the table must be an identifier (letters, "
     "digits and _, not starting with a digit, at most 63 characters), or schema.identifier"),
    (f"postgresql://db/feeds?table={'t' * 64}", "postgresql://db/feeds: the table must be an identifier (letters, "
     "digits and _, not starting with a digit, at most 63 characters), or schema.identifier"),
    (f"mysql://me:{SECRET}@db/feeds?table=impressions",
     "mysql://***@db/feeds: the Ibis backend 'mysql' is not installed here (pip install 'ibis-framework[mysql]')"),
    (f"pyspark://me:{SECRET}@x?table=t", "pyspark://***@x: 'pyspark' holds no tables a URL can name; for Spark, "
     "give Parquet files with --engine spark --spark-master URL"),
    (f"foo://me:{SECRET}@h/db?table=t", "foo://***@h/db: 'foo' is not the scheme of an Ibis backend; a database URL "
     "starts with one of: athena, bigquery, clickhouse, databricks, datafusion, druid, duckdb, exasol, flink, impala, "
     "materialize, mssql, mysql, oracle, polars, postgres, pyspark, risingwave, singlestoredb, snowflake, sqlite, "
     "trino (postgresql:// for PostgreSQL)"),
    (f"postgresql://me:{SECRET}@db:notaport/feeds?table=t",
     "the database URL cannot be read (expected scheme://user@host:port/database?table=NAME)"),
])
def test_a_bad_url_is_refused_with_its_reason_and_without_credentials(text, message):
    with pytest.raises(SpecError) as err:
        parse_table_url(text)
    assert str(err.value) == message
    assert SECRET not in str(err.value) and SECRET not in repr(err.value.source)


def test_the_url_shown_keeps_no_credentials_nor_other_parameters():
    u = parse_table_url(f"postgresql://me:{SECRET}@db.example:5432/feeds?sslpassword={SECRET}x&table=public.imp"
                        f"&options=-c%20search_path%3Dx")
    assert (u.backend, u.database, u.table) == ("postgres", "public", "imp")
    assert str(u) == u.shown == "postgresql://***@db.example:5432/feeds?table=public.imp"
    assert SECRET not in repr(u)
    assert "table=" not in u.url and SECRET in u.url  # the connection gets them, nothing else does
    assert u.scrub(f'failed for user "me" with {SECRET} and {SECRET}x') == 'failed for user "***" with *** and ***'
    assert str(parse_table_url(f"postgresql://me:{SECRET}@[::1]:5433/feeds?table=imp")) == (
        "postgresql://***@[::1]:5433/feeds?table=imp")


def test_a_connection_error_names_the_url_without_credentials(capsys, tmp_path):
    """Port 1 on 127.0.0.1 refuses the connection at once; the driver's message is quoted with the user and the
    password blanked out."""
    pytest.importorskip("psycopg")
    user = "ranker_u"
    url = f"postgresql://{user}:{SECRET}@127.0.0.1:1/feeds?table=impressions"
    assert main(["reduce", url, "--out", str(tmp_path / "m.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("offeval reduce: error: postgresql://***@127.0.0.1:1/feeds?table=impressions: cannot "
                          "connect to the database (psycopg.OperationalError: ")
    assert "Connection refused" in err and SECRET not in err and user not in err
    assert not (tmp_path / "m.parquet").exists()


@pytest.fixture(scope="module")
def logs():
    return simulate(preset_config("small", n_days=2, n_experiments=2, effects=("positive", "negative")), seed=5).logs


def _database(path, **tables) -> str:
    con = duckdb.connect(str(path))
    for name, frame in tables.items():
        con.register("frame", frame)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
        con.unregister("frame")
    con.close()
    return str(path)


def test_a_duckdb_table_by_url_equals_the_same_logs_as_a_file(logs, tmp_path, capsys):
    db = _database(tmp_path / "feeds.duckdb", impressions=logs)
    logs.to_parquet(tmp_path / "logs.parquet", index=False)
    before = (tmp_path / "feeds.duckdb").read_bytes()
    argv = ["--rewards", "like,watch_time", "--discounts", "log2", "--clips", "1,16,inf", "--policies",
            "treatment,cand_02"]
    assert main(["reduce", f"duckdb://{db}?table=impressions", "--out", str(tmp_path / "db.parquet"), *argv]) == 0
    assert main(["reduce", str(tmp_path / "logs.parquet"), "--out", str(tmp_path / "file.parquet"), *argv]) == 0
    capsys.readouterr()
    a, b = read_moments(tmp_path / "file.parquet"), read_moments(tmp_path / "db.parquet")
    assert len(a.offline) == len(b.offline) > 0 and a.offline["n"].equals(b.offline["n"])
    for col in ("sum", "m2", "sum_diff", "den_sum"):
        np.testing.assert_allclose(b.offline[col].to_numpy(float), a.offline[col].to_numpy(float), rtol=1e-12)
    settings = json.loads(pq.read_schema(tmp_path / "db.parquet").metadata[b"offeval"])["settings"]
    assert (settings["logs"], settings["engine"]) == (f"duckdb://{db}?table=impressions", "duckdb")
    assert (tmp_path / "feeds.duckdb").read_bytes() == before  # opened read-only: the database is unchanged


def test_a_duckdb_table_is_refused_with_validates_problems(tmp_path, capsys):
    frame = pd.DataFrame({"session_id": ["a", "a", "b"], "rank": [1, 0, 1], "like": [1.0, 0.0, 1.0]})
    db = _database(tmp_path / "bad.duckdb", impressions=frame)
    frame.to_parquet(tmp_path / "bad.parquet", index=False)
    assert main(["validate", str(tmp_path / "bad.parquet")]) == 2
    assert capsys.readouterr().err.splitlines()[1] == ("  - column 'rank' must hold positive integers (1 = top "
                                                       "position); found 0 at data row 2")
    assert main(["reduce", f"duckdb://{db}?table=impressions", "--out", str(tmp_path / "m.parquet")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"offeval reduce: error: duckdb://{db}?table=impressions: 1 problem(s) in the logs:",
        "  - column 'rank' must hold positive integers (1 = top position); found 0 at 1 row"]


def test_a_missing_database_file_or_table_changes_nothing(logs, tmp_path, capsys):
    missing = tmp_path / "typo.duckdb"
    assert main(["reduce", f"duckdb://{missing}?table=impressions", "--out", str(tmp_path / "m.parquet")]) == 2
    assert "cannot connect to the database" in capsys.readouterr().err
    assert not missing.exists()  # read-only: a typo creates no database
    db = _database(tmp_path / "feeds.duckdb", impressions=logs)
    assert main(["reduce", f"duckdb://{db}?table=impression", "--out", str(tmp_path / "m.parquet")]) == 2
    assert capsys.readouterr().err == (f"offeval reduce: error: duckdb://{db}?table=impression: no table "
                                       "'impression' in the database\n")
    assert main(["reduce", f"duckdb://{db}?table=impressions", "--engine", "spark", "--out",
                 str(tmp_path / "m.parquet")]) == 2
    assert capsys.readouterr().err == (f"offeval reduce: error: duckdb://{db}?table=impressions: a database table "
                                       "is reduced by its own database; --engine spark applies to Parquet files\n")
    assert not (tmp_path / "m.parquet").exists()


def test_a_table_over_the_column_limit_is_refused(logs, tmp_path, capsys, monkeypatch):
    db = _database(tmp_path / "feeds.duckdb", impressions=logs)
    monkeypatch.setenv("OFFEVAL_MAX_COLUMNS", "10")  # as --max-columns 10 sets it
    assert main(["reduce", f"duckdb://{db}?table=impressions", "--out", str(tmp_path / "m.parquet")]) == 2
    assert capsys.readouterr().err == (f"offeval reduce: error: duckdb://{db}?table=impressions: the table has 22 "
                                       "columns, more than the limit 10 (OFFEVAL_MAX_COLUMNS / --max-columns)\n")


def _team_table(tmp_path):
    """A team's export (its own column names, arm labels X / Y that only --arms maps) as a DuckDB table and as
    the same rows in a Parquet file."""
    from tests.export_fixtures import demo_sample, team_export

    export, _ = team_export(demo_sample(40))
    export["bucket"] = export["bucket"].map({"A": "X", "B": "Y"})
    export.to_parquet(tmp_path / "team.parquet", index=False)
    return _database(tmp_path / "team.duckdb", team=export), tmp_path / "team.parquet"


TEAM_MAP = "session_id=visit,rank=pos,day=date,experiment_id=test,arm=bucket,segment=user_type,rank__*=pos_*"


def test_a_table_takes_arms_and_reads_its_columns_as_a_file_does(tmp_path, capsys):
    """No --arms: the same question as for the file, nothing written; --arms control=X,treatment=Y and no
    --rewards: the rewards read as read_logs reads them, the same guesses said, the moments equal the file's."""
    db, parquet = _team_table(tmp_path)
    url = f"duckdb://{db}?table=team"
    grid = ["--map", TEAM_MAP, "--discounts", "log2", "--exposures", "log2", "--clips", "1,inf"]
    errs = {}
    for name, logs in (("table", url), ("file", str(parquet))):
        assert main(["reduce", logs, "--out", str(tmp_path / f"{name}0.parquet"), *grid]) == 2
        errs[name] = capsys.readouterr().err.replace(logs, "LOGS")
        assert not (tmp_path / f"{name}0.parquet").exists()
    assert "column 'arm' (your 'bucket') has the labels 'X', 'Y': say which label is the control" in errs["table"]
    assert errs["table"] == errs["file"]
    for name, logs in (("table", url), ("file", str(parquet))):
        assert main(["reduce", logs, "--out", str(tmp_path / f"{name}.parquet"), *grid,
                     "--arms", "control=X,treatment=Y"]) == 0
        errs[name] = capsys.readouterr().err.replace(logs, "LOGS")
    assert errs["table"] == errs["file"]
    a, b = read_moments(tmp_path / "file.parquet"), read_moments(tmp_path / "table.parquet")
    assert b.grid.rewards == a.grid.rewards == ("clicked", "completed")  # the video id column is not a reward
    assert b.grid.policies == a.grid.policies == ("current", "ranker_v2", "ranker_v3")
    assert set(b.online["arm"].astype(str)) == {"control", "treatment"}
    keys = ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip", "policy", "metric"]
    off_a, off_b = (m.offline.assign(day=m.offline["day"].astype(str)).sort_values(keys).reset_index(drop=True)
                    for m in (a, b))
    assert len(off_a) == len(off_b) > 0 and off_a[keys].astype(str).equals(off_b[keys].astype(str))
    assert off_a["n"].tolist() == off_b["n"].tolist()
    for col in ("sum", "m2", "co_den", "sum_diff", "m2_diff", "co_diff_den", "den_sum", "den_m2"):
        np.testing.assert_allclose(off_b[col].to_numpy(float), off_a[col].to_numpy(float), rtol=1e-9, atol=1e-12,
                                   err_msg=col)


def test_a_table_asks_what_validate_asks(tmp_path, capsys):
    """Two numeric columns neither named like a reward: the question and its hint as for a file; --reward
    answers it. A column that splits the sessions into A / B is the arm question; mapped, its labels are
    guessed and said."""
    n = 50
    df = pd.DataFrame({"session_id": [s for s in range(n) for _ in range(4)], "rank": [1, 2, 3, 4] * n,
                       "a": [float((s * 7 + r) % 2) for s in range(n) for r in range(4)],
                       "b": [float((s + r) % 3) for s in range(n) for r in range(4)]})
    arm = df.drop(columns="b").rename(columns={"a": "click"}).assign(
        bucket=["A" if s % 2 else "B" for s in range(n) for _ in range(4)], user_id=range(4 * n))
    url = "duckdb://{}?table={}".format(_database(tmp_path / "q.duckdb", amb=df, arm=arm), "{}")
    out = str(tmp_path / "m.parquet")
    assert main(["reduce", url.format("amb"), "--out", out]) == 2
    err = capsys.readouterr().err
    assert ("which columns are rewards? none is named like one (click, like, purchase, watch…) and 2 numeric "
            "columns could be: a, b") in err
    assert "offeval reduce: hint: name the rewards with --reward a --reward b" in err
    assert main(["reduce", url.format("amb"), "--out", out, "--reward", "a", "--reward", "b", "--clips", "1"]) == 0
    capsys.readouterr()
    assert read_moments(out).grid.rewards == ("a", "b")
    out2 = str(tmp_path / "m2.parquet")
    assert main(["reduce", url.format("arm"), "--out", out2]) == 2
    err = capsys.readouterr().err
    assert "column 'bucket' looks like the A/B arm (labels 'A' and 'B'" in err
    assert "hint: if bucket is the arm, map it with --map arm=bucket --arms control=A,treatment=B" in err
    assert main(["reduce", url.format("arm"), "--out", out2, "--map", "arm=bucket", "--clips", "1"]) == 0
    assert "offeval reduce: guessed arm labels of column 'bucket': A → control, B → treatment" in capsys.readouterr().err
    m = read_moments(out2)
    assert m.grid.rewards == ("click",)  # user_id, a different whole number on every row, is not a reward
    on = m.online.set_index("arm")
    assert on["n"].to_dict() == {"control": n // 2, "treatment": n // 2}
    assert on["sum"].to_dict() == pytest.approx({a: float(arm.loc[arm["bucket"] == label, "click"].sum())
                                                 for a, label in (("control", "A"), ("treatment", "B"))})
