"""``offeval reduce`` on a table of a real PostgreSQL server (Debian's PostgreSQL 15, started by the tests on
127.0.0.1 and a free port, tests/postgres_support.py): the moments equal DuckDB's on the same logs as a Parquet
file to 1e-9 (relative), on demo-like simulated logs and on a table with its own column names; a bad table is
refused with the problems ``offeval validate`` lists for the same data as a file (a table has no row order, so
where validate names data rows the table's message gives their number); the URL's credentials appear in no
message and in no file; the database is left as it was (the reduce creates only temporary tables)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from postgres_support import PASSWORD, USER, postgres_server, server_processes, skip_reason
from user_names import user_named

from offeval_core.cli import main
from offeval_core.moments_io import read_moments
from offeval_core.simulate import preset_config, simulate
from offeval_core.simulate_config import DEMO_EFFECTS

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres"),
              pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

OFF_KEYS = ["experiment_id", "day", "arm", "segment", "reward", "discount", "exposure", "clip", "policy", "metric"]
ON_KEYS = ["experiment_id", "day", "arm", "segment", "reward"]
OFF_VALUES = ["n", "sum", "m2", "co_den", "sum_diff", "m2_diff", "co_diff_den", "den_sum", "den_m2"]


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("psycopg")
    with postgres_server() as s:
        yield s
    assert not server_processes(s.root), "the server outlived its fixture"
    assert not s.root.exists()


@pytest.fixture(scope="module")
def demo_like():
    """Demo-shaped logs (12 target policies, binary and graded rewards, drift, buried fresh items), smaller."""
    config = preset_config("demo", n_experiments=5, effects=DEMO_EFFECTS[:5], sessions_per_arm_day=150, n_days=3)
    return simulate(config, seed=11).logs


def _tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_schema || '.' || table_name FROM information_schema.tables "
                                      "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")}


# A co-moment near 0 is the rounding of sums of products as large as its Cauchy-Schwarz bound √(M2_x · M2_y):
# two engines that add in another order give ±1e-16 there (2.0 relative to each other). Its difference is
# measured against that bound (the target's M2 and the denominator's), every other value against itself.
CO_BOUND = {"co_den": ("m2", "den_m2"), "co_diff_den": ("m2", "den_m2")}


def _max_rel(x: np.ndarray, y: np.ndarray, floor: np.ndarray | None = None) -> float:
    both = ~(np.isnan(x) & np.isnan(y))
    assert np.array_equal(np.isnan(x), np.isnan(y))
    x, y = x[both], y[both]
    scale = np.maximum(np.abs(x), np.abs(y))
    if floor is not None:
        scale = np.maximum(scale, np.nan_to_num(floor[both]))
    return float(np.max(np.where(scale > 0, np.abs(x - y) / np.where(scale > 0, scale, 1), 0.0), initial=0.0))


def assert_same_moments(a, b, *, rename_rewards: dict[str, str] | None = None) -> float:
    """Every key equal and every moment within 1e-9 (relative); returns the largest relative difference."""
    off_b, on_b = b.offline, b.online
    if rename_rewards:
        off_b = off_b.assign(reward=off_b["reward"].replace(rename_rewards))
        on_b = on_b.assign(reward=on_b["reward"].replace(rename_rewards))
    off_a = a.offline.sort_values(OFF_KEYS, kind="stable").reset_index(drop=True)
    off_b = off_b.sort_values(OFF_KEYS, kind="stable").reset_index(drop=True)
    on_a = a.online.sort_values(ON_KEYS, kind="stable").reset_index(drop=True)
    on_b = on_b.sort_values(ON_KEYS, kind="stable").reset_index(drop=True)
    assert len(off_a) == len(off_b) and len(on_a) == len(on_b)
    assert off_a[OFF_KEYS].astype(str).equals(off_b[OFF_KEYS].astype(str))
    assert on_a[ON_KEYS].astype(str).equals(on_b[ON_KEYS].astype(str))
    worst = 0.0
    for col in OFF_VALUES:
        floor = None
        if col in CO_BOUND:
            m2x, m2y = CO_BOUND[col]
            floor = np.sqrt(np.abs(off_a[m2x].to_numpy(float) * off_a[m2y].to_numpy(float)))
        worst = max(worst, _max_rel(off_a[col].to_numpy(float), off_b[col].to_numpy(float), floor))
    for col in ("n", "sum", "m2"):
        worst = max(worst, _max_rel(on_a[col].to_numpy(float), on_b[col].to_numpy(float)))
    assert worst <= 1e-9, worst
    assert np.array_equal(off_a["n"].to_numpy(), off_b["n"].to_numpy())  # session counts exactly
    assert (off_a["sum"] > 0).any() and (off_a["sum_diff"].abs() > 0).any()  # not two empty tables
    return worst


def test_postgres_moments_equal_duckdb_on_demo_like_logs(server, demo_like, tmp_path, capsys):
    """The default grid (every reward × 12 policies × D ∈ {pbm, log2} × 14 clip values × DCG / nDCG)."""
    server.load("impressions", demo_like)
    path = tmp_path / "logs.parquet"
    demo_like.to_parquet(path, index=False)
    with server.connect() as con:
        before = _tables(con)
    assert main(["reduce", server.url("impressions"), "--out", str(tmp_path / "pg.parquet")]) == 0
    assert main(["reduce", str(path), "--out", str(tmp_path / "duck.parquet")]) == 0
    out = capsys.readouterr()
    with server.connect() as con:
        assert _tables(con) == before  # nothing left in the database
    pg, duck = read_moments(tmp_path / "pg.parquet"), read_moments(tmp_path / "duck.parquet")
    assert sorted(pg.grid.rewards) == ["like", "watch_complete", "watch_time"] and len(pg.grid.policies) == 12
    assert len(pg.offline) == len(duck.offline) > 10_000
    worst = assert_same_moments(duck, pg)
    print(f"demo-like logs: {len(demo_like):,} rows, {len(pg.offline):,} moment rows, max rel diff {worst:.2e}")
    # the file's metadata names the table without credentials; nothing printed has them
    settings = json.loads(pq.read_schema(tmp_path / "pg.parquet").metadata[b"offeval"])["settings"]
    assert settings["logs"] == f"postgresql://***@127.0.0.1:{server.port}/feeds?table=impressions"
    assert settings["engine"] == "postgres"
    raw = (tmp_path / "pg.parquet").read_bytes()
    for secret in (PASSWORD, USER):
        assert secret.encode() not in raw and secret not in out.out + out.err


def test_postgres_table_with_its_own_names_equals_duckdb_on_the_schema_file(server, demo_like, tmp_path,
                                                                           monkeypatch):
    """Columns visit, pos, clicked, completed, date, test, variant, user_type, pos_<policy>; arm labels
    'Control' / ' TREATMENT ' (read as control / treatment); the password from PGPASSWORD, not the URL."""
    named = user_named(demo_like)
    named["variant"] = named["variant"].map({"control": "Control", "treatment": " TREATMENT "})
    server.load("user_export", named)
    schema_file = tmp_path / "schema.parquet"
    demo_like.drop(columns=["item_id", "watch_time"]).to_parquet(schema_file, index=False)
    mapping = ("session_id=visit,rank=pos,rank__*=pos_*,arm=variant,day=date,experiment_id=test,"
               "segment=user_type")
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    argv = ["--clips", "1,4,64,inf", "--discounts", "pbm,log2", "--policies", "production,cand_03"]
    assert main(["reduce", server.url("user_export", password=None), "--map", mapping, "--out",
                 str(tmp_path / "pg.parquet"), *argv]) == 0
    assert main(["reduce", str(schema_file), "--out", str(tmp_path / "duck.parquet"), *argv]) == 0
    pg, duck = read_moments(tmp_path / "pg.parquet"), read_moments(tmp_path / "duck.parquet")
    assert sorted(pg.online["arm"].unique()) == ["control", "treatment"]
    assert sorted(pg.grid.rewards) == ["clicked", "completed"]
    assert_same_moments(duck, pg, rename_rewards={"clicked": "like", "completed": "watch_complete"})


def test_postgres_table_takes_arms_and_asks_what_validate_asks(server, tmp_path, capsys):
    """A team's export with arm labels X / Y (no common pair): without --arms the table is refused with the
    question the same rows as a Parquet file get, and nothing is written; with --arms control=X,treatment=Y
    and no --rewards the rewards are read as read_logs reads them and the moments equal DuckDB's on the file
    to 1e-9."""
    from tests.export_fixtures import demo_sample, team_export

    export, _ = team_export(demo_sample(40))
    export["bucket"] = export["bucket"].map({"A": "X", "B": "Y"})
    server.load("team", export)
    parquet = tmp_path / "team.parquet"
    export.to_parquet(parquet, index=False)
    url = server.url("team")
    argv = ["--map", "session_id=visit,rank=pos,day=date,experiment_id=test,arm=bucket,segment=user_type,"
            "rank__*=pos_*", "--discounts", "pbm,log2", "--clips", "1,4,inf"]
    errs = {}
    shown = f"postgresql://***@127.0.0.1:{server.port}/feeds?table=team"  # the URL without its credentials
    for name, logs, said in (("pg", url, shown), ("duck", str(parquet), str(parquet))):
        assert main(["reduce", logs, "--out", str(tmp_path / f"{name}0.parquet"), *argv]) == 2
        errs[name] = capsys.readouterr().err.replace(said, "LOGS")
        assert not (tmp_path / f"{name}0.parquet").exists()
    assert errs["pg"] == errs["duck"]
    assert "column 'arm' (your 'bucket') has the labels 'X', 'Y': say which label is the control" in errs["pg"]
    assert PASSWORD not in errs["pg"] and USER not in errs["pg"]
    for name, logs in (("pg", url), ("duck", str(parquet))):
        assert main(["reduce", logs, "--out", str(tmp_path / f"{name}.parquet"), *argv,
                     "--arms", "control=X,treatment=Y"]) == 0
    capsys.readouterr()
    pg, duck = read_moments(tmp_path / "pg.parquet"), read_moments(tmp_path / "duck.parquet")
    assert pg.grid.rewards == duck.grid.rewards == ("clicked", "completed")  # the video ids are not a reward
    assert sorted(pg.online["arm"].astype(str).unique()) == ["control", "treatment"]
    assert_same_moments(duck, pg)


BASE = {"session_id": ["a", "a", "b", "b", "c"], "rank": [1, 2, 1, 2, 1], "like": [1.0, 0.0, 1.0, 1.0, 0.0],
        "arm": ["control", "control", "treatment", "treatment", "control"], "rank__new": [2, 1, 1, 2, 1]}
BAD = {  # name: (the columns that replace BASE's, or a column to drop; the table's problem line, by hand)
    "rank 0": ({"rank": [1, 0, 1, 2, 1]},
               "column 'rank' must hold positive integers (1 = top position); found 0 at 1 row"),
    "duplicate (session, rank)": ({"rank": [1, 2, 1, 1, 1]},
                                  "each (session_id, rank) must appear once, found duplicates: session 'b' rank 1 "
                                  "(2 rows)"),
    "missing column": ("rank", "missing required column 'rank' (columns found: session_id, like, arm, rank__new); "
                               "if your logs call it differently, map your column to 'rank'"),
    "reward as text, not a number": ({"like": ["1", "yes", "1", "1", "0"]},
                                     "reward column 'like' must be numeric; found 'yes' at 1 row"),
}


def _positions_as_counts(line: str) -> str:
    """validate's problem line for a table without row order: 'data rows 3, 9' → '2 rows', '(data rows 1 and 2)'
    of a repeated pair → '(2 rows)'."""
    line = re.sub(r"\(data rows \d+ and \d+\)", "(2 rows)", line)

    def count(m):
        n = len(m.group(1).split(", ")) + int(m.group(2) or 0)
        return f"{n:,} row{'s' if n != 1 else ''}"

    return re.sub(r"data rows? ((?:\d+, )*\d+)(?: and (\d+) more)?", count, line)


def _problems(err: str) -> list[str]:
    return [line[4:] for line in err.splitlines() if line.startswith("  - ")]


@pytest.mark.parametrize("case", list(BAD))
def test_postgres_refuses_a_bad_table_with_validates_problems(server, tmp_path, capsys, case):
    change, by_hand = BAD[case]
    frame = pd.DataFrame(BASE).drop(columns=change) if isinstance(change, str) else pd.DataFrame({**BASE, **change})
    table = re.sub(r"\W+", "_", case)
    server.load(table, frame)
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path, index=False)
    assert main(["validate", str(path)]) == 2
    expected = _problems(capsys.readouterr().err)
    out = tmp_path / "m.parquet"
    assert main(["reduce", server.url(table), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    got = _problems(err)
    assert got and got == [_positions_as_counts(p) for p in expected], (got, expected)
    if by_hand is not None:
        assert got == [by_hand]
    first = err.splitlines()[0]
    assert first == (f"offeval reduce: error: postgresql://***@127.0.0.1:{server.port}/feeds?table={table}: "
                     f"{len(got)} problem(s) in the logs:")
    assert PASSWORD not in err and USER not in err and not out.exists()


def test_postgres_text_that_is_not_a_number_is_read_as_read_logs_reads_it(server):
    """PostgreSQL's cast of text to a number stops the query at the first text that is not one; offeval casts
    only text shaped like a number, through NUMERIC, and rounds beyond the double range as pandas does."""
    import ibis

    from offeval_core.engine.dialects import GuardedCastColumns
    from offeval_core.log_rules import NumpyColumns

    texts = ["1", " 2.5 ", "-0.125", "+3", "1.", ".5", "1e5", "1E-2", "inf", "-Infinity", "INF", "1e400", "-1e400",
             "1e-400", "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "1.7976931348623157e308",
             "1.7976931348623158079e308", "1.797693134862315808e308", "1.7976931348623159e308",
             "nan", "NaN", "abc", "", " ", "1_000", "0x10", "1e", "e5", "--1", "1.2.3", "1" * 400, "9" * 1200, "." + "0" * 14_000 + "1", None]
    server.load("texts", pd.DataFrame({"i": range(len(texts)), "t": texts}))
    con = ibis.postgres.connect(host="127.0.0.1", port=server.port, user=USER, password=PASSWORD,
                                database="feeds")
    t = con.table("texts")
    values, _, non_number = GuardedCastColumns.numeric(t["t"])
    got = con.to_pyarrow(t.select("i", v=values, bad=non_number).order_by("i")).to_pandas()
    want_values, _, want_bad = NumpyColumns.numeric(pd.Series(texts, dtype=object))
    np.testing.assert_array_equal(got["v"].to_numpy(float), want_values)  # NaN where either has none
    np.testing.assert_array_equal(got["bad"].fillna(False).to_numpy(bool), want_bad)
    # the edges of the double range are in the list: 1.797693134862315808e308 is past DBL_MAX + ½ ulp (inf),
    # 2.4703282292062327e-324 below half the smallest subnormal (0), the values next to them are not
    assert np.isinf(want_values).sum() == 9 and (want_values == 0).sum() == 3
    assert want_values[texts.index("2.4703282292062328e-324")] == 5e-324
    # beyond 15 000 characters text is not read as a number (pandas reads this one as 0)
    long = con.to_pyarrow(GuardedCastColumns.numeric(ibis.literal("." + "0" * 15_000 + "1"))[2]).as_py()
    assert long is True
    con.disconnect()
