"""Mutation testing of the formula modules with mutmut, module by module, incrementally.

Each module (one source file) has its own test selection (``MODULES``): the tests that pin its formulas, fast
enough that every mutant of the module runs in minutes on two cores. A module is run in its own work
directory ``.mutation/<module>/`` (gitignored) holding mutmut's copy of the package and its results; mutmut
runs a mutant against the selected tests that call the mutated function (``pytest -x``, Hypothesis ``ci``
profile). A mutant is *killed* when a test fails or times out.

Incremental: ``.mutation/state.json`` keeps, per module, a hash of the module's source and of its test files
(and of this file's settings for it); a module whose hash has not changed is not run again and its recorded
result is reported. Within a module that is run again, mutmut itself reruns only the mutants of functions
whose source changed; when only the tests changed, the previous survivors are run again too.

    make mutate                              # every module whose source or tests changed
    make mutate MODULE=stats                 # one module (ids: --list)
    .venv/bin/python tools/mutation.py --report          # the recorded rates and survivors, no run
    .venv/bin/python tools/mutation.py stats --full      # rerun every mutant of a module

Not part of ``make test`` or CI. Survivors that are equivalent mutants are listed with their reason in
``EQUIVALENT`` (keyed by module, function and the changed line, so the key survives unrelated edits); every
other survivor is reported as untriaged. docs/mutation.md records the rates and the triage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".mutation"
STATE = WORK / "state.json"
# Each module's mutant results, committed: a checkout without ``.mutation/`` (a fresh clone) starts a module's run
# from them, so a run stopped part-way (``--record``) or done on another machine is continued, not redone; mutmut
# itself runs again every mutant of a function whose source changed since (it compares each function's hash).
RECORDS = ROOT / "tools" / "mutation_records"
BIN = Path(sys.executable).parent

# Lines whose mutants say nothing about a formula: the text of an error message or of a user-facing sentence
# (a string literal continuing on its own line) and raise statements (their messages are tested by the
# input-validation suites, not here).
DO_NOT_MUTATE_PATTERNS = [r"^\s*raise\s", r"""^\s*[rbfu]{0,2}"[^"]*"\s*[,)+]*\s*$""",
                          r"""^\s*[rbfu]{0,2}'[^']*'\s*[,)+]*\s*$"""]
PYTEST_ARGS = ["-p", "no:cacheprovider", "-m", "not slow and not browser and not spark"]
# With doctests in a module's selection: mutmut runs each mutant against test ids without the selection's
# arguments, so ``--doctest-modules`` must be among the arguments of every run, or pytest does not find a
# doctest id ("not found", exit 4, which the forked worker does not survive). mutmut's copy of a function
# keeps its docstring, so every mutant would also carry a copy of the doctest: ``-k`` leaves them out (the
# function's own doctest runs the mutant through mutmut's trampoline).
DOCTEST_ARGS = ["--doctest-modules", "-k", "not __mutmut_"]
# mutmut runs a mutant's tests fastest first and stops at the first failure, timing each test by its call alone;
# with this plugin a test's time also counts the fixtures it uses (see tools/mutmut_timing.py; ``timed`` modules)
TIMING_ARGS = ["-p", "mutmut_timing"]

_T = "tests/"


@dataclass(frozen=True)
class Module:
    source: str
    tests: tuple[str, ...]
    timed: bool = False
    """mutmut orders a mutant's tests by call duration plus the setup of the fixtures each uses
    (tools/mutmut_timing.py): for selections where slow module-scoped fixtures back tests whose own call is short."""


def _m(source: str, *tests: str, timed: bool = False) -> Module:
    return Module(source, tuple(t if t.startswith(("tests/", "offeval_core/", "--")) else _T + t for t in tests),
                  timed)


DOCTEST = "--doctest-modules"

MODULES: dict[str, Module] = {
    # (not the tests of the line a warning points at: under mutmut the trampoline's frames, outside the package,
    # sit between the package and the caller)
    "stats": _m("offeval_core/stats.py", "test_stats.py", "test_formulas.py",
                "--deselect=tests/test_stats.py::test_the_precision_warning_points_at_the_line_that_asked_for_the_ratio"),
    "estimators": _m("offeval_core/estimators.py", "test_formulas.py", "test_worked_examples.py", "test_stats.py",
                     "test_one_place.py"),
    "arms": _m("offeval_core/arms.py", "test_arms.py", "test_formulas.py", "test_one_place.py", DOCTEST,
               "offeval_core/arms.py"),
    # the security suite's bad-input table and its restricted-table reads (not its slow CLI round trips)
    "discounts": _m("offeval_core/discounts.py", "test_discounts.py", "test_security_inputs.py::test_bad_input",
                    "test_security_inputs.py::test_data_directory_and_registered_tables_are_readable_when_restricted",
                    DOCTEST, "offeval_core/discounts.py"),
    "engine-kernel": _m("offeval_core/engine/kernel.py", "test_formulas.py", "test_worked_examples.py",
                        "test_engine.py", "test_engine_compiled.py", DOCTEST, "offeval_core/engine/kernel.py"),
    "engine-per-session": _m("offeval_core/engine/per_session.py", "test_formulas.py", "test_engine.py",
                             "test_worked_examples.py", "test_engine_compiled.py"),
    # (test_engine_compiled.py: reduce and prepare of a Source, which reach prepare, _prepare and
    # _check_source_names; _session_counts needs a source without counts, a Parquet one, which it has not)
    "engine-reduction": _m("offeval_core/engine/reduction.py", "test_formulas.py", "test_engine.py",
                           "test_worked_examples.py", "test_engine_compiled.py"),
    "engine-lookups": _m("offeval_core/engine/lookups.py", "test_formulas.py", "test_engine.py"),
    "engine-grid": _m("offeval_core/engine/grid.py", "test_engine.py", "test_formulas.py"),
    "importance-reduce": _m("offeval_core/importance/reduce.py", "test_importance_reduce_exact.py", "test_formulas.py",
                            "test_importance.py", "test_importance_keys.py", "test_ncis_session_scale.py",
                            "test_importance_point_ncis.py", "test_importance_normalisation.py"),
    "importance-weights": _m("offeval_core/importance/weights.py", "test_formulas.py", "test_importance.py",
                             "test_ncis_session_scale.py", "test_importance_weights.py"),
    "importance-bootstrap": _m("offeval_core/importance/bootstrap.py", "test_formulas.py", "test_importance.py",
                               "test_importance_keys.py", "test_importance_normalisation.py",
                               "test_importance_estimate.py"),
    "importance-normalisation": _m("offeval_core/importance/normalisation.py", "test_importance_normalisation.py",
                                   "test_ncis_session_scale.py", "test_importance_point_ncis.py",
                                   "test_importance_estimate.py", DOCTEST,
                                   "offeval_core/importance/normalisation.py",
                                   # (the warning it checks is attributed to mutmut's trampoline, outside the package)
                                   "--deselect=tests/test_importance_estimate.py::"
                                   "test_estimator_warnings_point_at_the_callers_line"),
    "importance-estimate": _m("offeval_core/importance/estimate.py", "test_importance.py", "test_formulas.py",
                              "test_importance_estimate.py",
                              "--deselect=tests/test_importance_estimate.py::"
                              "test_estimator_warnings_point_at_the_callers_line"),
    "importance-keys": _m("offeval_core/importance/keys.py", "test_importance_keys.py"),
    "importance-strata": _m("offeval_core/importance/strata.py", "test_importance.py", "test_importance_strata.py"),
    "importance-counterexample": _m("offeval_core/importance/counterexample.py", "test_importance.py",
                                    "test_importance_counterexample.py"),
    "slate-weights": _m("offeval_core/slate/weights.py", "test_slate_estimators.py", "test_slate_dr_exact.py",
                        DOCTEST, "offeval_core/slate/weights.py"),
    "slate-estimators": _m("offeval_core/slate/estimators.py", "test_slate_estimators_exact.py",
                           "test_slate_estimators.py", "test_slate_dr_exact.py", "test_slate_adaptive.py"),
    "slate-kernels": _m("offeval_core/slate/kernels.py", "test_slate_estimators.py", "test_slate_dr_exact.py",
                        "test_slate_adaptive.py"),
    "slate-dr": _m("offeval_core/slate/dr.py", "test_slate_dr_exact.py", "test_slate_estimators.py"),
    "slate-adaptive": _m("offeval_core/slate/adaptive.py", "test_slate_adaptive.py"),
    "heldout-metrics": _m("offeval_core/heldout/metrics.py", "test_heldout_metrics.py", "test_heldout_metrics_exact.py",
                          DOCTEST,
                          "offeval_core/heldout/metrics.py"),
    "heldout-mnar": _m("offeval_core/heldout/mnar.py", "test_heldout_mnar.py", "test_formulas.py", DOCTEST,
                       "offeval_core/heldout/mnar.py"),
    "agreement": _m("offeval_core/agreement.py", "test_heldout_agreement.py", DOCTEST,
                    "offeval_core/agreement.py"),
    "intervals": _m("offeval_core/intervals.py", "test_intervals.py", DOCTEST, "offeval_core/intervals.py"),
    "multiple": _m("offeval_core/multiple.py", "test_multiple.py", DOCTEST, "offeval_core/multiple.py"),
    "analyses-decisions": _m("offeval_core/analyses/decisions.py", "test_analyses_decisions.py", "test_formulas.py",
                             "test_decisions_exact.py", DOCTEST, "offeval_core/analyses/decisions.py"),
    # (not the test that greps the source tree for calls: under mutmut the source holds every mutant's copy of them)
    "analyses-clip-tuning": _m("offeval_core/analyses/clip_tuning.py", "test_analyses_clip_tuning.py",
                               "--deselect=tests/test_analyses_clip_tuning.py::"
                               "test_no_second_clip_recommendation_in_product_code",
                               DOCTEST, "offeval_core/analyses/clip_tuning.py"),
    # (test_correlation_exact.py: every cell of moments written by hand, in a second; the world-backed tests stay
    # and run only for the mutants it does not kill)
    "analyses-correlation": _m("offeval_core/analyses/correlation.py", "test_correlation_exact.py",
                               "test_analyses_correlation.py", timed=True),
    # (the test files that import correlation_diff, and its doctests; not the test that reads the repository's
    # data/logs.parquet sample by a relative path, which mutmut's copy of the tree does not hold)
    "analyses-correlation-diff": _m("offeval_core/analyses/correlation_diff.py", "test_analyses_correlation.py",
                                    "test_correlation_takeaway.py",
                                    "--deselect=tests/test_correlation_takeaway.py::"
                                    "test_strong_r0_rows_do_not_speak_for_the_target_policy",
                                    DOCTEST, "offeval_core/analyses/correlation_diff.py"),
    "analyses-correlation-clip": _m("offeval_core/analyses/correlation_clip.py",
                                    "test_analyses_correlation_clip.py", DOCTEST,
                                    "offeval_core/analyses/correlation_clip.py"),
    # (test_analyses_multiple.py: the adjusted detections, against statsmodels)
    "analyses-sensitivity": _m("offeval_core/analyses/sensitivity.py", "test_analyses_sensitivity.py",
                               "test_analyses_multiple.py", "test_sensitivity_exact.py", DOCTEST,
                               "offeval_core/analyses/sensitivity.py"),
    "analyses-dcg-vs-ndcg": _m("offeval_core/analyses/dcg_vs_ndcg.py", "test_analyses_dcg_vs_ndcg.py",
                               "test_dcg_vs_ndcg_exact.py", DOCTEST, "offeval_core/analyses/dcg_vs_ndcg.py"),
    "analyses-assumptions": _m("offeval_core/analyses/assumptions.py", "test_analyses_assumptions.py"),
    "analyses-plan": _m("offeval_core/analyses/plan.py", "test_one_place.py", "test_analyses_plan.py", DOCTEST,
                        "offeval_core/analyses/plan.py"),
    "analyses-common": _m("offeval_core/analyses/_common.py", "test_analyses_decisions.py",
                          "test_analyses_correlation.py", "test_analyses_common.py", DOCTEST,
                          "offeval_core/analyses/_common.py"),
    "diagnose": _m("offeval_core/diagnose.py", "test_diagnose.py"),
    "verdicts": _m("offeval_core/verdicts.py", "test_verdicts.py", "test_diagnose.py", DOCTEST,
                   "offeval_core/verdicts.py"),
}

_NO_DIVISION_AT_ZERO = ("every division in the block is an np.divide with where= (ndcg_of, _per_relevant), never "
                        "evaluated at a zero denominator: the errstate silences nothing")

# Survivors shown equivalent: (module, function, changed line after mutation, stripped) -> reason.
EQUIVALENT: dict[tuple[str, str, str], str] = {
    ("multiple", "holm", 'return adjust(p_values, alpha=alpha).adjusted'):
        "adjust's default method is holm",
    ("multiple", "holm", 'return adjust(p_values, method="holm", ).adjusted'):
        "the adjusted p-values do not depend on alpha (only the rejections do, and holm returns the p-values)",
    ("multiple", "benjamini_hochberg", 'return adjust(p_values, method="bh", ).adjusted'):
        "the adjusted p-values do not depend on alpha (only the rejections do, and this returns the p-values)",
    **{("verdicts", "ranking_estimators", line):
       "exposure_weights' default exposure is the learnt pbm, and parse_discount reads the kind case-insensitively"
       for line in ("_, w = exposure_weights(logs, policy, discount=discount, )",
                    '_, w = exposure_weights(logs, policy, discount=discount, exposure="PBM")')},
    **{("verdicts", "ranking_estimators", line):
       "the reduce then holds every reward (or policy) of the logs as well: select keeps the rows of the one asked, "
       "whose values do not depend on the others"
       for line in ('m = reduce_importance(logs, rewards=None, policies=(policy,), clips=(cap,), cappings=("max",),',
                    'm = reduce_importance(logs, policies=(policy,), clips=(cap,), cappings=("max",),',
                    'm = reduce_importance(logs, rewards=(reward,), policies=None, clips=(cap,), cappings=("max",),',
                    'm = reduce_importance(logs, rewards=(reward,), clips=(cap,), cappings=("max",),')},
    **{("verdicts", "ranking_estimators", line):
       "the default cappings and scales add zero-capped and impression-scale rows, stored under other metric names "
       "(cis-zero, cis@impression, …) that select does not read for is, cis, snips, ncis"
       for line in ('m = reduce_importance(logs, rewards=(reward,), policies=(policy,), clips=(cap,), scales=("session",), '
                    'weights="exposure", discount=discount, exposure="pbm", strata=None,',
                    'weights="exposure", discount=discount, exposure="pbm", strata=None,')},
    **{("verdicts", "ranking_estimators", line):
       "the default exposure is the learnt pbm, and parse_discount reads the kind case-insensitively; select reads "
       "the grid's own label"
       for line in ('scales=("session",), weights="exposure", discount=discount, strata=None,',
                    'scales=("session",), weights="exposure", discount=discount, exposure="PBM", strata=None,')},
    ("verdicts", "ranking_estimators",
     'scales=("session",), weights="exposure", discount=discount, exposure="pbm", context=None)'):
        "strata are read only by piece-NCIS, which ranking_estimators does not select",
    ("verdicts", "ranking_estimators", ")"):
        "the context is read only by point-NCIS, which ranking_estimators does not select",
    ("verdicts", "ranking_estimators", "clip=clip))"):
        "the grid's one exposure is pbm (reduced with exposure='pbm'), select's default",
    ("verdicts", "verdict", 'caution = ""'):
        "only `if caution:` reads the initial value, and '' is as falsy as None",
    ("verdicts", "verdict", "if name == \"support\" and 1 - c.effect <= SUPPORT_MATERIAL:"):
        "1 − effect never equals 0.05: for a share ≥ 1/2 the difference is exact (Sterbenz), a multiple of 2⁻⁵³, "
        "which the double 0.05 is not (its last bit is 2⁻⁵⁶); below 1/2 it is above 1/2",
    **{("verdicts", "verdict_clip", line):
       "np.quantile interpolates integer and float weights alike in float64"
       for line in ("return max(float(np.quantile(np.asarray(weights, dtype=None), 0.99)), 1.0)",
                    "return max(float(np.quantile(np.asarray(weights, ), 0.99)), 1.0)")},
    ("slate-weights", "segment_cumprod", "out = np.array(x, dtype=np.float64, )"):
        "np.array copies by default (copy=True)",
    ("slate-weights", "segment_cumprod", "for j in range(1, int(position.max()) + 2 if len(position) else 0):"):
        "no row has the position max + 1: its pass assigns nothing",
    ("slate-weights", "segment_cumprod", "for j in range(1, int(position.max()) + 1 if len(position) else 1):"):
        "range(1, 1) is empty, as range(1, 0)",
    ("multiple", "adjust", "adjusted[ok] = multipletests(p[ok], method=METHODS[method])[1]"):
        "multipletests' corrected p-values (its [1]) do not depend on alpha, only its rejections (its [0]) do",
    ("arms", "offline_mask",
     "values = arms if (isinstance(arms, pd.Series)) and False else pd.Series(np.asarray(arms, dtype=object))"):
        "re-wrapping a Series as objects only resets its index (the mask is read by position); its labels compare "
        "the same (a missing one is in no arm either way)",
    ("arms", "offline_mask", "mask = (values == arm).fillna(False).to_numpy(dtype=None)"):
        "after fillna the comparison is a boolean Series without missing values, whose to_numpy() is bool",
    ("arms", "offline_rows", 'mask = offline_mask(frame["arm"], )'):
        "offline_mask's default arm is the same OFFLINE_ARM",
    ("discounts", "_read_table_file", 'ranks = pd.to_numeric(df["rank"], errors="coerce").to_numpy(dtype=None)'):
        "pd.to_numeric gives int64 or float64, and isnan, the sort against 1..n and astype(int) agree on both",
    ("discounts", "_read_table_file",
     'probs = pd.to_numeric(df["probability"], errors="coerce").to_numpy(dtype=None)'):
        "pd.to_numeric gives int64 or float64; the [0, 1] check and the copy into a float array agree on both",
    **{("discounts", "register_table", line):
       "the temporary folder's name is never shown (errors name the upload) and it is removed after the read"
       for line in ("with tempfile.TemporaryDirectory(prefix=None) as tmp:",
                    'with tempfile.TemporaryDirectory(prefix="XXoffeval-table-XX") as tmp:',
                    'with tempfile.TemporaryDirectory(prefix="OFFEVAL-TABLE-") as tmp:')},
    **{("discounts", "register_table", line):
       "the temporary file's name is never shown, and read_csv_limited reads from it only .gz/.bz2/.tsv, in neither"
       for line in ('path = Path(tmp) / "XXtable.csvXX"', 'path = Path(tmp) / "TABLE.CSV"')},
    **{("discounts", "register_table", line):
       "the registered array is only ever handed out as a copy (read_discount_table returns .copy()), so its write "
       "flag is never seen"
       for line in ("values.setflags(write=None)", "values.setflags(write=True)")},
    ("discounts", "register_table", "_REGISTERED.popitem(last=None)"):
        "OrderedDict.popitem reads last for its truth: None pops the oldest, as False does",
    **{("discounts", "survival_curve", line):
       "np.bincount already has max(lengths) + 1 entries, and an extra trailing zero count is dropped by "
       "survival_from_counts"
       for line in ("return survival_from_counts(np.bincount(lengths, )[1:], floor=floor)",
                    "return survival_from_counts(np.bincount(lengths, minlength=int(lengths.max()) - 1)[1:], floor=floor)",
                    "return survival_from_counts(np.bincount(lengths, minlength=int(lengths.max()) + 2)[1:], floor=floor)")},
    **{("discounts", "survival_from_counts", line):
       "session counts are whole numbers: the reversed cumulative sums over the total are the same in int or float"
       for line in ("counts = np.asarray(counts, dtype=None)", "counts = np.asarray(counts, )")},
    ("discounts", "table_files_restricted", 'return bool(getattr(_ACCESS, "restricted", None))'):
        "bool(None) is False, as the default False",
    ("discounts", "DiscountModel.__call__", "rr = np.where(valid, r, 2.0)"):
        "a rank < 1 only stands in to keep the formulas finite (as 2 does); the last line sets its value to 0",
    **{("discounts", "DiscountModel.__call__", line):
       "validated ranks are integers or floats, compared with 1 alike; np.where(valid, r, 1.0) makes rr float64"
       for line in ("r = np.asarray(ranks, dtype=None)", "r = np.asarray(ranks, )")},
    **{("discounts", "DiscountModel.__call__", line):
       "a table's values are a tuple of floats, and np.where with the float beyond-value gives float64 anyway"
       for line in ("table = np.asarray(self.values, dtype=None)", "table = np.asarray(self.values, )")},
    **{("discounts", "DiscountModel.learnt", line):
       "np.maximum with the float floor gives float64 for any numeric curve (a learnt curve is a float array)"
       for line in ("values = np.maximum(np.asarray(curve, dtype=None), floor)",
                    "values = np.maximum(np.asarray(curve, ), floor)")},
    ("slate-dr", "cascade_dr_values", "per = np.bincount(data.session, weights=term, )"):
        "the session codes are dense and every session has a row, so the bincount already has n entries",
    ("slate-dr", "cross_fitted_model",
     "fold = rng.integers(0, folds, size=data.n_sessions)[data.session] if (folds > 1) or True else np.zeros(data.n_rows, int)"):
        "with one fold the draw rng.integers(0, 1) is all zeros, as the else branch",
    ("slate-dr", "cross_fitted_model",
     "fold = rng.integers(folds, size=data.n_sessions)[data.session] if folds > 1 else np.zeros(data.n_rows, int)"):
        "rng.integers(high) draws from [0, high), as rng.integers(0, high)",
    ("slate-dr", "cross_fitted_model",
     "fold = rng.integers(0, folds, size=data.n_sessions)[data.session] if folds >= 1 else np.zeros(data.n_rows, int)"):
        "with one fold the draw rng.integers(0, 1) is all zeros, as the else branch",
    ("slate-dr", "cross_fitted_model",
     "fold = rng.integers(0, folds, size=data.n_sessions)[data.session] if folds > 1 else np.zeros(data.n_rows, None)"):
        "float zeros compare equal to the fold number 0 as integer zeros do",
    ("slate-dr", "cross_fitted_model",
     "fold = rng.integers(0, folds, size=data.n_sessions)[data.session] if folds > 1 else np.zeros(data.n_rows, )"):
        "float zeros compare equal to the fold number 0 as integer zeros do",
    ("slate-dr", "cross_fitted_model", "for f in range(max(folds, 2)):"):
        "with one fold, fold 1 has no row, so the extra pass assigns nothing",
    ("slate-dr", "cross_fitted_model",
     'qbar[idx] = np.einsum("IJ,JI->I", target_distribution[idx], rates[:, k])'):
        "einsum subscripts may be upper-case letters; the contraction is the same",
    ("slate-adaptive", "_fit", "total, chosen = 1.0, np.empty(n_leaf, dtype=np.int64)"):
        "every feature's total starts at the same constant, so the comparison between features is unchanged",
    ("slate-adaptive", "_fit", "n_leaf = int(codes.max()) + 2"):
        "an extra leaf holds no session: its share is 0 and nothing indexes its choice",
    ("slate-adaptive", "_leaves", "if ctx is not None and f in ctx.columns and ctx[f].nunique() >= 1:"):
        "a one-valued feature gives one leaf whose total equals no split's, and a tie keeps no split",
    ("slate-adaptive", "adaptive_values", "half = np.random.default_rng(rng).integers(2, size=data.n_sessions)"):
        "rng.integers(high) draws from [0, high), as rng.integers(0, high)",
    ("slate-adaptive", "adaptive_values", "train = half == h"):
        "the loop runs over both halves: each half is still chosen on the other, in the other order",
    ("slate-adaptive", "candidate_values", "w = w if (math.isinf(clip)) and False else np.minimum(w, clip)"):
        "np.minimum(w, inf) is w",
    ('analyses-decisions', 'decision_boxes', 'for e, label in zip(ests, labels, strict=None):'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', 'decision_boxes', 'for e, label in zip(ests, labels, ):'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', 'decision_boxes', 'for e, label in zip(ests, labels, strict=False):'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', '_adjust_boxes', 'zip(out["online_sign"], out["online_p_adj"], )]'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', '_adjust_boxes', 'zip(out["online_sign"], out["online_p_adj"], strict=False)]'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', '_adjust_boxes', 'zip(out["online_sign"], out["online_p_adj"], strict=None)]'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', '_adjust_boxes', 'zip(out["offline_sign"], out["offline_p_adj"], )]'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', '_adjust_boxes', 'zip(out["offline_sign"], out["offline_p_adj"], strict=False)]'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', '_adjust_boxes', 'zip(out["offline_sign"], out["offline_p_adj"], strict=None)]'):
        'the zipped sequences are built from the same rows, so their lengths are equal',
    ('analyses-decisions', '_adjust_boxes', 'for _, idx in out.groupby("estimator", ).groups.items():'):
        "each estimator's rows are assigned by index, in any group order",
    ('analyses-decisions', '_adjust_boxes', 'for _, idx in out.groupby("estimator", sort=True).groups.items():'):
        "each estimator's rows are assigned by index, in any group order",
    ('analyses-decisions', '_adjust_boxes', 'for _, idx in out.groupby("estimator", sort=None).groups.items():'):
        "each estimator's rows are assigned by index, in any group order",
    ('analyses-decisions', '_adjust_boxes', 'out.loc[idx, "offline_p_adj"] = adjust_p(out.loc[idx, "offline_p"].to_numpy(), method=method,\n).adjusted'):
        'the adjusted p-values do not depend on alpha',
    ('analyses-decisions', '_adjust_boxes', ').adjusted'):
        'the adjusted p-values do not depend on alpha',
    ('analyses-decisions', '_adjust_boxes', 'online["online_p_adj"] = adjust_p(online["online_p"].to_numpy(), method=method, ).adjusted'):
        'the adjusted p-values do not depend on alpha',
    ('analyses-decisions', '_adjust_boxes', 'out = out.merge(online.drop(columns="online_p"), on=None, how="left")'):
        "the frames share exactly the columns experiment_id and reward, pandas' default keys",
    ('analyses-decisions', '_adjust_boxes', 'out = out.merge(online.drop(columns="online_p"), how="left")'):
        "the frames share exactly the columns experiment_id and reward, pandas' default keys",
    ('analyses-decisions', '_adjust_boxes', 'out = out.merge(online.drop(columns="online_p"), on=["experiment_id", "reward"], )'):
        'every box has its online row, so the inner merge keeps every row in the left order',
    ('analyses-decisions', '_adjust_boxes', 'out["offline_p_adj"] = None'):
        "every row's value is assigned in the loop below, which makes the column float",
    **{("analyses-decisions", "_adjust_boxes", f'if method != "{none}":'):
       "without adjustment the p-values are the CIs' own (same distribution and SE): p ≤ α and 'the CI excludes 0' "
       "differ only at p = α to the last bit"
       for none in ("XXnoneXX", "NONE")},
    **{("analyses-decisions", "decision_boxes", line):
       '_adjust_boxes(boxes, "none", level) is the call that made raw: the same frame'
       for line in ('boxes = _adjust_boxes(boxes, adjust, level) if (adjust != "none") or True else raw',
                    'boxes = _adjust_boxes(boxes, adjust, level) if adjust != "XXnoneXX" else raw',
                    'boxes = _adjust_boxes(boxes, adjust, level) if adjust != "NONE" else raw')},
    **{("analyses-decisions", "decision_boxes", f"strict={v})]" if v else ")]"):
       "the zipped columns are of the same frame, so their lengths are equal" for v in ("None", "False", "")},
    ("analyses-decisions", "decision_boxes", "takeaway = _takeaway(summary, None)"):
        "_takeaway does not read its labels argument",
    ("analyses-decisions", "_precision_fnr",
     "precision = float((off & on).sum() / off.sum()) if (off.sum()) or True else math.nan"):
        "numpy's 0 / 0 of integer counts is NaN (with a warning), the else value",
    ("analyses-decisions", "_precision_fnr",
     "fnr = float((on & ~off).sum() / on.sum()) if (on.sum()) or True else math.nan"):
        "numpy's 0 / 0 of integer counts is NaN (with a warning), the else value",
    ("analyses-decisions", "decide_adjusted", 'return "positive" if effect >= 0 else "negative"'):
        "an effect of 0 has returned neutral on the line above",
    ("analyses-decisions", "summarize_boxes", "ratio = ratio.replace([np.inf, -np.inf], None)"):
        "pandas puts None (an object column), which mean() and notna() skip as they skip NaN: the same mean",
    ("analyses-decisions", "summarize_boxes", "ratio = ratio.replace([np.inf, +np.inf], np.nan)"):
        "CI widths are ≥ 0, so a ratio of widths is never −inf",
    ("analyses-decisions", "summarize_boxes",
     '"ci_size": float(ratio.mean()) if (ratio.notna().any()) or True else math.nan,'):
        "the mean of an all-NaN ratio is NaN, the else value",
    ('slate-adaptive', 'choose', '**{f"mse_{c}": float(v) for c, v in zip(CANDIDATES, mse, strict=None)}})'):
        '_mse returns one value per candidate (three)',
    ('slate-adaptive', 'choose', '**{f"mse_{c}": float(v) for c, v in zip(CANDIDATES, mse, )}})'):
        '_mse returns one value per candidate (three)',
    ('slate-adaptive', 'choose', '**{f"mse_{c}": float(v) for c, v in zip(CANDIDATES, mse, strict=False)}})'):
        '_mse returns one value per candidate (three)',
    ("intervals", "bootstrap_t", "idx = rng.integers(n, size=(n_boot, n))"):
        "Generator.integers(n) is integers(0, n): the same range and the same draws",
    ("agreement", "inverted_pair_mask", "return np.triu(dx * dy < 0, )"):
        "the diagonal has dx = 0, never < 0, so k = 0 and k = 1 give the same mask",
    ("agreement", "agreement",
     "(labels[a], labels[b]) if xv[a] >= xv[b] else (labels[b], labels[a]) for a, b in zip(ia, ib, strict=True)"):
        "an inverted pair has x_a ≠ x_b, so > and >= pick the same order",
    ("agreement", "agreement",
     "(labels[a], labels[b]) if xv[a] > xv[b] else (labels[b], labels[a]) for a, b in zip(ia, ib, strict=None)"):
        "ia and ib come from one np.nonzero, so they always have the same length",
    ("agreement", "agreement",
     "(labels[a], labels[b]) if xv[a] > xv[b] else (labels[b], labels[a]) for a, b in zip(ia, ib, )"):
        "ia and ib come from one np.nonzero, so they always have the same length",
    ("agreement", "agreement",
     "(labels[a], labels[b]) if xv[a] > xv[b] else (labels[b], labels[a]) for a, b in zip(ia, ib, strict=False)"):
        "ia and ib come from one np.nonzero, so they always have the same length",
    ("agreement", "agreement", "if np.ptp(xv) > 0 and np.ptp(yv) >= 0:"):
        "scipy's kendalltau returns NaN, NaN for a constant metric (without a warning), as this branch does",
    ("agreement", "agreement", "if np.ptp(xv) >= 0 and np.ptp(yv) > 0:"):
        "scipy's kendalltau returns NaN, NaN for a constant metric (without a warning), as this branch does",
    ("agreement", "agreement", "if np.ptp(xv) > 0 or np.ptp(yv) > 0:"):
        "scipy's kendalltau returns NaN, NaN for a constant metric (without a warning), as this branch does",
    ("agreement", "inverted_share_bootstrap", "chunk = max(2, 2_000_000 // n_units)  # resamples drawn at once: about 2 M unit counts in memory"):
        "the chunk only batches the draws: rng.integers in batches of any size is the same stream",
    ("agreement", "inverted_share_bootstrap", "chunk = max(1, 2000001 // n_units)  # resamples drawn at once: about 2 M unit counts in memory"):
        "the chunk only batches the draws: rng.integers in batches of any size is the same stream",
    ("agreement", "inverted_share_bootstrap", "mx = counts @ xm * n_units"):
        "a positive scale keeps the order of the policy means (only the sign of each pair's difference is used)",
    ("agreement", "inverted_share_bootstrap", "my = counts @ ym * n_units"):
        "a positive scale keeps the order of the policy means (only the sign of each pair's difference is used)",
    **{("analyses-common", "merge_moments", line):
       "the rows are renumbered by reset_index(drop=True) below, and drop_duplicates compares values, not labels"
       for line in (f"{frame} = pd.concat([p.{frame} for p in parts], {arg})"
                    for frame in ("offline", "online") for arg in ("ignore_index=None", "", "ignore_index=False"))},
    ("analyses-common", "merge_moments",
     "if len(set(rewards)) <= len(rewards):  # parts of other rewards share no row (a Moments has one row per variant)"):
        "with distinct rewards no two rows share their keys (a part has one row per variant, and the reward is a key "
        "of both frames), so drop_duplicates would drop nothing: the test only skips that work",
    **{("analyses-dcg-vs-ndcg", "dcg_vs_ndcg", f"val = dict(zip(names, zip(dcg, ndcg, {a}), {b}))"):
       "dcg and ndcg are the column means of x and y, both built with one column per name: the lengths are equal"
       for a, b in (("strict=True", "strict=None"), ("strict=True", ""), ("strict=None", "strict=True"),
                    ("", "strict=True"), ("strict=False", "strict=True"), ("strict=True", "strict=False"))},
    **{("analyses-dcg-vs-ndcg", "dcg_vs_ndcg", f'points["{m}_rank"] = points["{m}"].rank(ascending=None, '
        'method="min").astype(int)'):
       "pandas passes ascending to its ranking as a C boolean: None is False, the descending order asked"
       for m in ("dcg", "ndcg")},
    ("analyses-dcg-vs-ndcg", "dcg_vs_ndcg",
     "gen = rng if (isinstance(rng, np.random.Generator)) and False else np.random.default_rng(rng)"):
        "np.random.default_rng returns a Generator passed to it unchanged",
    ("analyses-dcg-vs-ndcg", "dcg_vs_ndcg",
     "gen = rng if (isinstance(rng, np.random.Generator)) or True else np.random.default_rng(rng)"):
        "inverted_share_bootstrap turns an int seed into default_rng(seed) itself (check_rng): the same draws",
    ("analyses-dcg-vs-ndcg", "table1_example",
     "dcg = np.array([rho.loc[x, choices.loc[x, pol]] / 1.0 for x in rho.index])  # D(1) = 1"):
        "multiplying or dividing by D(1) = 1.0 gives the same float",
    **{("analyses-sensitivity", "_adjust", f'for _, idx in out.groupby(["metric", "clip"], {arg}).groups.items():'):
       "each (metric, m)'s rows are assigned by index, in any group order" for arg in ("sort=None", "", "sort=True")},
    ("analyses-sensitivity", "sensitivity",
     "closest_p = float(on_side.min()) if (len(on_side)) or True else math.nan"):
        "the minimum of an empty Series of p-values is NaN, the else value",
    **{("analyses-sensitivity", "sensitivity", line):
       "select_clips checks the same discount and exposure with require's same message before any value is read"
       for line in ("require(moments, exposures=(exposure,))", "require(moments, discounts=(discount,), )")},
    **{("analyses-sensitivity", "sensitivity", f"agg = agg.merge(chosen, {args})"):
       "the aggregate and the settings share exactly the columns experiment_id, day and reward, and inner is the "
       "default" for args in ('on=None, how="inner"', 'how="inner"', "on=list(SETTING_KEYS), ")},
    ("analyses-sensitivity", "sensitivity", "detected = eff.ci.low > 0 if d >= 0 else eff.ci.high < 0"):
        "d is a side's sign, 1 or -1 (SIDES), never 0",
    ("analyses-sensitivity", "sensitivity",
     'for row in agg.to_dict("RECORDS"):  # a dict per row: a Series per row cost more than the estimates'):
        "DataFrame.to_dict lower-cases its orient (pandas 3.1: orient = orient.lower()), so 'RECORDS' is 'records'",
    **{("analyses-sensitivity", "sensitivity", line):
       "the takeaway is set by sensitivity_takeaway right after, which does not read it"
       for line in ('best_clips=best, takeaway=None, policy=policy, discount=discount, exposure=exposure,',
                    'best_clips=best, takeaway="XXXX", policy=policy, discount=discount, exposure=exposure,')},
    **{("analyses-sensitivity", "_summarise", f'def _summarise(per: pd.DataFrame, metrics, clips, rate_column: str = '
        f'"{v}") -> pd.DataFrame:'):
       "the one call (sensitivity) passes the side's column: the default is never used" for v in ("XXtprXX", "TPR")},
    **{("analyses-sensitivity", "_summarise", line):
       "pandas' mean of no value is NaN (without a warning), the else value"
       for line in ('"mean_p": float(part["p_value"].mean()) if (n) or True else math.nan,',
                    '"sign_agreement": float(part["sign_agrees"].mean()) if (n) or True else math.nan,')},
    **{("analyses-sensitivity", "_summarise", line):
       "there is a row per metric and clip (at least one of each), with the keys of cols in their order"
       for line in ("return pd.DataFrame(rows, columns=None)", "return pd.DataFrame(rows, )")},
    ("analyses-sensitivity", "best_clips", 'for metric, part in table.groupby("metric", sort=None):'):
        "pandas sorts the groups only when sort is truthy: None keeps the table's order, as False",
    **{("heldout-metrics", f, line): reason for f, line, reason in [
        ("dcg_at_k", "r = np.asarray(ranked_relevance, dtype=None)", "gain() casts the grades to float itself"),
        ("dcg_at_k", "r = np.asarray(ranked_relevance, )", "gain() casts the grades to float itself"),
        ("ideal_dcg_at_k", "r = np.sort(np.asarray(relevances, dtype=None))[::-1]",
         "integers sort as their floats, and dcg_at_k casts them"),
        ("ideal_dcg_at_k", "r = np.sort(np.asarray(relevances, ))[::-1]",
         "integers sort as their floats, and dcg_at_k casts them"),
        ("log2_discount", "return 1.0 / np.log2(np.asarray(positions, dtype=None) + 1.0)",
         "adding 1.0 makes integer positions float"),
        ("log2_discount", "return 1.0 / np.log2(np.asarray(positions, ) + 1.0)",
         "adding 1.0 makes integer positions float"),
        ("evaluate_run", "x = per_user[col].to_numpy(dtype=None)", "every per-user column is float64"),
        ("per_user_metrics", "return s.reindex(index, fill_value=0.0).to_numpy(dtype=None)",
         "the sums of float values, reindexed with 0.0, are float64"),
        ("per_user_metrics", 'n_rel = (q["relevance"] > 0).groupby(q["user"]).sum().reindex(index).to_numpy(dtype=None)',
         "the counts only divide float sums: the quotients are the same"),
        ("per_user_metrics", 'm = run.frame[run.frame["user"].isin(index)].merge(q, on=None, how="left")',
         "the run's and the qrels' frames share exactly the columns user and item"),
        ("per_user_metrics", 'm = run.frame[run.frame["user"].isin(index)].merge(q, how="left")',
         "the run's and the qrels' frames share exactly the columns user and item"),
        ("per_user_metrics", 'm = run.frame[run.frame["user"].isin(index)].merge(q, on=["user", "item"], )',
         "an inner merge drops only unjudged ranked items, whose relevance 0 adds nothing to any metric"),
        ("per_user_metrics", 'rel = m["relevance"].fillna(None).to_numpy()',
         "pandas keeps NaN for an unjudged item: its gain is NaN, which the per-user groupby sum skips, and NaN > 0 is "
         "not a hit, as 0"),
        *[("per_user_metrics", 'qs = q.sort_values(["user", "relevance"], ascending=[True, False], ' + k + ")",
           "items of equal relevance have equal gains: their order in the ideal list does not change iDCG")
          for k in ("kind=None", "", 'kind="XXmergesortXX"', 'kind="MERGESORT"')],
        ("per_user_metrics", 'qs = q.sort_values(["user", "relevance"], ascending=[False, False], kind="mergesort")',
         "the ideal positions count within each user and iDCG is summed per user: the users' order does not matter"),
        *[("per_user_metrics", 'ideal_pos = qs.groupby("user", ' + a + ").cumcount().to_numpy() + 1",
           "cumcount numbers each user's rows in their frame order whatever the groups' order")
          for a in ("sort=None", "", "sort=True")],
        ("per_user_metrics", "hit = (rel > 0).astype(None)", "numpy's astype(None) is float64"),
        ("topn_metrics", "rel = np.asarray(relevance, )", "gain() casts to float, and counts of rel > 0 are the same"),
        ("topn_metrics", "rel = np.asarray(relevance, dtype=None)",
         "gain() casts to float, and counts of rel > 0 are the same"),
        ("topn_metrics", "ranked = np.take_along_axis(rel, top, )", "take_along_axis's default axis is -1, the items'"),
        ("topn_metrics", "srt = -np.sort(-rel, )[:, :k]", "np.sort's default axis is -1, the items'"),
        ("topn_metrics", "n_rel = (rel > 0).sum(axis=1).astype(None)", "numpy's astype(None) is float64"),
        ("topn_metrics", "hits = (ranked > 0).astype(None)", "numpy's astype(None) is float64"),
        ("topn_metrics", 'with np.errstate(invalid="ignore", divide=None):', _NO_DIVISION_AT_ZERO),
        ("topn_metrics", 'with np.errstate(invalid="ignore", ):', _NO_DIVISION_AT_ZERO),
        ("topn_metrics", 'with np.errstate(invalid=None, divide="ignore"):', _NO_DIVISION_AT_ZERO),
        ("topn_metrics", 'with np.errstate(divide="ignore"):', _NO_DIVISION_AT_ZERO),
        *[("_per_relevant", line, "np.divide computes integer or float values and counts in float64 into the "
           "float64 out array, and n > 0 compares them alike (the callers pass counts and sums of 0/1 hits)")
          for line in ("v, n = np.asarray(values, dtype=None), np.asarray(n_rel, dtype=np.float64)",
                       "v, n = np.asarray(values, ), np.asarray(n_rel, dtype=np.float64)",
                       "v, n = np.asarray(values, dtype=np.float64), np.asarray(n_rel, dtype=None)",
                       "v, n = np.asarray(values, dtype=np.float64), np.asarray(n_rel, )")],
        ("topn_metrics", '"ndcg": np.where(valid, ndcg_of(dcg, idcg, ), np.nan),',
         "iDCG = 0 only without a relevant item, where np.where gives NaN anyway"),
    ]},
    ("stats", "resample_counts", "return np.bincount(flat, minlength=size * n).reshape(size, n).astype(None)"):
        "numpy's astype(None) is its default dtype, float64",
    ("stats", "resample_counts", "idx = rng.integers(n, size=(size, n))"):
        "Generator.integers(n) draws from [0, n) as integers(0, n) does, from the same stream",
    ("stats", 'welch_effect', 'check_finite(se, what=None)'):
        "se = √(a + b) with a, b ≤ max float / 2 (finite moments over n ≥ 2), and a NaN count is caught by the difference's check first: never non-finite here",
    ("stats", 'welch_effect', 'check_finite(what="the arms\' variances")'):
        "se = √(a + b) with a, b ≤ max float / 2 (finite moments over n ≥ 2), and a NaN count is caught by the difference's check first: never non-finite here",
    ("stats", 'welch_effect', 'check_finite(se, )'):
        "se = √(a + b) with a, b ≤ max float / 2 (finite moments over n ≥ 2), and a NaN count is caught by the difference's check first: never non-finite here",
    ("stats", 'welch_effect', 'check_finite(se, what="XXthe arms\' variancesXX")'):
        "se = √(a + b) with a, b ≤ max float / 2 (finite moments over n ≥ 2), and a NaN count is caught by the difference's check first: never non-finite here",
    ("stats", 'welch_effect', 'check_finite(se, what="THE ARMS\' VARIANCES")'):
        "se = √(a + b) with a, b ≤ max float / 2 (finite moments over n ≥ 2), and a NaN count is caught by the difference's check first: never non-finite here",
    ("stats", 'welch_effect', 't_crit, p = 1.0, (0.0 if diff > 0 else (1.0 if diff < 0 else 0.5))'):
        'with se = 0 the interval is diff ± t_crit · 0 whatever t_crit',
    ("stats", 'welch_two_sided_p', 'check_finite(se, what="the arms\' means and variances")'):
        'diff and se are non-finite only together (a NaN count makes both NaN; finite moments over n ≥ 2 keep both finite)',
    ("stats", 'welch_two_sided_p', 'check_finite(diff, what="the arms\' means and variances")'):
        'diff and se are non-finite only together (a NaN count makes both NaN; finite moments over n ≥ 2 keep both finite)',
    ("stats", 'mean_estimate', 'se = math.sqrt(sample_variance(n, m2) / n) if (n >= 2) or True else math.nan'):
        "sample_variance is NaN for n < 2, so the square root is the else's NaN",
    ("stats", 'ratio_difference', 'check_finite(se, what=None)'):
        '_delta_variance returns NaN when its terms overflow (their size is then inf), and the division by n ≥ 2 cannot overflow: se is never infinite',
    ("stats", 'ratio_difference', 'check_finite(what="the difference\'s variance terms")'):
        '_delta_variance returns NaN when its terms overflow (their size is then inf), and the division by n ≥ 2 cannot overflow: se is never infinite',
    ("stats", 'ratio_difference', 'check_finite(se, )'):
        '_delta_variance returns NaN when its terms overflow (their size is then inf), and the division by n ≥ 2 cannot overflow: se is never infinite',
    ("stats", 'ratio_difference', 'check_finite(se, what="XXthe difference\'s variance termsXX")'):
        '_delta_variance returns NaN when its terms overflow (their size is then inf), and the division by n ≥ 2 cannot overflow: se is never infinite',
    ("stats", 'ratio_difference', 'check_finite(se, what="THE DIFFERENCE\'S VARIANCE TERMS")'):
        '_delta_variance returns NaN when its terms overflow (their size is then inf), and the division by n ≥ 2 cannot overflow: se is never infinite',
    ("stats", 'kish_ess_from_sums', 't, t2 = np.asarray(total, dtype=np.float64), np.asarray(total_sq, dtype=None)'):
        "np.where(t2 == 0, 1.0, t2) is float64 whatever t2's dtype",
    ("stats", 'kish_ess_from_sums', 't, t2 = np.asarray(total, dtype=np.float64), np.asarray(total_sq, )'):
        "np.where(t2 == 0, 1.0, t2) is float64 whatever t2's dtype",
    ("stats", 'kish_ess_from_sums', 'with np.errstate(divide=None, invalid="ignore", over="ignore"):'):
        'the divisor is np.where(t2 == 0, 1.0, t2), never 0',
    ("stats", 'kish_ess_from_sums', 'with np.errstate(invalid="ignore", over="ignore"):'):
        'the divisor is np.where(t2 == 0, 1.0, t2), never 0',
    ("stats", 'kish_ess_from_sums', 'out = np.where(None, 0.0, t * t / np.where(t2 == 0, 1.0, t2))  # NaN sums stay NaN'):
        'Σw² = 0 only when every weight is 0, and then Σw = 0 gives (Σw)² / 1 = 0 as well',
    ("stats", 'kish_ess_from_sums', 'out = np.where(t2 == 0, 0.0, t * t / np.where(None, 1.0, t2))  # NaN sums stay NaN'):
        'where t2 == 0 the outer np.where returns 0.0, so the inner divisor there is never used',
    ("stats", 'kish_ess_from_sums', 'out = np.where(t2 == 0, 0.0, t * t / np.where(t2 == 1, 1.0, t2))  # NaN sums stay NaN'):
        'where t2 == 0 the outer np.where returns 0.0, so the inner divisor there is never used',
    ("stats", 'kish_ess_from_sums', 'out = np.where(t2 == 0, 0.0, t * t / np.where(t2 == 0, 2.0, t2))  # NaN sums stay NaN'):
        'where t2 == 0 the outer np.where returns 0.0, so the inner divisor there is never used',
    ("stats", 'moments_of', 'x = np.asarray(values, dtype=None).ravel()'):
        'numbers (bools, ints, floats) give the same float sum, mean and squared deviations without the cast',
    ("stats", 'moments_of', 'x = np.asarray(values, ).ravel()'):
        'numbers (bools, ints, floats) give the same float sum, mean and squared deviations without the cast',
    ("stats", 'moments_of', 'check_finite(m2, what="the sum and second moment of the values")'):
        "a sum past double precision makes numpy's mean inf too, so M2 is inf or NaN and the check fires on it",
    **{("engine-per-session", "_session_values", line):
       "np.arange of a Python int is int64 already (numpy 2's default integer), the dtype asked for"
       for line in ('index = ibis.memtable(pd.DataFrame({"k": np.arange(n_clips, dtype=None)}))',
                    'index = ibis.memtable(pd.DataFrame({"k": np.arange(n_clips, )}))')},
    **{("engine-per-session", "_per_session", line):
       "_clip_value gives a Python float, which ibis types float64 by itself (and reads 'FLOAT64' as float64)"
       for line in ('pos = pos.mutate(**{f"m{k}": ibis.literal(_clip_value(m), type=None) for k, m in enumerate(clips)})',
                    'pos = pos.mutate(**{f"m{k}": ibis.literal(_clip_value(m), ) for k, m in enumerate(clips)})',
                    'pos = pos.mutate(**{f"m{k}": ibis.literal(_clip_value(m), type="FLOAT64") for k, m in enumerate(clips)})')},
    **{("engine-per-session", fn, line):
       "binary only picks the faster route: for a reward with one positive value the graded route (labels ranked per "
       "clip value) gives the same iDCG and DCG values"
       for fn, line in (("_per_session", "return _session_values(pos, lut, n_clips=len(clips), n_policies=len(policies) + 1, keys=keys, binary=None)"),
                        ("session_kernel", "binary = None"),
                        ("session_kernel", "exposure=exposures[em], clips=clips, keys=(), binary=None)"))},
    **{("engine-per-session", "session_kernel", line):
       "the (dm, em) blocks are unioned, so their order only orders the rows, which no reader relies on (session_values "
       "merges on the session)"
       for line in ('for (dm, em), block in variants.groupby(["dm", "em"], sort=None):',
                    'for (dm, em), block in variants.groupby(["dm", "em"], ):',
                    'for (dm, em), block in variants.groupby(["dm", "em"], sort=False):')},
    **{("engine-per-session", "session_kernel", line):
       "_clip_value maps ∞ to INF_CLIP, so passing INF_CLIP itself gives the same literal"
       for line in ('clips = [math.inf if (c >= INF_CLIP) and False else float(c) for c in block["clip"]]',
                    'clips = [math.inf if c > INF_CLIP else float(c) for c in block["clip"]]')},
    **{("engine-per-session", "session_kernel", line):
       "np.arange of a Python int is int64 already, and variant_table's ids v are int64"
       for line in ('v_of_k = ibis.memtable(pd.DataFrame({"k": np.arange(len(clips), dtype=None),',
                    'v_of_k = ibis.memtable(pd.DataFrame({"k": np.arange(len(clips), ),',
                    '"v": block["v"].to_numpy(dtype=None)}))')},
    **{("engine-per-session", "session_kernel", line):
       "ibis.union of a single table is that table's rows"
       for line in ("return ibis.union(*parts) if (len(parts) > 1) or True else parts[0]",
                    "return ibis.union(*parts) if len(parts) >= 1 else parts[0]")},
    **{("engine-lookups", "rank_lookup", line):
       "ibis types a list of Python floats array<float64> by itself (and reads 'ARRAY<FLOAT64>' as array<float64>)"
       for line in ('arr = ibis.literal([float(v) for v in model.table(max_rank)], type=None)',
                    'arr = ibis.literal([float(v) for v in model.table(max_rank)], )',
                    'arr = ibis.literal([float(v) for v in model.table(max_rank)], type="ARRAY<FLOAT64>")')},
    **{("engine-lookups", "pbm_from_histogram", line):
       "survival_from_counts casts the counts to int64 itself (session counts are integers, exact in float64)"
       for line in ("counts = np.zeros(int(length.max()) + 1, dtype=None)",
                    "counts = np.zeros(int(length.max()) + 1, )")},
    ("engine-lookups", "pbm_from_histogram", "counts = np.zeros(int(length.max()) + 2, dtype=np.int64)"):
        "the extra last length has no session, and survival_from_counts drops trailing zero counts",
    ("engine-lookups", "pbm_from_histogram", "np.add.at(counts, length, lengths[col].to_numpy(dtype=None))"):
        "np.add.at casts the added values to the int64 counts, as the asked dtype does (session counts are integers)",
    ("engine-lookups", "source_discount", "return parse_discount(spec, )"):
        "without logs or a histogram only the parametric and table specs parse, and parse_discount reads the floor "
        "only for pbm (refused there either way)",
    **{("engine-lookups", "rank_table", line):
       "np.arange of Python ints is int64 already (numpy 2's default integer), the dtype asked for"
       for line in ('return pd.DataFrame({"r": np.arange(1, max_rank + 1, dtype=None), "w": inv, "d": discount.table(max_rank)})',
                    'return pd.DataFrame({"r": np.arange(1, max_rank + 1, ), "w": inv, "d": discount.table(max_rank)})')},
    **{("engine-kernel", "_rewarded", line):
       "ibis reads type names case-insensitively: 'FLOAT64' is float64 and 'INT64' int64"
       for line in ('return pos.select("session", *keys, "rank", c=pos[reward].cast("FLOAT64"),',
                    '**{f"t{i}": pos[POLICY_PREFIX + p].cast("INT64") for i, p in enumerate(policies, 1)})')},
    **{("engine-kernel", "binary_rewards", line):
       "ibis reads type names case-insensitively: 'FLOAT64' is float64"
       for line in ('aggs[f"lo{i}"] = t[r].cast("FLOAT64").min(where=t[r] > 0)',
                    'aggs[f"hi{i}"] = t[r].cast("FLOAT64").max(where=t[r] > 0)')},
    **{("engine-kernel", "binary_rewards", line):
       "the largest value is the largest positive one whenever the reward has one, and a reward without one is "
       "binary by its minimum over no row (NULL) either way"
       for line in ('aggs[f"hi{i}"] = t[r].cast("float64").max(where=None)',
                    'aggs[f"hi{i}"] = t[r].cast("float64").max(where=t[r] >= 0)',
                    'aggs[f"hi{i}"] = t[r].cast("float64").max()')},
    ("engine-kernel", "_accumulate", "gid = parts.groupby(keys, ).ngroup().to_numpy()"):
        "groupby sorts by default",
    **{("engine-kernel", "_accumulate", line):
       "only the order of the groups changes: groups is built from the same numbering (sorted by _g), and the "
       "wide rows are merged onto the grid by their keys (reduction._to_long), so no value moves"
       for line in ("gid = parts.groupby(keys, sort=None).ngroup().to_numpy()",
                    "gid = parts.groupby(keys, sort=False).ngroup().to_numpy()")},
    **{("engine-kernel", "_accumulate", line):
       "the kept index becomes an extra column of groups, which is read only by its key columns"
       for line in ('groups = parts[keys].assign(_g=gid).drop_duplicates("_g").sort_values("_g")[keys].reset_index(drop=None)',
                    'groups = parts[keys].assign(_g=gid).drop_duplicates("_g").sort_values("_g")[keys].reset_index(drop=False)')},
    ("engine-kernel", "_accumulate",
     'groups = parts[keys].assign(_g=gid).drop_duplicates(None).sort_values("_g")[keys].reset_index(drop=True)'):
        "_g numbers the distinct keys, so rows equal in every column are exactly the rows equal in _g",
    ("engine-kernel", "_accumulate", "values[:, :len(queried)] = parts[queried].to_numpy(dtype=None)"):
        "the queried columns are int64 counts and float64 aggregates (NULL read as NaN), and assigning into the "
        "float64 values array casts them the same way",
    # engine-reduction
    **{("engine-reduction", "_tidy", f'front = [*keys, "reward"] + [c for c in ("discount", "exposure", "clip", "policy", '
                                     f'"{m}") if c in df.columns]'):
       "the only frames with a metric column are _to_long's, where it already follows policy and, within one "
       "(…, policy), its rows come in METRICS order (dcg, ndcg), which is its sorted order: the stable lexsort "
       "without it leaves both where they are" for m in ("XXmetricXX", "METRIC")},
    **{("engine-reduction", "check_finite_moments", line):
       "every column the check reads is a numpy float64 or int64 column of the reduce's own frames: to_numpy gives "
       "the same floats (or ints, all finite) without the dtype, and there is no pd.NA for na_value to replace"
       for line in ("values = frame[cols].to_numpy(dtype=None, na_value=np.nan)",
                    "values = frame[cols].to_numpy(dtype=np.float64, na_value=None)",
                    "values = frame[cols].to_numpy(na_value=np.nan)",
                    "values = frame[cols].to_numpy(dtype=np.float64, )")},
    **{("engine-reduction", "_tidy", line):
       "no front column holds a missing value (read_logs refuses empty group keys; the variant columns come from the "
       "grid), so no code is −1 and the stand-in for a missing value is never taken"
       for line in ("codes.append(np.where(None, len(uniques), code))  # missing last, as sort_values puts them",
                    "codes.append(np.where(code < 0, None, code))  # missing last, as sort_values puts them")},
    **{("engine-reduction", "_reduce", "labels = {spec: m.label for spec, m in zip([*grid.discounts, *grid.exposures], "
        f"[*discounts, *exposures], {a})}}"):
       "discounts and exposures are built one per grid spec, so the two lists always have the same length"
       for a in ("strict=None", "", "strict=False")},
    **{("engine-reduction", "_session_counts", line):
       "a cache miss: the counts are computed again from the same sessions, the same table"
       for line in ('if "XXcountsXX" not in state:', 'if "COUNTS" not in state:')},
    ("engine-reduction", "reduce", "out = reduce(logs, grid, pbm_floor=pbm_floor, )"):
        "the inner reduce computes the moments of the same key whichever cache it consults (the environment's, "
        "off in the tests): an entry holds exactly those moments",
    ("engine-reduction", "_prepare",
     "counts = source.counts if (source.counts is not None) and False else _session_counts(source, keys)"):
        "the sessions per group counted from the session table are the source's own counts (same moments to the "
        "last bit: test_a_source_without_session_counts_counts_them_and_gives_the_same_moments)",
    ("engine-reduction", "_reduce", "counts = None"):
        "then _session_counts counts the sessions per group from the session table: the source's own counts (same "
        "moments to the last bit: test_a_source_without_session_counts_counts_them_and_gives_the_same_moments)",
    **{("engine-reduction", "_reduce", line):
       "every block's rows are placed by their own variant id v, whatever order the blocks come in (and "
       "variant_table lists them in (dm, em) order anyway)"
       for line in ('for (dm, em), block in variants.groupby(["dm", "em"], sort=None):',
                    'for (dm, em), block in variants.groupby(["dm", "em"], ):',
                    'for (dm, em), block in variants.groupby(["dm", "em"], sort=False):')},
    ("engine-reduction", "_reduce",
     'wide.insert(1, "v", block["v"].to_numpy()[wide.pop("k").to_numpy(dtype=np.int64)])'):
        "_to_long reads the wide frame's columns by name, never by position",
    ("engine-reduction", "_reduce",
     'wide.insert(0, "v", block["v"].to_numpy()[wide.pop("k").to_numpy(dtype=None)])'):
        "k is int64 already (_accumulate builds it with np.arange(..., dtype=np.int64))",
    **{("engine-reduction", "_reduce", line):
       "the index is never read: _to_long merges the wide frame first (a new RangeIndex), _tidy takes the "
       "offline rows by position and resets the index, _expand_groups resets it too"
       for line in ("wide = pd.concat(wides, ignore_index=None)", "wide = pd.concat(wides, )",
                    "wide = pd.concat(wides, ignore_index=False)", "offline = pd.concat(offline_parts, ignore_index=None)",
                    "offline = pd.concat(offline_parts, )", "offline = pd.concat(offline_parts, ignore_index=False)")},
    ("engine-reduction", "_check_exposures",
     "beyond = np.flatnonzero(~(w <= INF_CLIP))  # 1 / D0 infinite, or past what stands for m = ∞"):
        "differs only where 1 / D0 is exactly 1e300, which no exposure model reaches: 1 / 1e-300 is "
        "9.999999999999999e299, and no exponential p = 10^(-300/k), k = 1..399, gives exactly 1e300 at rank k + 1",
    **{("engine-reduction", "_to_long", line):
       "the frames' only common column is v (the wide frame has no discount, exposure or clip_value column), "
       "so a merge on the common columns is the merge on v"
       for line in ('wide = wide.merge(variants[["v", "discount", "exposure", "clip_value"]], on=None)',
                    'wide = wide.merge(variants[["v", "discount", "exposure", "clip_value"]], )')},
    **{("engine-reduction", "_to_long", line):
       "the frames' common columns are exactly v and the group keys (counts holds the keys and n, the wide "
       "frame the keys, v and moment columns, none named n), so a merge on the common columns is this one"
       for line in ('wide = full.merge(wide.drop(columns=["discount", "exposure", "clip_value"]), on=None, how="left")',
                    'wide = full.merge(wide.drop(columns=["discount", "exposure", "clip_value"]), how="left")')},
    ("engine-reduction", "_to_long", 'n_all = wide["n"].to_numpy(dtype=None)'):
        "n is an int64 count, read only in n_all - n_r (float64) inside add_zeros, which casts to float64",
    ("engine-reduction", "_to_long", "nan = np.full(n_rows, None)"):
        "add_zeros and remove_zeros cast each block to float64, where None becomes NaN (the moments stay float64: "
        "test_the_long_moments_are_float64_and_the_logging_policys_paired_columns_nan)",
    **{("engine-reduction", "_to_long", line):
       "pandas stores a NumPy unicode array as the same string column as an object array of str"
       for line in ('cols["reward"] = np.full(n_rows * n_blocks, reward, dtype=None)',
                    'cols["reward"] = np.full(n_rows * n_blocks, reward, )',
                    'cols["policy"] = np.repeat(np.array([p for _, p in blocks], dtype=None), n_rows)',
                    'cols["policy"] = np.repeat(np.array([p for _, p in blocks], ), n_rows)',
                    'cols["metric"] = np.repeat(np.array([m for m, _ in blocks], dtype=None), n_rows)',
                    'cols["metric"] = np.repeat(np.array([m for m, _ in blocks], ), n_rows)')},
    **{("engine-reduction", "_to_long", line):
       "ok only decides whether check_finite_moments looks: here it looks at finite moments too, and finds "
       "nothing there (it skips the logging policy's paired columns itself)"
       for line in ("logging_rows = np.repeat(np.array([p != LOGGING_POLICY for _, p in blocks]), n_rows)",
                    "paired = np.array([c in OWN_COLUMNS for c in LONG_COLUMNS])",
                    "ok = np.isfinite(values) & (np.isnan(values) & logging_rows[:, None] & paired[None, :])")},
    ("engine-reduction", "_to_long",
     "ok = np.isfinite(values) | (np.isnan(values) | logging_rows[:, None] & paired[None, :])"):
        "a moment is NaN only where its own row also holds an infinite one (an infinite value makes its sum "
        "infinite: every value is >= 0; inf - inf in co_diff_den needs an infinite co_den), which is still caught",
    **{("engine-reduction", "_online", line):
       "a miss of the per-source cache computes the same table again (only its cost changes)"
       for line in ("cached = None", "cached = state[\"online\"].get(None)")},
    ("engine-reduction", "_online",
     "anypos = functools.reduce(lambda a, b: a | b, [t[r] >= 0 for r in everything])"):
        "rewards are >= 0, so every row enters: sessions without a positive reward then add their zeros in the "
        "query instead of in add_zeros, the same n, sum and m2 (up to rounding)",
    ("engine-reduction", "_online",
     'per = pos.group_by(["session", *keys]).aggregate(**{f"r{i}": pos[r].cast("FLOAT64").sum()'):
        "ibis reads type names case-insensitively: 'FLOAT64' is float64",
    **{("engine-reduction", "_online", line):
       "the frames' common columns are exactly the group keys (counts adds n, the part k, sum and m2), so a "
       "merge on the common columns is the merge on the keys"
       for line in ('part = counts.merge(part, on=None, how="left").fillna({"k": 0, "sum": 0.0, "m2": 0.0})',
                    'part = counts.merge(part, how="left").fillna({"k": 0, "sum": 0.0, "m2": 0.0})')},
    ("engine-reduction", "_online",
     'part = counts.merge(part, on=keys, how="left").fillna({"k": 1, "sum": 0.0, "m2": 0.0})'):
        "a group without a rewarded session then pools one 'rewarded' session of value 0 with n - 1 zeros: "
        "n, Σ = 0 and m2 = 0 all the same (n is the counts' own column)",
    **{("engine-reduction", "_online", line):
       "add_zeros casts its arrays to float64 (the counts are whole numbers, exact in float64)"
       for line in ('k = part.pop("k").to_numpy(dtype=None)', 'n = part["n"].to_numpy(dtype=None)',
                    'rewarded = np.column_stack([k, part["sum"].to_numpy(dtype=None), part["m2"].to_numpy(dtype=float)])',
                    'rewarded = np.column_stack([k, part["sum"].to_numpy(dtype=float), part["m2"].to_numpy(dtype=None)])')},
    **{("engine-kernel", "_accumulate", line):
       "k and b are int64 in the query's result (the clip table's int64 numbers and int64 literals of -1), and "
       "np.arange of a Python int is int64: the dtype asked for"
       for line in ('k, b = parts["k"].to_numpy(dtype=None), parts["b"].to_numpy(dtype=np.int64)',
                    'k, b = parts["k"].to_numpy(dtype=np.int64), parts["b"].to_numpy(dtype=None)',
                    'frame.insert(0, "k", np.repeat(np.arange(n_clips, dtype=None), len(groups)))',
                    'frame.insert(0, "k", np.repeat(np.arange(n_clips, ), len(groups)))')},
    ("engine-kernel", "_accumulate", "free = np.zeros((n_clips + 2, len(groups), len(stats)))  # (b, group, statistic)"):
        "the extra slot b = n_clips + 1 holds zeros after every other, and the running merge is read only at the "
        "clip values' positions (< n_clips)",
    ("engine-kernel", "_accumulate", "frame.insert(1 - i, key, np.tile(groups[key].to_numpy(), n_clips))"):
        "every source the package builds has one group key (the code g), where 1 - i = 1 + i; with several keys "
        "(a Source built by hand) only the order of the key columns differs, and every reader takes them by name",
    **{("engine-kernel", "_put", line):
       "DuckDB then takes the other backends' route: ibis's create_table(overwrite, temp) makes a temporary table of "
       "the same rows under the name, which the compiled SQL reads the same"
       for line in ('if kind == "XXduckdbXX":', 'if kind == "DUCKDB":')},
    **{("engine-kernel", "_put", line):
       "every frame put (_par_frame, rank_table, _binding_frame) has a RangeIndex, which preserve_index=None (the "
       "default) keeps as metadata only, not as a column"
       for line in ("backend.con.register(name, pa.Table.from_pandas(frame, preserve_index=None))",
                    "backend.con.register(name, pa.Table.from_pandas(frame, ))")},
    ("engine-kernel", "_moments", "pos = pos.mutate(maxw=pos.w.max().over(group_by=None),"):
        "the largest 1/D0 of all rows is ≥ each session's own, so clip values that do not bind in a session are "
        "computed as its binding pairs, where c · min(m, w) = c · w gives its unclipped values (ranked in the same "
        "order): the same values, more pairs computed",
    ("engine-kernel", "_moments", "free = pos.filter(pos.b <= n_clips)"):
        "sessions where every clip value binds then also give unclipped rows with b = n_clips, which _accumulate "
        "puts in the running merge's last slot, read at no clip value's position (< n_clips)",
    ("engine-kernel", "_moments",
     'n_bind = functools.reduce(lambda a, b: a + b, [flag(pos[f"m{k}"] <= pos.maxw) for k in range(n_clips)])'):
        "a clip value equal to a session's largest 1/D0 clips nothing there (min(m, w) = w): counted as binding, "
        "the session's pair at it gives its unclipped values, ranked in the same order",
    **{("engine-kernel", "_moments", line):
       "maxw is read only by n_bind, built on the table before this select; nothing after it reads maxw"
       for line in ('pos = pos.select("session", *keys, "rank", "c", "w", "u", None, "dj", *[f"p{i}" for i in range(n_pol)],',
                    'pos = pos.select("session", *keys, "rank", "c", "w", "u", "dj", *[f"p{i}" for i in range(n_pol)],')},
    **{("engine-kernel", "_moments", line):
       "the clip number of the unclipped rows is never read: _accumulate tells them by b ≥ 0 and places them by b "
       "(ibis reads 'INT64' as int64)"
       for line in ('free = free.mutate(k=ibis.literal(+1, type="int64")).select("k", "b", *keys, "idcg", *dcgs)',
                    'free = free.mutate(k=ibis.literal(-2, type="int64")).select("k", "b", *keys, "idcg", *dcgs)',
                    'free = free.mutate(k=ibis.literal(-1, type="INT64")).select("k", "b", *keys, "idcg", *dcgs)')},
    **{("engine-kernel", "_moments", line):
       "any negative b marks a binding pair for _accumulate (b < 0), and ibis reads 'INT64' as int64"
       for line in ('per = per.mutate(b=ibis.literal(-2, type="int64")).select("k", "b", *keys, "idcg", *dcgs)',
                    'per = per.mutate(b=ibis.literal(-1, type="INT64")).select("k", "b", *keys, "idcg", *dcgs)')},
    **{("engine-kernel", "_clip_frame", line):
       "_clip_value returns Python floats, which numpy makes float64 already"
       for line in ("m = np.array([_clip_value(c) for c in clips], dtype=None)",
                    "m = np.array([_clip_value(c) for c in clips], )")},
    **{("engine-kernel", "_clip_frame", line):
       "only equal clip values (a run given one twice) can swap places, and equal values bind in the same sessions, "
       "so no session's count of binding values b falls between them: each gets the same pairs either way"
       for line in ("order[np.argsort(m, kind=None)] = np.arange(len(m))", "order[np.argsort(m, )] = np.arange(len(m))")},
    ("engine-kernel", "_clip_frame", 'order[np.argsort(m, kind="STABLE")] = np.arange(len(m))'):
        "numpy reads a sort kind by its first letter, in either case: 'STABLE' is the stable sort",
    **{("engine-kernel", "_clip_frame", line): "np.arange of a Python int is int64 already, the dtype asked for"
       for line in ('return pd.DataFrame({"k": np.arange(len(m), dtype=None), "o": order, "m": m})',
                    'return pd.DataFrame({"k": np.arange(len(m), ), "o": order, "m": m})')},
    **{("engine-kernel", "_binding_frame", line):
       "the positions o are a permutation of 0..n-1 (no ties), so every sort gives the same order"
       for line in ('by_o = clip.sort_values("o", kind=None)', 'by_o = clip.sort_values("o", kind="STABLE")',
                    'by_o = clip.sort_values("o", )')},
    **{("engine-kernel", "_binding_frame", line): "np.arange of Python ints is int64 already, the dtype asked for"
       for line in ("b = np.repeat(np.arange(1, n + 1, dtype=None), np.arange(1, n + 1))",
                    "b = np.repeat(np.arange(1, n + 1, ), np.arange(1, n + 1))",
                    "o = np.concatenate([np.arange(i, dtype=None) for i in range(1, n + 1)]) if n else np.zeros(0, np.int64)",
                    "o = np.concatenate([np.arange(i, ) for i in range(1, n + 1)]) if n else np.zeros(0, np.int64)")},
    ("engine-kernel", "_binding_frame",
     "o = np.concatenate([np.arange(i, dtype=np.int64) for i in range(n + 1)]) if n else np.zeros(0, np.int64)"):
        "np.arange(0) is empty: the concatenation is the same",
    ("engine-kernel", "_lookups", 'pos = pos.left_join(look, f"t{i}").drop(None)'):
        "the join's right key column is then kept, and never read: the select after _lookups names its columns",
    **{("engine-kernel", "_binding_frame", line):
       "only the frame of no clip value (n = 0) takes that branch, and no query has none: Grid refuses an empty "
       "grid, and _moments cannot sum the binding flags of no clip value (fresh_moments and CompiledMoments "
       "with no clip value raise there, right after this frame)"
       for line in ("o = np.concatenate([np.arange(i, dtype=np.int64) for i in range(1, n + 1)]) if (n) or True else np.zeros(0, np.int64)",
                    "o = np.concatenate([np.arange(i, dtype=np.int64) for i in range(1, n + 1)]) if n else np.zeros(None, np.int64)",
                    "o = np.concatenate([np.arange(i, dtype=np.int64) for i in range(1, n + 1)]) if n else np.zeros(0, None)",
                    "o = np.concatenate([np.arange(i, dtype=np.int64) for i in range(1, n + 1)]) if n else np.zeros(np.int64)",
                    "o = np.concatenate([np.arange(i, dtype=np.int64) for i in range(1, n + 1)]) if n else np.zeros(0, )",
                    "o = np.concatenate([np.arange(i, dtype=np.int64) for i in range(1, n + 1)]) if n else np.zeros(1, np.int64)")},
    ("engine-kernel", "_moments", "policies: Sequence[str], keys: Sequence[str], binary: bool, lists: bool = True) "
                                  "-> ir.Table:"):
        "the default is never used: both callers (fresh_moments, CompiledMoments) pass lists",
    ("engine-kernel", "_moments", "bound = pos.filter(pos.b >= 0)"):
        "rows of sessions where no clip value binds (b = 0) find no clip row to join: the clip table's b starts at 1",
    **{("engine-kernel", "_co", line): "no caller passes where: _stats' co-moments are over every row"
       for line in ('return v.cov(y, how="pop", where=None) * n', 'return v.cov(y, how="pop", ) * n')},
    **{("engine-kernel", "_values", line):
       "the extra column e0 = d0 − d0 (f0 = n0 − n0) is never read: _stats reads the differences e1…, f1… of the "
       "target policies only"
       for line in ('return x.mutate(**{f"e{i}": x[f"d{i}"] - x.d0 for i in range(k)},',
                    '**{f"f{i}": x[f"n{i}"] - x.n0 for i in range(k)})')},
    ("engine-kernel", "_put", "backend.con.register(name, pa.Table.from_pandas(frame, preserve_index=True))"):
        "the RangeIndex becomes an extra column of the registered table, which the compiled SQL (naming its "
        "columns) never reads",
    ("engine-kernel", "_accumulate", "frame = pd.DataFrame(out.reshape(-2, len(stats)), columns=stats)"):
        "numpy reads any negative dimension of reshape as the one to infer, as -1",
    **{("engine-kernel", "_long_rewarded", line):
       "ibis reads type names case-insensitively: 'FLOAT64' is float64 and 'INT64' int64"
       for line in ('parts = [t.filter(t[r] > 0).select(q=ibis.literal(q, type="INT64"), session=t.session,',
                    '**{k: t[k] for k in keys}, rank=t["rank"].cast("INT64"),',
                    'c=t[r].cast("FLOAT64"), **{p: t[p].cast("int64") for p in pols})',
                    'c=t[r].cast("float64"), **{p: t[p].cast("INT64") for p in pols})')},
    **{("engine-kernel", "_long_rewarded", line):
       "ibis.union of a single table is that table's rows: one reward's rewarded rows are then materialised on the "
       "source's backend instead of read as a filter of the rows, the same rows"
       for line in ("long = source.backend._cached_table(ibis.union(*parts)) if (len(parts) > 1) or True else parts[0]",
                    "long = source.backend._cached_table(ibis.union(*parts)) if len(parts) >= 1 else parts[0]")},
    **{("engine-kernel", fn, line):
       "a backend without a name is neither 'duckdb' nor 'pyspark' with either default: the other backends' branch"
       for fn in ("_put", "_run_sql")
       for line in ('kind = getattr(backend, "name", "XXXX")', 'kind = getattr(backend, "name", None)')},
    **{("engine-kernel", "CompiledMoments.__init__", line):
       "the tables put before compiling only give the compiled SQL their names and schema (their rows are not in "
       "the SQL text), and run() replaces all three before every run; np.array of a Python int is int64 already"
       for line in ("_put(backend, self._par, self._par_frame(1, [1.0] * n_clips))",
                    "_put(backend, self._par, self._par_frame(0, [2.0] * n_clips))",
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([1], dtype=None), "w": [1.0], "d": [1.0]}))',
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([1], ), "w": [1.0], "d": [1.0]}))',
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([2], dtype=np.int64), "w": [1.0], "d": [1.0]}))',
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([1], dtype=np.int64), "w": [2.0], "d": [1.0]}))',
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([1], dtype=np.int64), "w": [1.0], "d": [2.0]}))',
                    "_put(backend, self._clip, _binding_frame(_clip_frame([2.0] * n_clips)))")},
    ("engine-kernel", "CompiledMoments.__init__",
     "expr = _moments(pos, lut, clip, wide, n_clips=n_clips, policies=policies, keys=keys, binary=None,"):
        "binary only picks the faster route: for a reward with one positive value the graded route (labels ranked "
        "per clip value) gives the same iDCG and DCG values",
    ("engine-kernel", "CompiledMoments.__init__",
     "self._expr = None  # keeps the tables the SQL names alive as long as the query"):
        "every table the SQL names is held elsewhere as long as the query: the source's rows (a memtable) by "
        "self.source, the long table of several rewards by the source's state, the three small tables by the "
        "backend under their names (compiled, gc.collect(), run: the same moments)",
    **{("engine-kernel", "CompiledMoments._par_frame", line):
       "np.array of a Python int is int64 and of a Python float (_clip_value returns one) float64 already"
       for line in ('return pd.DataFrame({"q": np.array([q], dtype=None),', 'return pd.DataFrame({"q": np.array([q], ),',
                    '**{f"m{k}": np.array([_clip_value(m)], dtype=None) for k, m in enumerate(clips)}})',
                    '**{f"m{k}": np.array([_clip_value(m)], ) for k, m in enumerate(clips)}})')},
    **{("engine-per-session", "compiled_session_values", line):
       "the label only keeps these plans apart from the moments' plans in the same dict, whose keys start with a "
       "tuple of rewards: any text does"
       for line in ('key = ("XXsession valuesXX", everything, tuple(policies), binary)',
                    'key = ("SESSION VALUES", everything, tuple(policies), binary)')},
    **{("engine-per-session", "CompiledSessionValues.__init__", line):
       "the tables put before compiling only give the compiled SQL their names and schema (their rows are not in "
       "the SQL text), and run() replaces both before every run; np.array of a Python int is int64 already"
       for line in ("_put(backend, self._par, self._par_frame(1, math.inf))",
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([1], dtype=None), "w": [1.0], "d": [1.0]}))',
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([1], ), "w": [1.0], "d": [1.0]}))',
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([2], dtype=np.int64), "w": [1.0], "d": [1.0]}))',
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([1], dtype=np.int64), "w": [2.0], "d": [1.0]}))',
                    '_put(backend, self._lut, pd.DataFrame({"r": np.array([1], dtype=np.int64), "w": [1.0], "d": [2.0]}))')},
    **{(("engine-per-session", fn, line)):
       "binary only picks the faster route: for a reward with one positive value the graded route (labels sorted "
       "per session) gives the same iDCG and DCG values (the plans still differ by their table names)"
       for fn, line in (("compiled_session_values", "binary=None)"),
                        ("CompiledSessionValues.__init__",
                         "per = _session_values(pos, lut, n_clips=1, n_policies=len(policies) + 1, keys=(), binary=None)"))},
    ("engine-per-session", "CompiledSessionValues.__init__",
     "self._expr = None  # keeps the tables the SQL names alive as long as the query"):
        "every table the SQL names is held elsewhere as long as the query: the source's rows by self.source, the "
        "long table of several rewards by the source's state, the two small tables by the backend under their "
        "names (as CompiledMoments)",
    **{("engine-per-session", "CompiledSessionValues._par_frame", line):
       "np.array of a Python int is int64 and of a Python float (_clip_value returns one) float64 already"
       for line in ('return pd.DataFrame({"q": np.array([q], dtype=None), "m0": np.array([_clip_value(clip)], dtype=np.float64)})',
                    'return pd.DataFrame({"q": np.array([q], ), "m0": np.array([_clip_value(clip)], dtype=np.float64)})',
                    'return pd.DataFrame({"q": np.array([q], dtype=np.int64), "m0": np.array([_clip_value(clip)], dtype=None)})',
                    'return pd.DataFrame({"q": np.array([q], dtype=np.int64), "m0": np.array([_clip_value(clip)], )})')},
    **{("engine-reduction", "_tidy", line):
       "a categorical column with a row at code 0 then takes the other branch, astype(str): the same text and the "
       "same str dtype, built per row (only slower)"
       for line in ("if isinstance(col.dtype, pd.CategoricalDtype) and (col.cat.codes > 0).all():  # the categories' text, taken",
                    "if isinstance(col.dtype, pd.CategoricalDtype) and (col.cat.codes >= 1).all():  # the categories' text, taken")},
    **{("estimators", "session_values", line):
       "the session table and the per-session values share one column, session, which merge joins on without on="
       for line in ('per, on=None, how="left")', 'per, how="left")')},
    **{("diagnose", "diagnose", line):
       "the label only keeps the three memoised checks apart in the logs' dict: any three distinct texts do"
       for line in ('_checked_once(logs, ("XXcascadeXX", reward, alpha, level),',
                    '_checked_once(logs, ("CASCADE", reward, alpha, level),',
                    'else _checked_once(logs, ("XXinteractionXX", reward, alpha, level),',
                    'else _checked_once(logs, ("INTERACTION", reward, alpha, level),',
                    '_checked_once(logs, ("XXcontextXX", reward, alpha, level),',
                    '_checked_once(logs, ("CONTEXT", reward, alpha, level),')},
    ("engine-reduction", "_online", 'check_finite_moments(part, what=f"the observed reward {r!r}", )'):
        "of the offline roles the online frame holds exactly n, sum and m2, with the same kinds as the online "
        "roles: the same columns are checked",
    **{("engine-reduction", "_online", line):
       "the index is never read: _reduce passes the frame through _expand_groups and _tidy, which reset it"
       for line in ("return pd.concat(parts, ignore_index=None)", "return pd.concat(parts, )",
                    "return pd.concat(parts, ignore_index=False)")},
    # engine-grid
    **{("engine-grid", "ndcg_of", line):
       "the other operand is float64, so np.divide computes in float64 either way (numbers and pandas nullable "
       "numbers convert exactly) and writes into the float64 out array; i > 0 compares the same"
       for line in ("d, i = np.asarray(dcg, dtype=None), np.asarray(idcg, dtype=np.float64)",
                    "d, i = np.asarray(dcg, ), np.asarray(idcg, dtype=np.float64)",
                    "d, i = np.asarray(dcg, dtype=np.float64), np.asarray(idcg, dtype=None)",
                    "d, i = np.asarray(dcg, dtype=np.float64), np.asarray(idcg, )")},
    **{("importance-strata", "subset_sessions", line):
       "np.arange of Python ints is int64 already (numpy 2's default integer), the dtype asked for"
       for line in ('sess["session"] = np.arange(len(sess), dtype=None)', 'sess["session"] = np.arange(len(sess), )')},
    **{("importance-strata", "value_strata", line):
       "only values v ≤ 0 change inside the logarithm, and the outer np.where puts NaN (V = 0) there either way"
       for line in ("k = np.where(v > 0, np.floor(np.log(np.where(v >= 0, v, 1.0)) / math.log(base)), np.nan)",
                    "k = np.where(v > 0, np.floor(np.log(np.where(v > 0, v, 2.0)) / math.log(base)), np.nan)")},
    ("importance-strata", "value_strata", 'sess["value"] = total.reindex(None).to_numpy()'):
        "the per-session sums are indexed by the session codes 0..n-1 in order, which is sess['session'] itself",
    ("importance-strata", "value_strata", "fit = rng.uniform(size=len(sess)) <= fit_share"):
        "a uniform draw equals fit_share with probability 0",
    **{("importance-strata", "value_strata", line):
       "session_labels returns text labels, never categorical: observed only acts on categoricals"
       for line in ('model = sess[fit].groupby(feats, observed=None)["value"].mean() if feats else None',
                    'model = sess[fit].groupby(feats, )["value"].mean() if feats else None',
                    'model = sess[fit].groupby(feats, observed=False)["value"].mean() if feats else None')},
    **{("importance-strata", "value_strata", line):
       "the model's only columns besides pred are the features, so the common columns are the features"
       for line in ('pred = ev.merge(model.rename("pred").reset_index(), on=None, how="left")["pred"].fillna(overall)',
                    'pred = ev.merge(model.rename("pred").reset_index(), how="left")["pred"].fillna(overall)')},
    ("importance-strata", "value_strata", "v = pred.to_numpy(dtype=None)"):
        "pred is float64 already (a mean, or the overall mean filled in)",
    ("importance-strata", "value_strata", "with np.errstate(divide=None):"):
        "the logarithm never sees 0 (v ≤ 0 is replaced by 1), so no division warning is raised to suppress",
    ("importance-counterexample", "ncis_counterexample",
     'for arm, col in (("control", "logging_propensity"), ("treatment", "target_propensity"))[: 3 if arms else 1]:'):
        "slicing the two (arm, column) pairs to 3 keeps the same two",
    ("importance-counterexample", "ncis_counterexample", "counts = rng.multinomial(n, prob * prob.sum())"):
        "the probabilities already sum to 1 (each segment's propensities sum to 1 and the shares to 0.1 + 0.9), so "
        "dividing or multiplying by their sum changes them only by rounding",
    **{("importance-counterexample", "ncis_counterexample", line):
       "the kept old index becomes an extra column of part that nothing reads (columns are taken by name), and the "
       "new index is 0..n-1 either way"
       for line in ("part = acts.iloc[idx].reset_index(drop=None)", "part = acts.iloc[idx].reset_index(drop=False)")},
    ("engine-kernel", "fresh_moments", "binary=None, lists=sorts_lists(source.backend))"):
        "binary only picks the faster route: for a reward with one positive value the graded route (labels ranked "
        "per clip value) gives the same iDCG and DCG values",
    **{("engine-kernel", "fresh_moments", line):
       "lists only picks the graded iDCG's route on DuckDB: the window ranks give the same moments as the sorted "
       "lists (to the last bits: test_duckdbs_sorted_label_lists_give_the_idcg_of_the_window_ranks), only slower; "
       "the compiled query, which the reduce runs, is held to the lists by that test"
       for line in ("binary=binary, lists=None)", "binary=binary, )", "binary=binary, lists=sorts_lists(None))")},
    ("estimators", "impression_online_results", "arm=None)"):
        "the logging policy's rows are its own uncapped sums (weight 1), the same at every clip, and every "
        "importance grid holds c = ∞ (capping_variants adds it), which select reads without the clip",
    **{("estimators", "impression_online_results", line):
       "the moments' key columns are strings, numbers or dates, never categorical: observed only acts on categoricals"
       for line in ("groups = rows.groupby(list(by), observed=None, sort=True) if by else [((), rows)]",
                    "groups = rows.groupby(list(by), sort=True) if by else [((), rows)]",
                    "groups = rows.groupby(list(by), observed=False, sort=True) if by else [((), rows)]")},
    ("estimators", "impression_online_results", "groups = rows.groupby(list(by), observed=True, ) if by else [((), rows)]"):
        "groupby sorts by default",
    ("estimators", "impression_online_results", "key = key if (isinstance(key, tuple)) or True else (key,)"):
        "pandas (≥ 2) gives tuple keys when grouping by a list, even of one key",
    ("estimators", "online_results", 'pooled = pool(on, [*by, "arm"], )'):
        "pool keeps only the roles of the columns present, and n, sum and m2 have the same roles in OFFLINE_ROLES",
    **{("estimators", "online_results", line):
       "both sequences are read from the one pooled frame, so they have the same length"
       for line in ("pooled[cols].to_numpy(dtype=float), strict=None):", "pooled[cols].to_numpy(dtype=float), ):",
                    "pooled[cols].to_numpy(dtype=float), strict=False):")},
    ("estimators", "online_results", 'for idx, values in zip(pooled[[*by, "arm"]].itertuples(index=None, name=None),'):
        "index=None is falsy like False: the tuples hold the key columns only",
    ("estimators", "online_results", 'for idx, values in zip(pooled[[*by, "arm"]].itertuples(index=False, ),'):
        "a namedtuple sliced by [:-1] is a plain tuple and [-1] is the arm, as with plain tuples",
    **{("estimators", "online_results", line):
       "cols is n, sum, m2, the keys of ONLINE_ROLES in that order, and OFFLINE_ROLES (the default) gives them the "
       "same roles"
       for line in ("layout = Layout(ONLINE_ROLES)", "layout = Layout(cols, )")},
    ("estimators", "online_results", "pooled[cols].to_numpy(dtype=None), strict=True):"):
        "sum and m2 are float64 columns, so numpy reads n, sum, m2 as float64 without the dtype",
    ("estimators", "online_results",
     "arms[\"control\"] = functools.reduce(lambda a, b: merge(a, b, layout), parts) if parts else np.zeros(4)"):
        "only c[0], c[1], c[2] are read, zeros either way",
    ("estimators", "session_values",
     "grid = Grid(rewards=(reward,), policies=None, discounts=(discount,), exposures=(exposure,), clips=(clip,))"):
        "the grid only feeds variant_table, which reads its discounts, exposures and clips, not its policies",
    **{("estimators", "session_values", line):
       "the grid's one discount and exposure become the ids dm = em = 0 either way (Grid's default is one pbm each), "
       "and session_kernel reads the ids and the clips, not the labels"
       for line in ("grid = Grid(rewards=(reward,), policies=policies, exposures=(exposure,), clips=(clip,))",
                    "grid = Grid(rewards=(reward,), policies=policies, discounts=(discount,), clips=(clip,))")},
    **{("estimators", "session_values", line):
       "parse_discount reads the kind case-insensitively ('PBM' is the learnt pbm) and is given the logs here"
       for line in ('def session_values(logs: Logs, *, reward: str, policies: Sequence[str] = (), discount: str = "PBM",',
                    'exposure: str = "PBM", clip: float = math.inf) -> pd.DataFrame:')},
    **{("estimators", "session_values", line):
       "the kernel's per-session table shares only the session column with the sessions' keys, merge's default"
       for line in ('per.drop(columns="v"), on=None, how="left")', 'per.drop(columns="v"), how="left")')},
    **{("estimators", "summarize_groups", line):
       "pandas lowercases to_dict's orient ('RECORDS' is 'records', without a warning in pandas 3.1)"
       for line in ('targets = tgt_rows.to_dict("RECORDS") if tgt_rows is not None else None',
                    'for i, row in enumerate(log_rows.to_dict("RECORDS")):')},
    ("importance-weights", "exposure_weights",
     'def exposure_weights(logs: Logs, policy: str, *, discount: str, exposure: str = "PBM") -> tuple[np.ndarray, np.ndarray]:'):
        "parse_discount reads the kind case-insensitively ('PBM' is the learnt pbm), and only the weights are returned",
    **{("importance-weights", "importance_source", line):
       "read_logs gives float64 rewards and propensities (the schema converts them), the dtype asked for"
       for line in ("rows[r] = f[r].to_numpy(dtype=None)",
                    'rows["logging_propensity"] = f["logging_propensity"].to_numpy(dtype=None)',
                    "rows[TARGET_PROPENSITY_PREFIX + p] = f[TARGET_PROPENSITY_PREFIX + p].to_numpy(dtype=None)")},
    ("importance-weights", "importance_source",
     'rows["item_id"] = f["item_id"].astype(str).to_numpy(dtype=None) if "item_id" in f else ""'):
        "astype(str) gives pandas' str dtype, whose to_numpy() is an object array already",
    **{("importance-weights", "per_session", line):
       "transform returns one value per row aligned with the rows, whatever order the groups are visited in"
       for line in ('first = text.groupby(ids, sort=None).transform("first")',
                    'first = text.groupby(ids, ).transform("first")',
                    'first = text.groupby(ids, sort=True).transform("first")')},
    ("importance-weights", "per_session", "return col.groupby(ids, sort=None).first()"):
        "pandas tests sort for truth, so sort=None keeps the groups in order of first appearance, as False does",
    **{("importance-weights", "resolve_weights", line):
       "mode is only compared with 'propensity'; any other value takes the exposure branch, which returns "
       "WeightSetup('exposure', ...) itself"
       for line in ('mode = ("propensity" if has_lp else "XXexposureXX") if weights == "auto" else weights',
                    'mode = ("propensity" if has_lp else "EXPOSURE") if weights == "auto" else weights')},
    **{("importance-weights", "session_labels", line):
       "astype(str) gives pandas' str dtype, whose to_numpy() is an object array already"
       for line in ('return sess["session_id"].astype(str).to_numpy(dtype=None)',
                    "return mapped.astype(str).to_numpy(dtype=None)",
                    "return sess[spec].astype(str).to_numpy(dtype=None)",
                    'return per.reindex(sess["session_id"].to_numpy()).astype(str).to_numpy(dtype=None)')},
    **{("importance-weights", "session_labels", line):
       "spec 'session' has returned the session ids above, so the excluded name 'session' is never reached here"
       for line in ('if spec in sess.columns and spec not in ("XXsessionXX", "length", "n_rows"):',
                    'if spec in sess.columns and spec not in ("SESSION", "length", "n_rows"):')},
    ("importance-weights", "session_labels", "return per.reindex(None).astype(str).to_numpy(dtype=object)"):
        "logs.frame is sorted by the session code, which follows session_id, so per_session's order of first "
        "appearance is already the order of logs.sessions: the reindex is the identity",
    **{("importance-estimate", "estimate", line):
       "parse_discount reads the kind case-insensitively ('PBM' is the learnt pbm); the label only keys the moments, "
       "which are read back with the grid's own label, and the result does not carry it"
       for line in ('capping: str | None = None, scale: str | None = None, weights: str = "auto", discount: str = "PBM",',
                    'exposure: str = "PBM", strata="segment", context="session", arm: str | None = OFFLINE_ARM,')},
    ("importance-estimate", "estimate",
     "m = reduce_importance(logs, rewards=(reward,), policies=(policy,), clips=(clip,), scales=(scale,), weights=weights, "
     "discount=discount, exposure=exposure, strata=strata,"):
        "reduce_importance's default cappings are both (CAPPINGS), each computed on its own, and select reads the "
        "capping asked from the key",
    ("importance-estimate", "estimate", "weights=weights, discount=discount, exposure=exposure, strata=strata,"):
        "reduce_importance's default scales are both (SCALES), each computed on its own, and select reads the scale "
        "asked from the key",
    ("importance-estimate", "estimate",
     "lrows = aggregate(select(m, reward=reward, policy=None, metric=key, discount=d, exposure=e, arm=arm))"):
        "the logging policy's rows are its own uncapped sums (weight 1), the same at every clip, and every importance "
        "grid holds c = ∞ (capping_variants adds it), which select reads without the clip",
    **{("importance-estimate", "estimate", line):
       "the pooled-context count reads each session's rows, context and exactness: the strata do not enter it, and "
       "D / D0 change only exposure weights, which never have an exact ν (exact = 0 whatever the discount); a bad "
       "spec is refused by the reduce right after, with the same error"
       for line in ("weights=weights, discount=discount, exposure=exposure, strata=None,",
                    "weights=weights, exposure=exposure, strata=strata,",
                    "weights=weights, discount=discount, strata=strata,",
                    "weights=weights, discount=discount, exposure=exposure, context=context), arm=arm)")},
    ("importance-estimate", "midzuno_sen_inverse", "if rng.uniform() <= r1:"):
        "a uniform draw equals the ratio r1 with probability 0",
    # diagnose
    ("diagnose", "_rewards_above",
     'def _rewards_above(p: pd.DataFrame, *, name: str, question: str, alpha: float, level: float, why: str = "XXXX"):'):
        "both callers (check_cascade on slate logs, check_interaction without categories) pass why",
    **{("diagnose", fn, line):
       "with no row below rank 1 the slope is NaN (Σ(x − x̄)² = 0), so the check is not testable whatever the base"
       for fn in ("_rewards_above", "check_interaction")
       for line in ('base = float(p["r"].mean()) if (len(p)) or True else 0.0',
                    'base = float(p["r"].mean()) if len(p) else 1.0')},
    ("diagnose", "_cmh", "k = int(strata.max()) + 2 if len(strata) else 0"):
        "the extra stratum has no rows, fails the margins test and is left out",
    ("diagnose", "_cmh", "k = int(strata.max()) + 1 if len(strata) else 1"):
        "without rows the one stratum is empty and fails the margins test: None, as with k = 0",
    ("diagnose", "_cmh", "tables = np.stack([np.stack([a0[ok], b0[ok]]), np.stack([c0[ok], d0[ok]])]).astype(None)"):
        "astype(None) is astype(float64)",
    ("diagnose", "_cmh",
     "return orr, float(lo), float(hi), float(st.test_null_odds(correction=None).pvalue), int(ok.sum())"):
        "statsmodels only tests `if correction`: None is falsy like False",
    **{("diagnose", "_within_slope", line): "astype(None) is astype(float64)"
       for line in ("xd, yd = demean(x.astype(None)), demean(y.astype(float))",
                    "xd, yd = demean(x.astype(float)), demean(y.astype(None))",
                    "n_s = size[strata].astype(None)")},
    **{("diagnose", "_within_slope", line):
       "a singleton stratum's demeaned x is 0, so its score term is 0 whatever its inflation"
       for line in ("inflate = np.sqrt(np.where(n_s >= 1, n_s / np.maximum(n_s - 1, 1), 0.0))",
                    "inflate = np.sqrt(np.where(n_s > 1, n_s / np.maximum(n_s - 1, 1), 1.0))")},
    **{("diagnose", "check_context_position_bias", line):
       "the segment labels are cast to str, never categorical: observed acts on categoricals only"
       for line in ('lengths = logs.sessions.groupby(logs.sessions["segment"].astype(str), observed=None)["length"].mean()',
                    'lengths = logs.sessions.groupby(logs.sessions["segment"].astype(str), )["length"].mean()')},
    ("diagnose", "_codes", "return frame.groupby(list(frame.columns), sort=None, observed=True).ngroup().to_numpy()"):
        "the codes only say which rows share a stratum: any numbering of the groups gives the same strata",
    ("diagnose", "_codes", "return frame.groupby(list(frame.columns), sort=False, observed=None).ngroup().to_numpy()"):
        "the columns are numpy arrays, never categorical: observed acts on categoricals only",
    **{("diagnose", "_codes", line):
       "the codes only say which rows share a stratum (any numbering of the groups gives the same strata), and the "
       "columns are numpy arrays, never categorical: observed acts on categoricals only"
       for line in ("return frame.groupby(list(frame.columns), sort=False, ).ngroup().to_numpy()",
                    "return frame.groupby(list(frame.columns), sort=True, observed=True).ngroup().to_numpy()",
                    "return frame.groupby(list(frame.columns), sort=False, observed=False).ngroup().to_numpy()",
                    "return frame.groupby(list(frame.columns), observed=True).ngroup().to_numpy()")},
    ("diagnose", "_prepared", "nxt_same = np.r_[sess[1:] == sess[:-1], True]"):
        "the last row's next rank is the sentinel −1, never rank + 1, so it does not continue whatever nxt_same says",
    **{("diagnose", "_prepared", line): "ranks are ≥ 1, so a sentinel below 2 is never rank + 1"
       for line in ("nxt_rank = np.r_[rank[1:], +1]", "nxt_rank = np.r_[rank[1:], -2]")},
    ("diagnose", "_prepared",
     'out["r_any"] = _codes(*(f[c].to_numpy() > 0 for c in binary)) if binary else out["r"].astype(None)'):
        "r_any only stratifies: a float 0/1 column makes the same strata as an int one",
    **{("diagnose", "_rewards_above", line):
       "both callers (check_cascade on slate logs, check_interaction without categories) pass a non-empty why"
       for line in ('f"p = {pv:.2g} (one-sided, a fall)" + (f"; {why}" if (why) or True else "") + ".")',
                    'f"p = {pv:.2g} (one-sided, a fall)" + (f"; {why}" if why else "XXXX") + ".")')},
    ("diagnose", "check_cascade",
     '+ ("users stop after rewards — cascade behaviour." if fires and orr <= 1 else'):
        "the CMH numerator Σ(a − E a) = Σ(ad − bc)/n is 0 exactly when the MH odds ratio is 1: a check with orr = 1 "
        "has p = 1 and never fires",
    ("diagnose", "check_context_position_bias",
     'lengths = logs.sessions.groupby(logs.sessions["segment"].astype(str), observed=False)["length"].mean()'):
        "the segment labels are cast to str, never categorical: observed acts on categoricals only",
    **{("diagnose", fn, line):
       "parse_discount reads the kind case-insensitively and gives the spec in lower case ('LOG2' is log2)"
       for fn, line in (("check_support", 'def check_support(logs: Logs, *, policy: str | None, discount: str = '
                                          '"LOG2", alpha: float = 0.05,'),
                        ("diagnose", 'def diagnose(logs: Logs, *, reward: str, policy: str | None = None, discount: '
                                     'str = "LOG2",'))},
    ("diagnose", "check_support", "total = float(d(np.arange(k + 1)).sum())"):
        "a discount model gives 0 at ranks below 1 (DiscountModel.__call__), so rank 0 adds nothing to the total",
    ("diagnose", "check_support", "sess, w = exposure_weights(logs, policy, discount=discount, )"):
        "exposure_weights' default exposure is pbm",
    ("diagnose", "check_support", 'sess, w = exposure_weights(logs, policy, discount=discount, exposure="PBM")'):
        "parse_discount reads the kind case-insensitively ('PBM' is the learnt pbm)",
    **{("diagnose", "check_support", line):
       "when k ≤ deepest, np.arange(deepest + 1, k + 1) is empty and its sum 0.0, the else value"
       for line in ("beyond = float(d(np.arange(deepest + 1, k + 1)).sum() / total) if (k > deepest) or True else 0.0",
                    "beyond = float(d(np.arange(deepest + 1, k + 1)).sum() / total) if k >= deepest else 0.0")},
    # analyses-correlation-diff
    **{("analyses-correlation-diff", "_kendall_rows", line):
       "the step only batches the rows: each row's τ is computed on its own, in any chunk"
       for line in ("step = max(2, chunk_cells // max(n * n, 1))", "step = max(1, chunk_cells // max(n * n, 2))")},
    ("analyses-correlation-diff", "_kendall_rows", "for start in range(0, n_rows, ):"):
        "with a step of 1 the chunks overlap, and each row is computed again to the same value (only slower)",
    ("analyses-correlation-diff", "_kendall_rows", 'num = np.einsum("KIJ,KIJ->K", s, t, dtype=np.int64)'):
        "einsum subscripts may be upper-case letters; the contraction is the same",
    **{("analyses-correlation-diff", "_kendall_rows", line):
       "numpy sums an int8 array in the default integer (int64) when no dtype is given"
       for line in ("den = np.abs(s).sum(axis=(1, 2), dtype=None) * np.abs(t).sum(axis=(1, 2), dtype=np.int64)",
                    "den = np.abs(s).sum(axis=(1, 2), ) * np.abs(t).sum(axis=(1, 2), dtype=np.int64)",
                    "den = np.abs(s).sum(axis=(1, 2), dtype=np.int64) * np.abs(t).sum(axis=(1, 2), dtype=None)",
                    "den = np.abs(s).sum(axis=(1, 2), dtype=np.int64) * np.abs(t).sum(axis=(1, 2), )")},
    **{("analyses-correlation-diff", "_kendall_rows", line):
       "the divisor is √den with den replaced by 1 where it is 0: no division by zero and no invalid value to silence"
       for line in ('with np.errstate(invalid=None, divide="ignore"):', 'with np.errstate(invalid="ignore", divide=None):',
                    'with np.errstate(divide="ignore"):', 'with np.errstate(invalid="ignore", ):')},
    ("analyses-correlation-diff", "_kendall_rows",
     "out[start:start + step] = np.where(den > 1, num / np.sqrt(np.where(den > 0, den, 1)), np.nan)"):
        "Σ|s| and Σ|t| count each untied pair twice (i, j and j, i), so each is 0 or ≥ 2 and den is 0 or ≥ 4",
    **{("analyses-correlation-diff", "_kendall_rows", line):
       "where den = 0 the outer np.where gives NaN, so the inner divisor there is never used; elsewhere den ≥ 4 "
       "(each untied pair counted twice in Σ|s| and Σ|t|), so > 1 selects the same cells"
       for line in ("out[start:start + step] = np.where(den > 0, num / np.sqrt(np.where(den > 1, den, 1)), np.nan)",
                    "out[start:start + step] = np.where(den > 0, num / np.sqrt(np.where(den > 0, den, 2)), np.nan)")},
    **{("analyses-correlation-diff", "_pearson_rows", line):
       "the divisor is den with 0 replaced by 1.0, so nothing divides by zero; the values are the same (only inputs "
       "near the float limit could raise an invalid-value warning the state silences)"
       for line in ('with np.errstate(invalid=None, divide="ignore"):', 'with np.errstate(invalid="ignore", divide=None):',
                    'with np.errstate(divide="ignore"):', 'with np.errstate(invalid="ignore", ):')},
    **{("analyses-correlation-diff", "_pearson_rows", line):
       "where den = 0 the outer np.where gives NaN, so the inner divisor there is never used"
       for line in ("return np.where(den > 0, (xc * yc).sum(axis=1) / np.where(den >= 0, den, 1.0), np.nan)",
                    "return np.where(den > 0, (xc * yc).sum(axis=1) / np.where(den > 0, den, 2.0), np.nan)")},
    **{("analyses-correlation-diff", "r_difference", line):
       "r_a (or r_b) is NaN only when the online or that offline series is constant (n < 3 makes r_a NaN too), and "
       "then every resample is constant as well: the bootstrap's differences are all NaN, so low and high are NaN, "
       "as in the early return"
       for line in ("if n < 3 or math.isnan(r_a) and math.isnan(r_b):", "if n < 3 and math.isnan(r_a) or math.isnan(r_b):")},
    ("analyses-correlation-diff", "r_difference",
     "gen = rng if (isinstance(rng, np.random.Generator)) and False else np.random.default_rng(rng)"):
        "np.random.default_rng returns a Generator passed to it unchanged",
    ("analyses-correlation-diff", "r_difference", "idx = gen.integers(n, size=(n_boot, n))"):
        "Generator.integers(n) is integers(0, n): the same range and the same draws",
    ("analyses-correlation-diff", "pooled_points",
     'wide = d.pivot_table(index=["experiment_id", "day"], columns="variant", values="offline", )'):
        "a correlation result's daily frame has one offline value per (experiment, day, reward, policy, variant): "
        "the mean of one value is the first",
    ("analyses-correlation-diff", "_kendall_rows",
     "out[start:start + step] = np.where(den > 0, num / np.sqrt(np.where(den >= 0, den, 1)), np.nan)"):
        "where den = 0 the outer np.where gives NaN, so the inner divisor there is never used (its 0 / 0 is silenced)",
    ("analyses-correlation-diff", "_kendall_rows",
     "out[start:start + step] = np.where(den > 0, num / np.sqrt(np.where(den > 0, den, 1)), None)"):
        "assigned into the float array out, the object array's None becomes NaN",
    # analyses-correlation-clip
    **{("analyses-correlation-clip", "correlation_by_clip", line):
       "the daily frame holds every variant's DCG on every experiment-day (a mean of finite per-session values), so "
       "every label is in the pooled table and the else value is never used"
       for line in ('"r": float(pooled.loc[label, "r"]) if (label in pooled.index) or True else math.nan,',
                    '"n_points": int(pooled.loc[label, "n_points"]) if (label in pooled.index) or True else 0})',
                    '"n_points": int(pooled.loc[label, "n_points"]) if label in pooled.index else 1})')},
    **{("analyses-correlation-clip", "correlation_by_clip", line):
       "the correlation table has a cell of every variant, so the median of every label exists and the default is "
       "never used"
       for line in ('"median_r": float(median.get(label, None)),', '"median_r": float(median.get(label, )),')},
    **{("analyses-correlation-clip", "correlation_by_clip", line):
       "variant_label of a raw-label variant (m = 1) names the discount only: 'DCG (log2, C)' whatever the exposure"
       for line in ('for b in dict.fromkeys((variant_label(Variant("dcg", "log2", None, 1.0)),',
                    'for b in dict.fromkeys((variant_label(Variant("dcg", "log2", "XXlog2XX", 1.0)),',
                    'for b in dict.fromkeys((variant_label(Variant("dcg", "log2", "LOG2", 1.0)),')},
    **{("analyses-correlation-clip", "_takeaway", line):
       "pair reads the model's r at the best clip (a finite margin, so that r exists) and at m = ∞ when ∞ is a "
       "clip of the table; the table of correlation_by_clip (the only caller) has a row of the model at every clip, "
       "so the default of r.get is never used"
       for line in ('text = f"{sym} = {r.get((model, m), None):.2f} vs {_better_log2(r, m):.2f}"',
                    'text = f"{sym} = {r.get((model, m), ):.2f} vs {_better_log2(r, m):.2f}"')},
    ("analyses-correlation-clip", "correlation_by_clip",
     "d = points_difference(points, a, b, method=method, n_boot=n_boot, rng=rng)"):
        "points_difference's default level is LEVEL, the level passed",
    ("analyses-correlation-clip", "_holds_surely", 'for m, part in differences.groupby("clip", ):'):
        "groupby sorts by default",
    # analyses-assumptions
    ("analyses-assumptions", "_cells",
     "moments = reduce(logs, Grid(rewards=(reward,), policies=tuple(policies), ))"):
        "Grid's default clips include m = ∞, the one clip summarize_groups reads (its default); the others are "
        "computed and not read",
    **{("analyses-assumptions", "assumption_contrast", line):
       "pandas' std with ddof=1 of a single value is NaN (without a warning), the else value"
       for line in ("se = float(rel.std(ddof=1) / math.sqrt(len(rel))) if (len(rel) > 1) or True else math.nan",
                    "se = float(rel.std(ddof=1) / math.sqrt(len(rel))) if len(rel) >= 1 else math.nan")},
    ("analyses-assumptions", "contrast_takeaway", 'for sw, part in summary.groupby("switch", sort=None):'):
        "pandas' groupby reads sort=None as False: the switches stay in their first-seen order",
    ("analyses-assumptions", "summarize_contrast", 'g = t.groupby(["switch", "assumption", "world"], sort=None)'):
        "pandas' groupby reads sort=None as False: the groups stay in their first-seen order",
    **{("analyses-assumptions", "contrast_takeaway", line):
       "the finding is only compared with 'coverage': any other value takes the unbiasedness branch, as the default"
       for line in ('finding = FINDINGS.get(sw, None)', 'finding = FINDINGS.get(sw, )',
                    'finding = FINDINGS.get(sw, "XXunbiasednessXX")', 'finding = FINDINGS.get(sw, "UNBIASEDNESS")')},
    **{("analyses-assumptions", "visibly_weakened", line):
       "the finding is only compared with 'coverage': any other value takes the unbiasedness rule, as the default"
       for line in ('def visibly_weakened(holds, broken, finding: str = "XXunbiasednessXX") -> bool:',
                    'def visibly_weakened(holds, broken, finding: str = "UNBIASEDNESS") -> bool:')},
    ("analyses-assumptions", "contrast_takeaway",
     'out.append(f"{sw} (breaks {part[\'assumption\'].iloc[1]}): DCG is visibly biased for "'):
        "a switch reaching this line has both worlds, two rows that name the switch's one assumption",
    ("analyses-assumptions", "assumption_contrast", 'for pol, part in cells.groupby("policy", sort=None):'):
        "pandas' groupby reads sort=None as False: the policies stay in their first-seen order",
    ("analyses-assumptions", "contrast_figure",
     'fig = make_subplots(cols=2, subplot_titles=("mean |relative bias| vs the exact truth",'):
        "make_subplots' default is one row",
    ("analyses-assumptions", "contrast_figure",
     'fig.add_hline(y=result.level, line_dash="dash", line_color="grey", col=2)'):
        "with one row, every row of column 2 is the one coverage subplot",
    **{("analyses-assumptions", "contrast_figure", line):
       "with one row (and the second update setting the coverage axis after it), every row or column selects the "
       "same axes to the same final settings"
       for line in ('fig.update_yaxes(tickformat=".0%", title_text="mean |(estimate − truth) / truth|", row=None, col=1)',
                    'fig.update_yaxes(tickformat=".0%", title_text="mean |(estimate − truth) / truth|", col=1)',
                    'fig.update_yaxes(tickformat=".0%", title_text="mean |(estimate − truth) / truth|", row=1, col=None)',
                    'fig.update_yaxes(tickformat=".0%", title_text="mean |(estimate − truth) / truth|", row=1, )',
                    'fig.update_yaxes(tickformat=".0%", range=[0, 1.05], title_text="share of cells covered", row=None, col=2)',
                    'fig.update_yaxes(tickformat=".0%", range=[0, 1.05], title_text="share of cells covered", col=2)')},
    # heldout-mnar
    ("heldout-mnar", "popularity_strata", "strata[order] = (np.arange(pop.size) * n_strata) / pop.size"):
        "assigned into the int64 array strata, the non-negative quotient is truncated: the floor division",
    **{("heldout-mnar", "_stratum_means", line):
       "the key stays one-to-one on (user, stratum) with strata in 0..max, and only np.unique's inverse is used"
       for line in ("key = user * (int(strata.max()) + 1) - strata", "key = user * (int(strata.max()) + 2) + strata")},
    ("heldout-mnar", "estimator_weights", "n_obs = np.bincount(u, minlength=n_users).astype(None)"):
        "numpy's astype(None) is float64",
    **{("heldout-mnar", fn, line): "n_users is max(user) + 1, the bincount's own length"
       for fn, line in (("mnar_estimate", "n_obs = np.bincount(u, ).astype(float)"),
                        ("mnar_estimate", "per_user = np.bincount(group_user, weights=p_v * mean_uv, )"),
                        ("mnar_estimate", "per_user = np.bincount(u, weights=w * lam_v, ) / d"))},
    **{("heldout-mnar", "mnar_estimate", line): "numpy's astype(None) is float64"
       for line in ("n_obs = np.bincount(u, minlength=n_users).astype(None)", "n_uv = np.bincount(inv).astype(None)")},
    **{("heldout-mnar", "mnar_estimate", f'if estimator == "{v}":'):
       "with P(v) = n*_{u,v} / n*_u, Eq. 3's Σ_v P(v) · mean_{S*_{u,v}} λ is Σ λ / n*_u, the naive mean the other "
       "branch computes (the same value up to rounding)" for v in ("XXstratifiedXX", "STRATIFIED")},
    **{("heldout-mnar", "estimator_weights", line): "n_users is max(user) + 1, the bincount's own length"
       for line in ("n_obs = np.bincount(u, ).astype(float)", "n_hat = np.bincount(u, weights=inv_p, )")},
    **{("heldout-mnar", "estimator_weights", line):
       "strata reach it as integers (int64 after mnar_estimate's checks), which numpy reads as int64 without the dtype"
       for line in ("w = _stratum_means(u, np.asarray(strata, dtype=None), inv_p)",
                    "w = _stratum_means(u, np.asarray(strata, ), inv_p)")},
    ("heldout-mnar", "theorem41_terms", "n_u = np.bincount(u, minlength=n_users).astype(None)"):
        "numpy's astype(None) is float64",
    **{("heldout-mnar", "theorem41_terms", line): "n_users is max(user) + 1, the bincount's own length"
       for line in ("n_u = np.bincount(u, ).astype(float)", "n_obs = np.bincount(u, weights=obs.astype(float), )",
                    "n_hat = np.bincount(u, weights=inv * obs, )",
                    "bias_u = np.bincount(u, weights=np.abs(w * p_true - 1.0) * row_ok, )",
                    "sq = np.bincount(u, weights=(w * w) * obs, )")},
    ("heldout-mnar", "theorem41_terms", "n_obs = np.bincount(u, weights=obs.astype(None), minlength=n_users)"):
        "numpy's astype(None) is float64",
    **{("heldout-mnar", "theorem41_terms", line):
       "SNIPS' weight n_u / P̂ / n̂_u has a positive numerator, so a zero n̂_u divides by zero but never makes "
       "0 / 0: no invalid value to silence"
       for line in ('with np.errstate(divide="ignore", invalid=None):', 'with np.errstate(divide="ignore", ):')},
    **{("heldout-mnar", "theorem41_terms", line):
       "the key stays one-to-one on (user, stratum) with strata in 0..max, and only np.unique's inverse is used"
       for line in ("key = u * (int(s.max()) + 1) - s", "key = u * (int(s.max()) + 2) + s")},
    **{("heldout-mnar", "theorem41_terms", line):
       "strata are stratum numbers (integers): read as int64 or as numpy infers them they make the same groups"
       for line in ("s = np.asarray(rel_strata, dtype=None)", "s = np.asarray(rel_strata, )")},
    **{("heldout-mnar", "popularity_strata", line):
       "popularity counts sort the same as integers or floats, and numpy reads the sort kind case-insensitively"
       for line in ("pop = np.asarray(popularity, dtype=None)", "pop = np.asarray(popularity, )",
                    'order = np.argsort(pop, kind="STABLE")')},
    ("heldout-mnar", "theorem41_terms", "cnt = np.bincount(g, weights=obs.astype(None))"):
        "numpy's astype(None) is float64",
    **{("heldout-mnar", "theorem41_terms", line):
       "every division here that can meet a zero is 0 / 0 (a GS stratum without an observed item: sums = cnt = 0; "
       "a user left out, n_u ≤ 1: its sums, weights and maximum are 0), an invalid value, never a nonzero number "
       "over zero (this key covers the GS block's and the final block's errstate, mutated alike)"
       for line in ('with np.errstate(divide=None, invalid="ignore"):', 'with np.errstate(invalid="ignore"):')},
    ("heldout-mnar", "theorem41_terms", "w = np.where(row_ok, w, 1.0)"):
        "rows of users left out (n_u < 2 or nothing observed) only feed their own user's terms, which are set to NaN",
    # slate-kernels
    ("slate-kernels", "normalised_kernel", "safe_b = np.where(b > 0, b, 2.0)"):
        "b_k = 0 only when every weight at slot k is 0 (weights are ≥ 0), so wr and ww are 0 there: the ratio is "
        "set to 0 and the influence term is 0 whatever the stand-in divisor",
    ("slate-kernels", "normalised_kernel", "ratio = np.where(b >= 0, a / safe_b, 0.0)"):
        "b ≥ 0, and where b = 0 every weight at the slot is 0, so a = 0 and a / 1.0 is the else value 0",
    ("slate-kernels", "plain_kernel",
     "return np.bincount(data.session, weights=lam[data.slot - 1] * w * data.reward, )"):
        "the session codes are dense and the last row's session is the last one, so the bincount already has "
        "n_sessions entries",
    # importance-reduce
    ("importance-reduce", "weight_diagnostics", "g = rows.groupby(list(by), sort=True) if by else None"):
        "observed=True is DataFrame.groupby's default in pandas 3",
    ("importance-reduce", "weight_diagnostics", "g = rows.groupby(list(by), observed=True, ) if by else None"):
        "sort=True is DataFrame.groupby's default",
    ("importance-reduce", "_long_values",
     "def _long_values(per: ir.Table, *, rewards: Sequence[str], scales: Sequence[str], exposure: bool = True) -> ir.Table:"):
        "its one caller, reduce_importance, always passes exposure",
    **{("importance-reduce", "_long_values", line):
       "the pooled label is only a partition key of PointNCIS' plug-in window, where NULL is one partition as the "
       "label is, and no real context is NULL (session_labels gives strings)"
       for line in ("per = per.mutate(ctx_=ibis.ifelse(pooled_context(per.ctx_rows_, per.exact), None,",
                    "per = per.mutate(ctx_=ibis.ifelse(pooled_context(per.ctx_rows_, per.exact), ibis.literal(None),")},
    ("importance-reduce", "_aggregate", 'n_exact=long.exact.cast("INT64").sum(),'):
        "ibis reads type names case-insensitively",
    **{("importance-reduce", "_to_long", line):
       "the wide moments (grouped by v, the group keys, reward, kernel and scale) share only v with the variants' "
       "v, clip_value and capping, so the merge's common columns are its key"
       for line in ('wide = wide.merge(variants[["v", "clip_value", "capping"]], on=None)',
                    'wide = wide.merge(variants[["v", "clip_value", "capping"]], )')},
    **{("importance-reduce", "_to_long", line): "three columns of one frame always have the same length"
       for line in ('for k, c, s in zip(wide["kernel"], wide["capping"], wide["scale"], strict=None)]',
                    'for k, c, s in zip(wide["kernel"], wide["capping"], wide["scale"], strict=False)]',
                    'for k, c, s in zip(wide["kernel"], wide["capping"], wide["scale"], )]')},
    **{("importance-reduce", "_to_long", line): "three columns of one frame always have the same length"
       for line in ('for k, s in zip(part["kernel"], part["scale"], strict=None)]',
                    'for k, s in zip(part["kernel"], part["scale"], )]',
                    'for k, s in zip(part["kernel"], part["scale"], strict=False)]')},
    **{("importance-reduce", "_to_long", line):
       "reduce_importance concatenates every policy's frame with ignore_index=True before anyone reads an index, "
       "and within _to_long columns are only assigned from the same frame (the same index object)"
       for line in ('out = pd.concat([wide, *uncapped], ignore_index=None).drop(columns=["v", "kernel", "scale", '
                    '"capping"])',
                    'out = pd.concat([wide, *uncapped], ).drop(columns=["v", "kernel", "scale", "capping"])',
                    'out = pd.concat([wide, *uncapped], ignore_index=False).drop(columns=["v", "kernel", "scale", '
                    '"capping"])',
                    "return pd.concat([log, out], ignore_index=None)",
                    "return pd.concat([log, out], )",
                    "return pd.concat([log, out], ignore_index=False)")},
    **{("importance-reduce", "session_table", line):
       "lp is read only by the exact ν of propensity weights; with exposure weights the column is carried, not read"
       for line in ('lp = t["logging_propensity"] if setup.mode == "propensity" else ibis.literal(None)',
                    'lp = t["logging_propensity"] if setup.mode == "propensity" else ibis.literal(2.0)')},
    ("importance-reduce", "session_table", "nu = nu.mutate(ok=((nu.mass - 1.0).abs() <= EXACT_TOL) & (nu.nu > 0))"):
        "|mass − 1| never equals EXACT_TOL: for a mass in [0.5, 2] the difference is exact and a multiple of 2^-53, "
        "which the double nearest 1e-6 is not (its 2^53 multiple has denominator 2^19); elsewhere it is ≥ 0.5",
    **{("importance-reduce", "session_table", line): "ibis reads type names case-insensitively"
       for line in ('base = t.select("session", "rank", "item_id", *rewards, w=w.cast("FLOAT64"), lp=lp.cast("float64"))',
                    'base = t.select("session", "rank", "item_id", *rewards, w=w.cast("float64"), lp=lp.cast("FLOAT64"))')},
    **{("importance-reduce", "reduce_importance", line):
       "_match_day assigns day from the same frame (the same index object) and _tidy takes the rows by position "
       "and resets the index before anyone reads it"
       for line in ("offline = pd.concat(parts, ignore_index=None)  # the uncapped rows (IS, SNIPS) may overflow "
                    "where capped",
                    "offline = pd.concat(parts, )  # the uncapped rows (IS, SNIPS) may overflow where capped",
                    "offline = pd.concat(parts, ignore_index=False)  # the uncapped rows (IS, SNIPS) may overflow "
                    "where capped")},
    ("importance-reduce", "session_table", "ok, nu_e = ibis.literal(False), ibis.literal(2.0)"):
        "ν is read only where ok, and with exposure weights ok is False on every row",
    **{("importance-reduce", "session_table", line): "ibis reads type names case-insensitively"
       for line in ('aggs = {"m": x.count().cast("FLOAT64"), "s": x.wbar.sum(), "exact": x.ok.cast("int64").min(),',
                    'aggs = {"m": x.count().cast("float64"), "s": x.wbar.sum(), "exact": x.ok.cast("INT64").min(),')},
    **{("importance-reduce", "session_table", line):
       "p__r is read only in sessions whose every row is exact (exact = min(ok) = 1), where no row takes the else "
       "value; SUM skips NULLs"
       for line in ('aggs[f"p__{r}"] = ibis.ifelse(x.ok, x.wbar * x[r] / x.nu, None).sum()',
                    'aggs[f"p__{r}"] = ibis.ifelse(x.ok, x.wbar * x[r] / x.nu, 1.0).sum()')},
    **{("importance-reduce", "_long_values", line): "ibis reads type names case-insensitively"
       for line in ('p2 = per.mutate(u_=u.cast("FLOAT64"), y_=y_ncis.cast("float64"))',
                    'p2 = per.mutate(u_=u.cast("float64"), y_=y_ncis.cast("FLOAT64"))')},
    # slate-estimators
    ("slate-estimators", "_capped", "return w if (math.isinf(clip)) and False else np.minimum(w, clip)"):
        "np.minimum(w, ∞) holds w's values (NaN stays NaN) in w's float64: a copy of weights fresh from "
        "slate_weights, which no caller writes into",
    **{("slate-estimators", "diagnostics", line):
       "weights are ratios of propensities, ≥ 0, so a slot's sum s1 is 0 only where every weight of the slot is "
       "0: the division there is 0 / 0, which numpy flags as invalid, never as divide (a nonzero number over 0)"
       for line in ('with np.errstate(divide=None, invalid="ignore"):', 'with np.errstate(invalid="ignore"):')},
    **{("slate-estimators", "estimate", line):
       "influence values are read only through np.std (the SEs of the target, the logging value and their "
       "paired difference), which a constant shift of them leaves unchanged (up to rounding)"
       for line in ("log_infl = logged + log_value", "value, infl = float(per.mean()), per + per.mean()")},
    **{("slate-estimators", "estimate", line):
       "every branch of the estimator assigns w an array (cascade_dr_values' cumulative weights, adaptive_values' "
       "row weights, weights_for) before it is read, so its initial value and the None case never show"
       for line in ('w = ""', "diagnostics(data, w) if (w is not None) or True else None,")},
    # analyses-clip-tuning
    **{("analyses-clip-tuning", "_tuning_moments", line):
       "reduce_importance's defaults are every reward and policy of the logs, and every capping and scale, each "
       "computed on its own; select reads the one reward, policy and metric (cis: capping max, session scale) asked"
       for line in ('return reduce_importance(logs, policies=(policy,), clips=clips, cappings=("max",),',
                    'return reduce_importance(logs, rewards=(reward,), clips=clips, cappings=("max",),',
                    'return reduce_importance(logs, rewards=None, policies=(policy,), clips=clips, cappings=("max",),',
                    'return reduce_importance(logs, rewards=(reward,), policies=None, clips=clips, cappings=("max",),',
                    'return reduce_importance(logs, rewards=(reward,), policies=(policy,), clips=clips, '
                    'scales=("session",), weights="propensity")',
                    'weights="propensity")')},
    ("analyses-clip-tuning", "_tuning_moments", 'scales=("session",), )'):
        "weights='auto' reads propensities when the logs have logging_propensity, which a propensity policy's tuning "
        "needs anyway (w = π_t / π_p is read from that column)",
    ("analyses-clip-tuning", "clip_tuning",
     "unclipped = _tuning_moments(logs, reward=reward, policy=policy, kind=None, discount=discount,"):
        "reached only with moments given without m = ∞; importance moments always hold c = ∞ (capping_variants adds "
        "it), so kind is 'rank' here, and None takes the same DCG branch",
    **{("analyses-clip-tuning", "recommended_clip", line):
       "parse_discount reads the kind case-insensitively ('PBM' is the learnt pbm) and the result is only the "
       "recommendation, which does not carry the label"
       for line in ('def recommended_clip(logs: Logs, *, reward: str, policy: str, discount: str = "PBM", '
                    'exposure: str = "pbm",',
                    'def recommended_clip(logs: Logs, *, reward: str, policy: str, discount: str = "pbm", '
                    'exposure: str = "PBM",')},
    **{("analyses-clip-tuning", "recommended_clip", line):
       "moments given are only reused for speed: clip_tuning computes the same moments of the policy at the clips"
       for line in ("level=level, moments=None)", "level=level, )")},
    **{("analyses-clip-tuning", "clip_tuning", line):
       "read_logs gives float64 rewards and propensities (the schema converts them), the dtype asked for"
       for line in ("w = (f[TARGET_PROPENSITY_PREFIX + policy].to_numpy(dtype=None)[rows]",
                    '/ f["logging_propensity"].to_numpy(dtype=None)[rows])',
                    "r_max = float(np.max(f[reward].to_numpy(dtype=None))) if len(f) else 1.0")},
    **{("analyses-clip-tuning", "clip_tuning", line):
       "validated logs have at least one row (read_logs refuses empty input), so the else value is never used"
       for line in ("r_max = float(np.max(f[reward].to_numpy(dtype=float))) if (len(f)) or True else 1.0",
                    "r_max = float(np.max(f[reward].to_numpy(dtype=float))) if len(f) else 2.0")},
    ("analyses-clip-tuning", "clip_tuning",
     "excess = np.maximum(w - m, 0.0) if (math.isfinite(m)) or True else np.zeros_like(w)"):
        "at m = ∞, w − m = −∞ for finite weights, so np.maximum gives the zeros of the else branch",
    ("analyses-clip-tuning", "clip_tuning",
     "excess = np.maximum(w - m, 0.0) if math.isfinite(m) else np.zeros_like(None)"):
        "at m = ∞ the excess only enters through sums of dt · excess, which a scalar 0 keeps at 0",
    ("analyses-clip-tuning", "clip_tuning",
     '"clipped_rows": float(np.mean(w > m)) if (w.size) or True else math.nan,'):
        "without rows np.mean of an empty array is NaN, the else value",
    ("analyses-clip-tuning", "clip_tuning", "dt = np.ones_like(None)"):
        "a scalar 1 broadcasts in dt · w and dt · min(m, w) as the ones it stands for",
    **{("analyses-clip-tuning", "clip_tuning", line):
       "DataFrame.to_dict lower-cases its orient (pandas 3.1: orient = orient.lower()), so 'RECORDS' is 'records'"
       for line in ('pooled = {float(r["clip"]): r for r in aggregate(rows, ["clip"]).to_dict("RECORDS")}',
                    'empty = aggregate(rows.iloc[:0]).to_dict("RECORDS")[0]  # a clip value without rows: n = 0, '
                    'a NaN estimate')},
    **{("analyses-clip-tuning", "recommend_clip", line):
       "the old index becomes an extra column that nothing reads (columns are read by name), and the new index is "
       "0..n-1 either way"
       for line in ('t = table.sort_values("clip").reset_index(drop=None)',
                    't = table.sort_values("clip").reset_index(drop=False)')},
    ("analyses-clip-tuning", "mean_offline_effect", 'exposure=exposure, by=("experiment_id",), level=level)'):
        "summarize_groups' default clip is ∞",
    ("analyses-clip-tuning", "mean_offline_effect", 'exposure=exposure, clip=math.inf, by=("experiment_id",), )'):
        "only the effects' values are read, and they do not depend on the level",
    ("analyses-clip-tuning", "mean_offline_effect",
     "effects = [abs(g.effect.value) for g in groups if g.effect is not None or math.isfinite(g.effect.value)]"):
        "summarize_groups is given a policy, so every group has an effect, a mean of finite per-session differences "
        "over the group's sessions: finite, so `or` keeps the same effects",
    **{("analyses-clip-tuning", "clip_tuning", line):
       "w is never empty: offline_mask selects every session when none is in the arm, and validated logs have rows"
       for line in ('"ess": ess, "ess_share": ess / w.size if (w.size) or True else math.nan,',
                    '"max_weight": float(wm.max()) if (wm.size) or True else math.nan,')},
    ("analyses-clip-tuning", "mean_offline_effect", "return float(np.mean(effects)) if (effects) or True else None"):
        "np.mean of no effects is NaN, which recommend_clip and clip_tuning treat as no effect, as None",
    ("analyses-clip-tuning", "recommend_clip",
     'ok = t[(t["clip"] >= slope) & (t["bias_bound"].fillna(None) <= ref)]'):
        "fillna(None) leaves a NaN bias bound, which fails `<= ref` as the inf it stands for does",
    **{("analyses-clip-tuning", "slope_select", line):
       "a list of clip values reads as the same numbers whatever the dtype (float as soon as ∞ is among them), and "
       "the clips of a table are distinct, so the sort's stability never matters (numpy reads the kind "
       "case-insensitively)"
       for line in ('order = np.argsort(-np.asarray(clips, ), kind="stable")',
                    'order = np.argsort(-np.asarray(clips, dtype=float), kind="STABLE")',
                    "order = np.argsort(-np.asarray(clips, dtype=float), kind=None)",
                    "order = np.argsort(-np.asarray(clips, dtype=float), )",
                    'order = np.argsort(-np.asarray(clips, dtype=None), kind="stable")')},
    # importance-bootstrap
    **{("importance-bootstrap", "bootstrap", f"per = offline_rows(per, arm).reset_index(drop={d})"):
       "the old index becomes a column 'index' that values_from_sessions never reads (it reads columns by name and "
       "rows by position), and the new index is 0..n-1 either way"
       for d in ("None", "False")},
    ("importance-bootstrap", "bootstrap", "e = percentile_summary(t0 - l0, diff, n=None, level=level)"):
        "the effect takes bootstrap's own n (Effect(e.value, e.stderr, n, …)): the summary's n is never read",
    ("importance-bootstrap", "_session_estimator",
     'm, s, a, c, w = (per[col].to_numpy(dtype=None) for col in ("m", "s", "a", "c", "w_sum"))'):
        "session_sums gives these columns as float64 (the backend's sums and counts), the dtype asked for",
    ("importance-bootstrap", "_session_estimator", 'p_exact = per["p"].to_numpy(dtype=None)[exact]'):
        "session_sums gives the PointNCIS numerator p as float64, the dtype asked for",
    **{("importance-bootstrap", "_session_estimator", line):
       "the counts are stats.resample_counts' float64 counts (or a caller's integer counts, which every product "
       "and sum with the float64 columns promotes to float64 with the same values: integers below 2**53 are exact)"
       for line in ("k = np.ones(len(m)) if counts is None else np.asarray(counts, dtype=None)",
                    "k = np.ones(len(m)) if counts is None else np.asarray(counts, )")},
    **{("importance-bootstrap", "_session_estimator", line):
       "the pooled context's label only has to differ from every context label (text): None or NaN is one more "
       "label, kept as a group of its own (dropna=False)"
       for line in ('per = per.assign(context_=per["context"].where(~pooled_sessions(per), None))',
                    'per = per.assign(context_=per["context"].where(~pooled_sessions(per), ))')},
    ("importance-bootstrap", "_session_estimator", 'keys = ""'):
        "an empty text is falsy like None: no groups, one ratio (codes stays None)",
    ("importance-normalisation", "pooled_sessions",
     'rows = pd.Series(per["m"].to_numpy(dtype=float)).groupby(groups, dropna=None).transform("sum").to_numpy()'):
        "pandas reads dropna for its truth: None keeps missing labels as a group, as False does",
    ("importance-normalisation", "pooled_sessions",
     'rows = pd.Series(per["m"].to_numpy(dtype=None)).groupby(groups, dropna=False).transform("sum").to_numpy()'):
        "m counts rows: the integer sums compare with the rule's row threshold as their float copies do",
    **{("importance-bootstrap", "bootstrap", line):
       "the chunk only batches the draws: rng.integers in batches of any size is the same stream (the replicates "
       "are the same; a test draws several chunks)"
       for line in ("chunk = max(2, 2_000_000 // max(n, 1))  # resamples drawn at once: about 2 M session counts in memory",
                    "chunk = max(1, 2000001 // max(n, 1))  # resamples drawn at once: about 2 M session counts in memory",
                    "chunk = max(1, 2_000_000 // max(n, 2))  # resamples drawn at once: about 2 M session counts in memory")},
    **{("importance-bootstrap", "_session_estimator", line):
       "pandas reads dropna for its truth: None keeps missing labels as a group, as False does"
       for line in ('dropna=None).transform("sum").to_numpy()',
                    "codes = (per.loc[plug, keys].groupby(keys, sort=False, dropna=None, observed=True).ngroup()"
                    ".to_numpy()")},
    **{("importance-bootstrap", "_session_estimator", line):
       "sort only numbers the groups: the same sessions share a code, and Σ_g U_g R_g is the same sum in another "
       "order"
       for line in ("codes = (per.loc[plug, keys].groupby(keys, sort=None, dropna=False, observed=True).ngroup()"
                    ".to_numpy()",
                    "codes = (per.loc[plug, keys].groupby(keys, sort=True, dropna=False, observed=True).ngroup()"
                    ".to_numpy()",
                    "codes = (per.loc[plug, keys].groupby(keys, dropna=False, observed=True).ngroup().to_numpy()")},
    **{("importance-bootstrap", "_session_estimator", line):
       "observed acts on categorical labels only; an unobserved category would be a group with zero sums, which "
       "group_ratio's zero rule makes contribute 0"
       for line in ("codes = (per.loc[plug, keys].groupby(keys, sort=False, dropna=False, observed=None).ngroup()"
                    ".to_numpy()",
                    "codes = (per.loc[plug, keys].groupby(keys, sort=False, dropna=False, observed=False).ngroup()"
                    ".to_numpy()",
                    "codes = (per.loc[plug, keys].groupby(keys, sort=False, dropna=False, ).ngroup().to_numpy()")},
    **{("importance-bootstrap", "session_sums", line):
       "parse_discount reads the kind case-insensitively: 'PBM' is the learnt pbm (the sums are equal, checked)"
       for line in ('weights: str = "auto", discount: str = "PBM", exposure: str = "pbm", strata="segment",',
                    'weights: str = "auto", discount: str = "pbm", exposure: str = "PBM", strata="segment",')},
    **{("importance-bootstrap", "session_sums", line):
       "session ids are unique, so the sort's stability never matters (pandas reads the kind case-insensitively)"
       for line in ('return out.sort_values("session", kind=None).reset_index(drop=True)',
                    'return out.sort_values("session", ).reset_index(drop=True)',
                    'return out.sort_values("session", kind="STABLE").reset_index(drop=True)')},
    ("importance-bootstrap", "session_sums", 'variants = variants[variants["clip_value"] == clip].assign(v=1)'):
        "v only numbers the variants session_table computes at once; with one variant its value is a label no "
        "reader of the sums uses (values_from_sessions reads m, s, a, c, w_sum, p, exact and the group labels)",
    # analyses-correlation
    ("analyses-correlation", "pooled_correlation",
     'for (reward, variant), part in d.groupby(["reward", "variant"], sort=None):'):
        "groupby reads sort for its truth: None keeps the order of appearance, as False does",
    **{("analyses-correlation", "pooled_correlation", line):
       "online and offline are float64 columns (means per experiment-day), the dtype asked for"
       for line in ('r, _ = _correlate(part["online"].to_numpy(None), part["offline"].to_numpy(float), method)',
                    'r, _ = _correlate(part["online"].to_numpy(float), part["offline"].to_numpy(None), method)')},
    **{("analyses-correlation", "CorrelationResult.series", line):
       "both sequences are columns of the same frame, so they have the same length and strict never fires"
       for line in ('"identity": [v for v, same in zip(t["variant"], t["identity"], strict=None) if same]}',
                    '"identity": [v for v, same in zip(t["variant"], t["identity"], ) if same]}',
                    '"identity": [v for v, same in zip(t["variant"], t["identity"], strict=False) if same]}',
                    '"r": dict(zip(t["variant"], t["r"].astype(float), strict=None)),',
                    '"r": dict(zip(t["variant"], t["r"].astype(float), )),',
                    '"r": dict(zip(t["variant"], t["r"].astype(float), strict=False)),')},
    ("analyses-correlation", "CorrelationResult.series", '"r": dict(zip(t["variant"], t["r"].astype(None), strict=True)),'):
        "r is a float64 column (NaN where no correlation), the dtype asked for",
    **{("analyses-correlation", "CorrelationResult.series", line):
       "a row's daily values come from aggregate by (experiment, day), already in day order, so sorting the days "
       "again changes nothing"
       for line in ('wide = d.pivot_table(index="day", columns="variant", values="offline", aggfunc="first", sort=None)',
                    'wide = d.pivot_table(index="day", columns="variant", values="offline", aggfunc="first", )',
                    'wide = d.pivot_table(index="day", columns="variant", values="offline", aggfunc="first", sort=False)')},
    ("analyses-correlation", "CorrelationResult.series",
     'wide = d.pivot_table(index="day", columns="variant", values="offline", sort=True)'):
        "a row has one offline value per (day, variant): their mean (the default aggfunc) is that value",
    ("analyses-correlation", "CorrelationResult.styled_html", "sort=None):"):
        "groupby reads sort for its truth: None keeps the order of appearance, as False does",
    ("analyses-correlation", "CorrelationResult.wide", "t = self.table.drop_duplicates(None)"):
        "the table has one row per (experiment, reward, policy label, variant) (offline_online_correlation, its "
        "only maker: duplicate variants refused, labels R₀ / Rₜ of at most two policies), so no row is dropped by "
        "either subset",
    ("analyses-correlation", "CorrelationResult.wide", "w = w.swaplevel(None, 1, axis=1)"):
        "the first column level (r / p_value) has no name, so the level named None is level 0",
    ("analyses-correlation", "CorrelationResult.wide", "w = w.swaplevel(0, axis=1)"):
        "swaplevel's second level defaults to the last, which of two levels is level 1",
    ("analyses-correlation", "_pooled_text", "if not pbm_q and not log2:"):
        "with one of the two lists empty there is no pair to compare: the loops add nothing and '' is returned "
        "either way (the table then has rows, so reading its first policy does not fail)",
    ("analyses-correlation", "_pooled_text",
     'policy = str(t["policy"].iloc[1])  # the target policy, whatever it is named'):
        "t holds only the one target policy's rows, at least two of them (a PBM Q̂ and a log2 variant), so its "
        "second row names the same policy",
    ("analyses-correlation", "_common_rows",
     'wide = rows.pivot_table(index=keys, columns="variant", values="r", aggfunc="first", dropna=None)'):
        "pivot_table reads dropna for its truth: None keeps the empty combinations, as False does",
    ("analyses-correlation", "_common_rows",
     'wide = rows.pivot_table(index=keys, columns="variant", values="r", dropna=False)'):
        "one r per (row, variant): the mean (the default aggfunc) of one value is that value",
    **{("analyses-correlation", "_policy_name", f'def _policy_name(policy: str, target: str = "{t}") -> str:'):
       "the default target is only ever compared with 'logging' (the Rt / Rₜ aliases are kept out of the targets by "
       "name), so any other name gives the same"
       for t in ("XXtreatmentXX", "TREATMENT")},
    ("analyses-correlation", "_takeaway", 'aggfunc="first").reindex(index=None)'):
        "& aligns the two Series on their (experiment, reward, policy) index, so the rows sig has beyond common's "
        "(left out for a missing r) only add False",
    ("analyses-correlation", "_takeaway", ").reindex(index=common.index)"):
        "one significance flag per (row, variant): its mean (the default aggfunc) is 1.0 or 0.0, the same truth",
    ("analyses-correlation", "_takeaway", "n_pos = int(((common[top] >= 0) & sig[top].astype(bool)).sum())"):
        "a coefficient of exactly 0 has p = 1, never significant, so it is never counted either way",
    ("analyses-correlation", "_takeaway", "n_pos = int(((common[top] > 0) & sig[top].astype(None)).sum())"):
        "the flags read as float 1.0 / 0.0 (no NaN: the top variant has an r, so a flag, in every common row), "
        "which & takes as the same truth values",
    **{("analyses-correlation", "offline_online_correlation", f"for v, label in zip(variants, labels, {a}):"):
       "labels has one label per variant (duplicates are refused above), so strict never fires"
       for a in ("strict=None", "", "strict=False")},
    ("analyses-correlation", "offline_online_correlation",
     "rows = select(moments, reward=reward, policy=None if (pol == LOGGING_POLICY) and False else pol,"):
        "select reads policy 'logging' as the logging policy, as it reads None (policy or LOGGING_POLICY)",
    ("analyses-correlation", "offline_online_correlation", 'for r in agg.to_dict("RECORDS")]'):
        "pandas' to_dict lower-cases its orient",
    **{("analyses-correlation", "offline_online_correlation", line):
       "the two frames share exactly the columns experiment_id and day, on which merge joins by default, inner"
       for line in ('part = agg[["experiment_id", "day", "offline"]].merge(online, on=None,',
                    'part = agg[["experiment_id", "day", "offline"]].merge(online, how="inner")', ")")},
    **{("analyses-correlation", "offline_online_correlation",
        f'on = on.groupby(["experiment_id", "day", "arm", "reward"], {a})[["n", "sum"]].sum().reset_index()'):
       "observed acts on categorical keys only; even with them the unobserved combinations have n = 0 (online NaN) "
       "and no offline estimate, so the inner merge with the offline days drops them"
       for a in ("observed=None", "", "observed=False")},
    ("analyses-correlation", "offline_online_correlation", 'on["online"] = on["sum"] / on["n"].where(on["n"] >= 0)'):
        "a group with n = 0 sessions has sum 0, and 0 / 0 is NaN, as the masked divisor gives",
    **{("analyses-correlation", "offline_online_correlation", line):
       "the table is sorted by (experiment, reward, policy order) at the end, stably, and each group's rows are "
       "contiguous in variant order: the order the groups were visited in does not show"
       for line in ('for (exp, reward, pol), part in daily.groupby(["experiment_id", "reward", "policy"], sort=None,',
                    'for (exp, reward, pol), part in daily.groupby(["experiment_id", "reward", "policy"], '
                    'observed=True):')},
    **{("analyses-correlation", "offline_online_correlation", line):
       "daily's keys are plain columns (the moments' string keys, the reward and policy names assigned), never "
       "categorical: observed acts on categoricals only"
       for line in ("observed=None):", "):", "observed=False):")},
    ("analyses-correlation", "offline_online_correlation",
     'for (exp, reward, pol), part in daily.groupby(["experiment_id", "reward", "policy"], sort=False,'):
        "the table is sorted by (experiment, reward, policy order) at the end, stably, and each group's rows are "
        "contiguous in variant order: the order the groups were visited in does not show",
    **{("analyses-correlation", "offline_online_correlation",
        f"of_variant = dict(tuple(part.groupby(\"variant\", {a})))  # each variant's rows, in their order"):
       "of_variant is read by label, so the order of its groups does not matter (each keeps its rows' order)"
       for a in ("sort=None", "", "sort=True")},
    **{("analyses-correlation", "offline_online_correlation", line):
       "online and offline are float64 columns, the dtype asked for"
       for line in ('online, offline = d["online"].to_numpy(None), d["offline"].to_numpy(float)',
                    'online, offline = d["online"].to_numpy(float), d["offline"].to_numpy(None)')},
    **{("analyses-correlation", "offline_online_correlation", f"{a})]"):
       "the zipped sequences are columns of one table, of the same length, so strict never fires"
       for a in ("strict=None", "", "strict=False")},
    **{("analyses-correlation", "offline_online_correlation",
        f'best = ranked.groupby([table["experiment_id"], table["reward"], table["policy"]], {a}).transform("max")'):
       "transform returns each row's group maximum on the row's own index, whatever the order of the groups"
       for a in ("sort=None", "", "sort=True")},
    **{("analyses-correlation", "offline_online_correlation",
        f'if s.name == "policy" else s, {a}).reset_index(drop=True)'):
       "pandas applies kind only when sorting by one column: by three it sorts stably (lexsort) whatever kind says"
       for a in ("kind=None", "", 'kind="XXstableXX"', 'kind="STABLE"')},
}


def _existing_tests(mod: Module) -> list[str]:
    """The module's test arguments whose files exist (a selection may name a file a later change adds)."""
    out, skip_next = [], False
    for i, t in enumerate(mod.tests):
        if skip_next:
            skip_next = False
            continue
        if t.startswith("--deselect="):
            out.append(t)
            continue
        if t == DOCTEST:
            if i + 1 < len(mod.tests) and (ROOT / mod.tests[i + 1]).exists():
                out += [t, mod.tests[i + 1]]
            skip_next = True
            continue
        if (ROOT / t.split("::")[0]).exists():
            out.append(t)
    return out


def _digest(paths: list[Path], extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()[:16]


def source_key(mod: Module) -> str:
    return _digest([ROOT / mod.source], "|".join(DO_NOT_MUTATE_PATTERNS))


def tests_key(mod: Module) -> str:
    files = sorted({ROOT / t.split("::")[0] for t in _existing_tests(mod) if t != DOCTEST})
    return _digest([*files, ROOT / "tests" / "conftest.py"], " ".join(_pytest_args(mod) + _existing_tests(mod)))


def _pytest_args(mod: Module) -> list[str]:
    """The pytest arguments of every run of the module's tests (the selection aside)."""
    return PYTEST_ARGS + (DOCTEST_ARGS if DOCTEST in mod.tests else []) + (TIMING_ARGS if mod.timed else [])


def _env() -> dict:
    """The environment of mutmut and of the fresh-process reruns: tools/ importable (the timing plugin)."""
    path = os.pathsep.join(p for p in (str(ROOT / "tools"), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, HYPOTHESIS_PROFILE="ci", PYTHONDONTWRITEBYTECODE="1", OFFEVAL_PREPARE="0",
                PYTHONPATH=path)


def _load_state() -> dict:
    return json.loads(STATE.read_text()) if STATE.exists() else {}


def _save_state(state: dict, name: str) -> None:
    """Record one module's entry (merged into the file as it is now: two runs may share it)."""
    WORK.mkdir(exist_ok=True)
    current = _load_state()
    current[name] = state[name]
    tmp = STATE.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(current, indent=1, sort_keys=True))
    tmp.replace(STATE)


def _toml_list(xs) -> str:
    return "[" + ", ".join(json.dumps(x) for x in xs) + "]"


def _prepare(name: str, mod: Module, *, isolation: str = "fork") -> Path:
    """The module's work directory: links to the package and the tests, and a pyproject.toml with mutmut's
    settings for this module appended to the project's."""
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    for link in ("offeval_core", "tests"):
        p = work / link
        if not p.is_symlink():
            p.symlink_to(ROOT / link)
    config = (ROOT / "pyproject.toml").read_text() + "\n[tool.mutmut]\n" + "\n".join([
        'source_paths = ["offeval_core"]',
        f"only_mutate = {_toml_list([mod.source])}",
        f"do_not_mutate_patterns = {_toml_list(DO_NOT_MUTATE_PATTERNS)}",
        f"pytest_add_cli_args_test_selection = {_toml_list(_existing_tests(mod))}",
        f"pytest_add_cli_args = {_toml_list(_pytest_args(mod))}",
        "use_git_change_detection = false",
        f'process_isolation = "{isolation}"',
        'forkserver_warmup = "collect"',
        "timeout_multiplier = 10.0",
        # wall-clock limit (estimate + constant) × multiplier: the estimate counts only the tests' calls, not
        # their fixtures' setup or pytest's start, which take tens of seconds on two loaded cores
        "timeout_constant = 60.0",
    ]) + "\n"
    cfg = work / "pyproject.toml"
    if not cfg.exists() or cfg.read_text() != config:
        cfg.write_text(config)
    return work


def _meta(work: Path, mod: Module) -> dict:
    path = work / "mutants" / (mod.source + ".meta")
    return json.loads(path.read_text()) if path.exists() else {"exit_code_by_key": {}}


def _forget_crashes(work: Path, mod: Module) -> None:
    """A worker that crashed (a signal other than the CPU-time limit) says nothing about the mutant: run it again."""
    path = work / "mutants" / (mod.source + ".meta")
    if not path.exists():
        return
    meta = json.loads(path.read_text())
    codes = meta["exit_code_by_key"]
    crashed = [k for k, c in codes.items() if c is not None and c < 0 and c != -24]
    if crashed:
        for k in crashed:
            codes[k] = None
        path.write_text(json.dumps(meta))


def _forget_test_map(work: Path) -> None:
    """mutmut maps each function to the tests that call it once, and later maps only tests it has not seen: an
    edited test that now calls another function would not be run against that function's mutants. When the
    tests changed, the map is emptied so mutmut collects it again over every test (results are kept)."""
    path = work / "mutants" / "mutmut-stats.json"
    if path.exists():
        data = json.loads(path.read_text())
        data["tests_by_mangled_function_name"], data["duration_by_test"] = {}, {}
        path.write_text(json.dumps(data))


def _fresh_process(work: Path, mod: Module, key: str) -> int | None:
    """The mutant's exit code from its own pytest process over the module's selection (1 = a test failed)."""
    env = dict(_env(), MUTANT_UNDER_TEST=key)
    cmd = ["nice", "-n", "10", sys.executable, "-m", "pytest", "-x", "-q", *_pytest_args(mod), *_existing_tests(mod)]
    try:
        return subprocess.run(cmd, cwd=work / "mutants", env=env, capture_output=True, timeout=900,
                              stdin=subprocess.DEVNULL).returncode
    except subprocess.TimeoutExpired:
        return None


def _record(work: Path, mod: Module, codes: dict) -> None:
    if not codes:
        return
    path = work / "mutants" / (mod.source + ".meta")
    meta = json.loads(path.read_text())
    meta["exit_code_by_key"].update(codes)
    path.write_text(json.dumps(meta))


STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", None: "not checked",
          -11: "crashed", -9: "crashed"}


def _status(code) -> str:
    return STATUS.get(code, "suspicious")


def _mutmut(work: Path, *args: str, capture: bool = False, log: Path | None = None) -> subprocess.CompletedProcess:
    """mutmut in the module's work directory, niced (the machine is shared); its progress goes to ``log``."""
    env = _env()
    cmd = ["nice", "-n", "10", str(BIN / "mutmut"), *args]
    if log is None:
        return subprocess.run(cmd, cwd=work, env=env, text=True, capture_output=capture, stdin=subprocess.DEVNULL)
    with log.open("a") as out:  # (no terminal input: a test reading it would stop a background run)
        return subprocess.run(cmd, cwd=work, env=env, text=True, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)


_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, keys = sys.argv[1], json.loads(sys.stdin.read())
print(json.dumps({k: get_diff_for_mutant(k, path=path) for k in keys}))
"""


def _diffs(work: Path, mod: Module, keys: list[str]) -> dict[str, str]:
    """The changed lines of each mutant (mutmut's diff without its headers), read in one process."""
    if not keys:
        return {}
    out = subprocess.run([sys.executable, "-c", _DIFFS, mod.source], cwd=work, input=json.dumps(keys), text=True,
                         capture_output=True, check=True).stdout
    return {k: "\n".join(line for line in d.splitlines() if line.startswith(("-", "+")) and
                         not line.startswith(("---", "+++"))) for k, d in json.loads(out).items()}


def _function(key: str) -> str:
    fn = key.rpartition(".")[2].partition("__mutmut_")[0]
    return fn.removeprefix("x_").removeprefix("xǁ").replace("ǁ", ".")


def _summarise(name: str, mod: Module, work: Path) -> dict:
    codes = _meta(work, mod)["exit_code_by_key"]
    counts: dict[str, int] = {}
    for code in codes.values():
        counts[_status(code)] = counts.get(_status(code), 0) + 1
    alive = sorted(k for k, code in codes.items() if _status(code) not in ("killed", "timeout", "not checked"))
    diffs = _diffs(work, mod, alive)
    survivors = [{"key": k, "status": _status(codes[k]), "function": _function(k), "diff": diffs[k]} for k in alive]
    killed = counts.get("killed", 0) + counts.get("timeout", 0)
    not_run = counts.get("not checked", 0)
    total = sum(counts.values()) - not_run
    return {"total": total, "killed": killed, "not_run": not_run, "counts": counts, "survivors": survivors}


def function_patterns(prefix: str, functions) -> list[str]:
    """mutmut's names of the mutants of the named functions (``f`` or ``Class.method``), as patterns.

    >>> function_patterns("offeval_core.stats", ["pearson", "Moments.require"])
    ['offeval_core.stats.x_pearson__mutmut_*', 'offeval_core.stats.xǁMomentsǁrequire__mutmut_*']
    """
    return [f"{prefix}.x{'ǁ' + f.replace('.', 'ǁ') if '.' in f else '_' + f}__mutmut_*" for f in functions]


def pack_record(meta: dict, prefix: str) -> dict:
    """mutmut's results of one source file (its mutants' keys start with ``prefix``, the module's dotted name),
    compact: per function its source hash and the exit codes of its mutants 1, 2, … (None: not run yet).

    >>> meta = {"exit_code_by_key": {"m.x_f__mutmut_2": 0, "m.x_f__mutmut_1": 1, "m.x_g__mutmut_1": None},
    ...         "hash_by_function_name": {"x_f": "a1", "x_g": "b2", "x_h": "c3"}}
    >>> pack_record(meta, "m")
    {'x_f': {'hash': 'a1', 'codes': [1, 0]}, 'x_g': {'hash': 'b2', 'codes': [None]}, 'x_h': {'hash': 'c3', 'codes': []}}
    """
    by_function: dict[str, dict[int, int | None]] = {}
    for key, code in meta["exit_code_by_key"].items():
        stem, _, number = key.rpartition("__mutmut_")
        if not stem.startswith(prefix + ".") or not number.isdigit():
            raise ValueError(f"{key}: not a mutant of {prefix}")
        by_function.setdefault(stem[len(prefix) + 1:], {})[int(number)] = code
    unknown = sorted(set(by_function) - set(meta["hash_by_function_name"]))
    if unknown:
        raise ValueError(f"{prefix}: mutants of functions without a hash: {', '.join(unknown)}")
    out: dict[str, dict] = {}
    for function, h in sorted(meta["hash_by_function_name"].items()):
        codes = by_function.get(function, {})
        if sorted(codes) != list(range(1, len(codes) + 1)):
            raise ValueError(f"{prefix}.{function}: mutant numbers {sorted(codes)} are not 1…{len(codes)}")
        out[function] = {"hash": h, "codes": [codes[i] for i in range(1, len(codes) + 1)]}
    return out


def unpack_record(packed: dict, prefix: str) -> dict:
    """The meta file mutmut reads (``mutants/<source>.meta``) from :func:`pack_record`'s form.

    >>> meta = {"exit_code_by_key": {"m.x_f__mutmut_1": 1, "m.x_f__mutmut_2": None},
    ...         "hash_by_function_name": {"x_f": "a1"}}
    >>> back = unpack_record(pack_record(meta, "m"), "m")
    >>> back["exit_code_by_key"] == meta["exit_code_by_key"], back["hash_by_function_name"]
    (True, {'x_f': 'a1'})
    """
    codes = {f"{prefix}.{function}__mutmut_{i}": c
             for function, entry in packed.items() for i, c in enumerate(entry["codes"], start=1)}
    return {"exit_code_by_key": codes, "hash_by_function_name": {f: e["hash"] for f, e in packed.items()},
            "type_check_error_by_key": {}, "durations_by_key": {}, "estimated_durations_by_key": {}}


def _prefix(mod: Module) -> str:
    """The dotted name mutmut gives the module's mutants (``offeval_core/stats.py`` → ``offeval_core.stats``)."""
    return mod.source.removesuffix(".py").replace("/", ".")


def _record_path(name: str) -> Path:
    return RECORDS / f"{name}.json"


def save_record(name: str) -> Path | None:
    """Write the module's committed record from its work directory (also part-way through a run, or after one was
    stopped: mutmut writes each result as it comes)."""
    mod = MODULES[name]
    meta = _meta(WORK / name, mod)
    if not meta["exit_code_by_key"]:
        return None
    codes = meta["exit_code_by_key"].values()
    record = {"module": name, "source": source_key(mod), "tests": tests_key(mod), "selection": _existing_tests(mod),
              "when": time.strftime("%Y-%m-%d %H:%M"), "mutants": len(codes),
              "not_run": sum(c is None for c in codes), "results": pack_record(meta, _prefix(mod))}
    RECORDS.mkdir(exist_ok=True)
    path = _record_path(name)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _seed_from_record(name: str, mod: Module, work: Path) -> dict | None:
    """A work directory without results starts from the module's committed record (returned), if there is one."""
    meta_path = work / "mutants" / (mod.source + ".meta")
    path = _record_path(name)
    if meta_path.exists() or not path.exists():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    meta_path.parent.mkdir(parents=True, exist_ok=True)
    meta_path.write_text(json.dumps(unpack_record(record["results"], _prefix(mod))))
    print(f"   from the record of {record['when']}: {record['mutants'] - record['not_run']} of {record['mutants']} "
          "mutants run (mutmut reruns the functions changed since)", flush=True)
    return record


def run_module(name: str, *, full: bool, jobs: int, state: dict, check: int = 0, functions=()) -> dict:
    """Run the module's mutants (only those of ``functions`` when given: a partial run, recorded as such)."""
    mod = MODULES[name]
    work = _prepare(name, mod)
    prev = state.get(name, {})
    skey, tkey = source_key(mod), tests_key(mod)
    if full and (work / "mutants").exists():
        shutil.rmtree(work / "mutants")
    record = None if full else _seed_from_record(name, mod, work)
    if record is not None and not prev:
        prev = {"tests": record["tests"], "selection": record["selection"]}
    t0 = time.perf_counter()
    print(f"== {name}: {mod.source} against {' '.join(_existing_tests(mod))}", flush=True)
    _forget_crashes(work, mod)
    if prev.get("tests") != tkey:
        _forget_test_map(work)
    before = _meta(work, mod)["exit_code_by_key"]
    log = work / "run.log"
    log.write_text("")
    proc = _mutmut(work, "run", "--max-children", str(jobs), *function_patterns(_prefix(mod), functions), log=log)
    if proc.returncode:
        tail = "\n".join(log.read_text(errors="replace").replace("\r", "\n").splitlines()[-30:])
        raise SystemExit(f"{tail}\nmutmut failed on {name} (exit {proc.returncode}); the whole log: {log}")
    selection = _existing_tests(mod)
    if not full and not functions and prev.get("tests") != tkey and prev.get("selection", selection) == selection:
        # (a changed selection makes mutmut itself rerun every mutant)
        # the tests changed (or were never recorded): mutmut keeps every earlier result, so the mutants that
        # survived an earlier run are run again against the current tests
        codes = _meta(work, mod)["exit_code_by_key"]
        again = sorted(k for k, c in before.items() if c is not None and _status(c) not in ("killed", "timeout")
                       and codes.get(k) == c)
        # a survivor recorded as equivalent survives every test (it computes the same thing): not run again
        diffs = _diffs(work, mod, again)
        known = {k for k in again if equivalence(name, {"function": _function(k), "diff": diffs[k]})}
        again = [k for k in again if k not in known]
        if again or known:
            print(f"   tests changed: rerunning {len(again)} earlier survivors ({len(known)} recorded as equivalent "
                  "are not run again)", flush=True)
        if again:
            _mutmut(work, "run", "--max-children", str(jobs), *again, log=log)
    # Workers fork from mutmut's process: fast, but a worker that crashes says nothing about its mutant, and a
    # timeout on a loaded machine may be the machine's. Those mutants, and a sample of the killed ones as a
    # check, are run again, each in a fresh pytest process in mutmut's copy with MUTANT_UNDER_TEST naming the
    # mutant (nothing forked, 15 minutes at most: a mutant that still runs out of time stays a timeout).
    codes = _meta(work, mod)["exit_code_by_key"]
    again = sorted(k for k, c in codes.items() if _status(c) in ("crashed", "suspicious", "timeout"))
    killed = sorted(k for k, c in codes.items() if _status(c) == "killed")
    sample = [killed[i] for i in range(0, len(killed), max(1, len(killed) // check))] if check and killed else []
    if again or sample:
        print(f"   fresh-process rerun: {len(again)} crashed or out of time, {len(sample)} killed ones as a check",
              flush=True)
        fresh = {k: _fresh_process(work, mod, k) for k in [*again, *sample]}
        _record(work, mod, {k: c for k, c in fresh.items() if k in again and c in (0, 1)})
        flipped = [k for k in sample if fresh[k] != 1]
        if flipped:
            print(f"   WARNING: {len(flipped)} of {len(sample)} killed mutants are not killed in a fresh process: "
                  + ", ".join(flipped), flush=True)
    result = _summarise(name, mod, work)
    if result["not_run"]:  # a partial run: `make mutate` runs the module again until every mutant has run
        skey = tkey = "partial"
    state[name] = {"source": skey, "tests": tkey, "selection": selection, "seconds": round(time.perf_counter() - t0),
                   "when": time.strftime("%Y-%m-%d %H:%M"), "result": result}
    _save_state(state, name)
    save_record(name)
    return state[name]


def equivalence(name: str, survivor: dict) -> str | None:
    """The recorded reason a survivor is equivalent, or None (untriaged)."""
    new = "\n".join(line[1:].strip() for line in survivor["diff"].splitlines() if line.startswith("+"))
    return EQUIVALENT.get((name, survivor["function"], new))


def _line(name: str, entry: dict) -> str:
    r = entry["result"]
    rate = r["killed"] / r["total"] if r["total"] else float("nan")
    untriaged = sum(1 for s in r["survivors"] if not equivalence(name, s))
    partial = f"  ({r['not_run']} not run yet)" if r.get("not_run") else ""
    return (f"{name:28s} {r['killed']:5d} / {r['total']:5d} killed ({rate:6.1%})  survivors {len(r['survivors']):3d}"
            f" (untriaged {untriaged:3d})  {entry['seconds']:5d} s  {entry['when']}{partial}")


def report(state: dict, names, *, survivors: bool) -> int:
    worst = 1.0
    for name in names:
        entry = state.get(name)
        if entry is None:
            print(f"{name:28s} not run")
            continue
        fresh = entry["source"] == source_key(MODULES[name]) and entry["tests"] == tests_key(MODULES[name])
        print(_line(name, entry) + ("" if fresh else "  (stale: source or tests changed since)"))
        r = entry["result"]
        if r["total"]:
            worst = min(worst, r["killed"] / r["total"])
        if survivors:
            for s in r["survivors"]:
                reason = equivalence(name, s)
                tag = f"equivalent: {reason}" if reason else s["status"]
                print(f"    {s['key']}  [{tag}]")
                for line in s["diff"].splitlines():
                    print(f"        {line}")
    return 0 if worst >= 0.9 else 1


def _cell(text: str) -> str:
    """Text in a Markdown table cell: a ``|`` (``abs`` bars, ``or``) escaped, so it does not end the cell."""
    return text.replace("|", "\\|")


def markdown(state: dict, names) -> str:
    """The rate table and the equivalent survivors of docs/mutation.md, from the recorded results."""
    out = ["| module | source | mutants | killed | rate | survivors | equivalent | untriaged |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    eq_lines = []
    for name in names:
        entry = state.get(name)
        if entry is None:
            out.append(f"| {name} | `{MODULES[name].source}` | not run | | | | | |")
            continue
        r = entry["result"]
        eq = [(s, equivalence(name, s)) for s in r["survivors"]]
        n_eq = sum(1 for _, reason in eq if reason)
        rate = r["killed"] / r["total"] if r["total"] else float("nan")
        partial = f" (and {r['not_run']} not run yet)" if r.get("not_run") else ""
        out.append(f"| {name} | `{MODULES[name].source}` | {r['total']}{partial} | {r['killed']} | {rate:.1%} | "
                   f"{len(r['survivors'])} | {n_eq} | {len(r['survivors']) - n_eq} |")
        for s, reason in eq:
            change = " → ".join(f"`{_cell(line[1:].strip())}`" for line in s["diff"].splitlines())
            eq_lines.append(f"| {name} | `{s['function']}` | {change} | "
                            + (_cell(reason) if reason else f"**untriaged** ({s['status']})") + " |")
    out += ["", "| module | function | change | why it is equivalent |", "|---|---|---|---|", *eq_lines]
    return "\n".join(out).replace("\u01c1", ".")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help="module ids (default: every module whose source or tests changed)")
    ap.add_argument("--list", action="store_true", help="list the modules and their test selections")
    ap.add_argument("--report", action="store_true", help="print the recorded results, run nothing")
    ap.add_argument("--survivors", action="store_true", help="with the report: every survivor and its diff")
    ap.add_argument("--markdown", action="store_true", help="the rate table and survivors for docs/mutation.md")
    ap.add_argument("--full", action="store_true", help="rerun every mutant of the chosen modules")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1: the machine is shared)")
    ap.add_argument("--record", action="store_true",
                    help="write the chosen modules' committed records (tools/mutation_records/) from their work "
                         "directories, run nothing (e.g. after stopping a run part-way)")
    ap.add_argument("--functions", nargs="+", default=(), metavar="FUNCTION",
                    help="with one module: run only the mutants of these functions (f or Class.method), e.g. "
                         "the ones changed since the module's last full run; the module is recorded as partial")
    ap.add_argument("--check", type=int, default=0,
                    help="rerun about this many killed mutants in isolated workers to confirm the kills")
    args = ap.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        ap.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    names = args.modules or list(MODULES)
    if args.functions and len(args.modules) != 1:
        ap.error("--functions needs exactly one module")
    if args.list:
        for n in names:
            print(f"{n:28s} {MODULES[n].source:42s} {' '.join(_existing_tests(MODULES[n]))}")
        return 0
    if args.record:
        for n in args.modules:
            path = save_record(n)
            print(f"{n}: {path.relative_to(ROOT) if path else 'no results in ' + str(WORK / n)}")
        return 0
    state = _load_state()
    if args.markdown:
        print(markdown(state, names))
        return 0
    if not args.report:
        for n in names:
            entry = state.get(n)
            unchanged = (entry is not None and entry["source"] == source_key(MODULES[n])
                         and entry["tests"] == tests_key(MODULES[n]))
            if unchanged and not args.full and not args.modules:
                continue
            run_module(n, full=args.full, jobs=args.jobs, state=state, check=args.check, functions=args.functions)
            print(_line(n, state[n]), flush=True)
    print()
    return report(state, names, survivors=args.survivors)


if __name__ == "__main__":
    raise SystemExit(main())
