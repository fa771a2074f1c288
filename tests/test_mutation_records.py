"""tools/mutation.py's committed records: mutmut's results of a module, packed per function, come back as the meta
file mutmut reads, so a fresh checkout continues a run instead of redoing it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("offeval_mutation_tool", ROOT / "tools" / "mutation.py")
mutation = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mutation  # (its dataclasses look their module up there)
_spec.loader.exec_module(mutation)

PREFIX = "offeval_core.importance.reduce"
FUNCTIONS = st.sampled_from(["x_estimate", "x__long_values", "xǁMomentsǁrequire", "x_f__g"])
CODES = st.one_of(st.none(), st.sampled_from([0, 1, 3, 5, 33, 36, -9, -11, -24, 152]))


@st.composite
def metas(draw):
    functions = draw(st.lists(FUNCTIONS, unique=True, min_size=1, max_size=4))
    hashes = {f: draw(st.text("0123456789abcdef", min_size=8, max_size=8)) for f in functions}
    codes = {}
    for f in functions:
        for i in range(1, draw(st.integers(0, 30)) + 1):
            codes[f"{PREFIX}.{f}__mutmut_{i}"] = draw(CODES)
    return {"exit_code_by_key": codes, "hash_by_function_name": hashes}


@given(metas())
def test_a_record_gives_back_every_mutants_exit_code_and_every_functions_hash(meta):
    packed = mutation.pack_record(meta, PREFIX)
    back = mutation.unpack_record(json.loads(json.dumps(packed)), PREFIX)  # as written to and read from the file
    assert back["exit_code_by_key"] == meta["exit_code_by_key"]
    assert back["hash_by_function_name"] == meta["hash_by_function_name"]
    assert set(back) == {"exit_code_by_key", "hash_by_function_name", "type_check_error_by_key",
                         "durations_by_key", "estimated_durations_by_key"}  # the keys mutmut's meta loader pops


def test_a_record_with_a_missing_mutant_number_is_refused():
    meta = {"exit_code_by_key": {f"{PREFIX}.x_f__mutmut_1": 1, f"{PREFIX}.x_f__mutmut_3": 0},
            "hash_by_function_name": {"x_f": "ab"}}
    try:
        mutation.pack_record(meta, PREFIX)
    except ValueError as exc:
        assert str(exc) == f"{PREFIX}.x_f: mutant numbers [1, 3] are not 1…2"
    else:
        raise AssertionError("a gap in the mutant numbers was packed")


def test_a_mutant_of_another_module_or_of_a_function_without_a_hash_is_refused():
    other = {"exit_code_by_key": {"offeval_core.stats.x_f__mutmut_1": 1}, "hash_by_function_name": {"x_f": "ab"}}
    unhashed = {"exit_code_by_key": {f"{PREFIX}.x_g__mutmut_1": 1}, "hash_by_function_name": {"x_f": "ab"}}
    for meta, message in [(other, f"offeval_core.stats.x_f__mutmut_1: not a mutant of {PREFIX}"),
                          (unhashed, f"{PREFIX}: mutants of functions without a hash: x_g")]:
        try:
            mutation.pack_record(meta, PREFIX)
        except ValueError as exc:
            assert str(exc) == message
        else:
            raise AssertionError(f"packed: {meta}")


def test_the_records_prefix_is_the_dotted_name_mutmut_gives_the_module():
    assert mutation._prefix(mutation.MODULES["importance-reduce"]) == PREFIX


def test_a_work_directory_without_results_starts_from_the_record_and_one_with_results_keeps_them(tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setattr(mutation, "RECORDS", tmp_path / "records")
    mod = mutation.MODULES["importance-reduce"]
    meta = {"exit_code_by_key": {f"{PREFIX}.x_f__mutmut_1": 1, f"{PREFIX}.x_f__mutmut_2": None},
            "hash_by_function_name": {"x_f": "ab"}}
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "importance-reduce.json").write_text(json.dumps(
        {"when": "2026-11-27 19:30", "mutants": 2, "not_run": 1, "tests": "t", "selection": [],
         "results": mutation.pack_record(meta, PREFIX)}))
    work = tmp_path / "work"
    record = mutation._seed_from_record("importance-reduce", mod, work)
    assert record is not None and record["tests"] == "t"
    seeded = json.loads((work / "mutants" / (mod.source + ".meta")).read_text())
    assert seeded["exit_code_by_key"] == meta["exit_code_by_key"]
    assert mutation._seed_from_record("importance-reduce", mod, work) is None  # results there: left as they are


def test_a_partial_run_counts_the_mutants_not_run_apart_from_its_rate(tmp_path):
    mod = mutation.MODULES["importance-reduce"]
    meta = {"exit_code_by_key": {f"{PREFIX}.x_f__mutmut_1": 1, f"{PREFIX}.x_f__mutmut_2": 36,
                                 f"{PREFIX}.x_g__mutmut_1": None, f"{PREFIX}.x_g__mutmut_2": None,
                                 f"{PREFIX}.x_g__mutmut_3": None},
            "hash_by_function_name": {"x_f": "ab", "x_g": "cd"}}
    (tmp_path / "mutants" / mod.source).parent.mkdir(parents=True)
    (tmp_path / "mutants" / (mod.source + ".meta")).write_text(json.dumps(meta))
    result = mutation._summarise("importance-reduce", mod, tmp_path)
    assert (result["total"], result["killed"], result["not_run"], result["survivors"]) == (2, 2, 3, [])


@given(st.lists(st.sampled_from(["estimate", "_long_values", "Moments.require", "f__g", "f"]), unique=True,
                min_size=1))
def test_the_functions_patterns_name_exactly_the_mutants_of_those_functions(functions):
    import fnmatch
    keys = [f"{PREFIX}.{f}__mutmut_{i}" for f in ["x_estimate", "x__long_values", "xǁMomentsǁrequire", "x_f__g",
                                                    "x_f", "x_fg"] for i in (1, 12)]
    patterns = mutation.function_patterns(PREFIX, functions)
    chosen = {k for k in keys if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    assert chosen == {k for k in keys if mutation._function(k) in functions}
