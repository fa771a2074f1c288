"""Memory budgets as a user writes them, DuckDB's share of a process's budget, and what the connection does with
the memory of a finished query (offeval_core.memory, engine.sources.connect)."""

from __future__ import annotations

import argparse

import pytest

from offeval_core.commands.argtypes import memory_size
from offeval_core.errors import SpecError
from offeval_core.memory import DUCKDB_SHARE, duckdb_memory_limit, memory_bytes


def test_memory_bytes_units_and_shares():
    assert memory_bytes("2GB") == 2 * 10**9 and memory_bytes("2gb") == 2 * 10**9
    assert memory_bytes("512MiB") == 512 * 2**20 and memory_bytes("1 TiB") == 2**40
    assert memory_bytes("3kB") == 3000 and memory_bytes("7b") == 7 and memory_bytes("0.5MB") == 500_000
    assert memory_bytes("80%", total=10_000) == 8000 and memory_bytes("100%", total=10_000) == 10_000
    assert 0 < memory_bytes("50%") < memory_bytes("100%")          # of the machine's memory
    for bad in ("lots", "2", "0GB", "-1GB", "101%", "2 GB extra", ""):
        with pytest.raises(SpecError) as err:
            memory_bytes(bad)
        assert str(err.value) == ("a memory size is a positive size with a unit such as 2GB or 512MiB, or a share "
                                  f"of the memory such as 80%, got {bad!r}")


def test_duckdb_gets_its_share_of_what_the_process_does_not_hold():
    assert DUCKDB_SHARE == 0.6
    assert duckdb_memory_limit("2GB", held=200 * 10**6) == "1080000000B"              # 0.6 · 1.8 GB
    assert duckdb_memory_limit("1GiB", held=2**28) == f"{int(0.6 * (2**30 - 2**28))}B"
    assert duckdb_memory_limit("50%", held=10**9, total=8 * 10**9) == "1800000000B"   # 0.6 · (4 − 1) GB
    # the smallest budget DuckDB runs in: 128 MiB for DuckDB beside what is held
    held = 300 * 2**20
    least = held + 128 * 2**20 / 0.6
    assert duckdb_memory_limit(f"{int(least) + 10}B", held=held) == f"{int(0.6 * (int(least) + 10 - held))}B"
    with pytest.raises(SpecError) as err:
        duckdb_memory_limit("400MB", held=held)
    # 0.6 · (400·10⁶ − 300·2²⁰) = 51 256 320 bytes = 48.9 MiB; 300 MiB + 128 MiB / 0.6 = 513.3 MiB
    assert str(err.value) == ("a memory budget of 400MB leaves DuckDB 49 MiB beside the 300 MiB this process "
                              "already holds; give at least 513 MiB")
    with pytest.raises(SpecError, match="leaves DuckDB 0 MiB beside the 300 MiB"):
        duckdb_memory_limit("100MB", held=held)


def test_the_command_line_type_keeps_a_budget_without_spaces():
    assert memory_size("2GB") == "2GB" and memory_size(" 2 GB ") == "2GB" and memory_size("80%") == "80%"
    with pytest.raises(argparse.ArgumentTypeError) as err:
        memory_size("lots")
    assert str(err.value) == ("must be a positive size with a unit such as 2GB or 512MiB, or a share of the memory "
                              "such as 80%, got 'lots'")


def test_a_connection_hands_a_finished_querys_memory_back():
    from offeval_core.engine.sources import connect

    con = connect(memory_limit="300MB").con
    assert con.sql("SELECT current_setting('allocator_background_threads')").fetchall()[0][0] is True
    assert con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0] == "286.1 MiB"


def test_reduce_with_a_budget_below_what_the_process_holds_is_refused_before_reading(tmp_path, capsys):
    import pandas as pd

    from offeval_core.cli import main

    logs = tmp_path / "logs.parquet"
    pd.DataFrame({"session_id": [1, 1], "rank": [1, 2], "click": [1, 0], "rank__t": [2, 1]}).to_parquet(logs)
    out = tmp_path / "m.parquet"
    assert main(["reduce", str(logs), "--out", str(out), "--memory-limit", "1MB"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("offeval reduce: error: a memory budget of 1MB leaves DuckDB 0 MiB beside the ")
    assert "MiB this process already holds; give at least " in err and not out.exists()
