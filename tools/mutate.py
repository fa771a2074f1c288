"""Hand-written mutation testing of the formula code.

Each mutant is one textual replacement (file, old, new) in a copy of the package; the tests that guard that
code run on the copy with ``-x``; the mutant is *killed* when they fail. The report lists every mutant with
its outcome and the kill rate. Slow (one pytest run per mutant): not part of ``make test``; the result is
recorded in docs/mutation.md.

    PYTHONPATH=. .venv/bin/python tools/mutate.py            # every mutant
    PYTHONPATH=. .venv/bin/python tools/mutate.py -k stats    # mutants whose id contains "stats"
    PYTHONPATH=. .venv/bin/python tools/mutate.py --list      # list them

When a mutant's text is not in its file (the file was moved or split), it is looked up in every module of
the package and applied where it occurs exactly once; otherwise it is reported as ``missing``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STATS = ["tests/test_formulas.py", "tests/test_stats.py", "tests/test_stable_moments.py", "--doctest-modules",
         "offeval_core/stats.py"]
EST = ["tests/test_formulas.py", "tests/test_stats.py", "tests/test_worked_examples.py", "tests/test_stable_moments.py"]
IMP = ["tests/test_formulas.py", "tests/test_importance_keys.py", "tests/test_ncis_session_scale.py",
       "tests/test_importance.py::test_identities_on_multislot_logs",
       "tests/test_importance.py::test_counterexample_reproduces_table1_exactly",
       "tests/test_importance.py::test_weight_diagnostics_values",
       "tests/test_importance.py::test_midzuno_sen_is_unbiased_for_inverse_capped_share",
       "tests/test_importance.py::test_two_ratio_effect_matches_influence_function",
       "--doctest-modules", "offeval_core/importance"]
ENGINE = ["tests/test_formulas.py", "tests/test_engine.py::test_reduce_matches_the_reference_loop",
          "tests/test_engine.py::test_paired_effect_and_ndcg_drop_rule_match_the_reference",
          "tests/test_worked_examples.py", "tests/test_stable_moments.py"]
DEC = ["tests/test_formulas.py", "tests/test_analyses_decisions.py", "--doctest-modules",
       "offeval_core/analyses/decisions.py"]
MNAR = ["tests/test_formulas.py", "tests/test_heldout_mnar.py", "--doctest-modules", "offeval_core/heldout/mnar.py"]
ARMS = ["tests/test_formulas.py", "--doctest-modules", "offeval_core/arms.py"]
CLIPCORR = ["tests/test_analyses_correlation_clip.py", "--doctest-modules", "offeval_core/analyses/correlation_clip.py"]
VERD = ["tests/test_verdicts.py", "--doctest-modules", "offeval_core/verdicts.py"]


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    note: str = ""


def M(id, file, old, new, tests, note=""):
    return Mutant(id, file, old, new, tuple(tests), note)


S, E, IM, G, D, H = ("offeval_core/stats.py", "offeval_core/estimators.py", "offeval_core/importance",
                    "offeval_core/engine", "offeval_core/analyses/decisions.py", "offeval_core/heldout/mnar.py")

MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- stats
    M("stats-var-ddof", S, "return max(float(m2), 0.0) / (n - 1)", "return max(float(m2), 0.0) / n", STATS),
    M("stats-var-n1", S, "    if n < 2:\n        return math.nan\n    check_finite(m2",
      "    if n < 1:\n        return math.nan\n    check_finite(m2", STATS),
    M("stats-moments-of-unshifted", S, "m2 = float(np.sum((x - mean) ** 2))", "m2 = float(np.sum(x ** 2) - total * mean)",
      STATS, "the second moment without its shift (raw Σx² − (Σx)²/n)"),
    M("stats-one-sided-nan-se", S, "    if math.isnan(stderr) or math.isnan(value):\n        return math.nan\n    if not stderr > 0:\n        if value > 0:",
      "    if not stderr > 0:\n        if value > 0:", STATS, "an undefined SE gives p = 0"),
    M("stats-quantile-level", S, "return float(_sc.ndtri(0.5 + level / 2))", "return float(_sc.ndtri(level))",
      STATS),
    M("stats-one-sided-cdf", S, "return float(_sc.ndtr(-(value / stderr)))", "return float(_sc.ndtr(value / stderr))",
      STATS),
    M("stats-one-sided-zero-se", S, "return 1.0 if value < 0 else 0.5", "return 1.0 if value < 0 else 0.0", STATS,
      "one_sided_p(0, se=0)"),
    M("stats-two-sided-factor2", S, "return float(2 * _sc.ndtr(-(abs(value) / stderr)))",
      "return float(_sc.ndtr(-(abs(value) / stderr)))", STATS, "two_sided_p without its factor 2"),
    M("stats-two-sided-zero-se", S, "        return 1.0 if value == 0 else 0.0\n    return float(2 * _sc.ndtr",
      "        return 0.0 if value == 0 else 0.0\n    return float(2 * _sc.ndtr", STATS),
    M("stats-mean-se", S, "math.sqrt(sample_variance(n, m2) / n)", "math.sqrt(sample_variance(n, m2) / (n - 1))", STATS),
    M("stats-welch-tcrit", S, "t_crit = float(_sc.stdtrit(df, 0.5 + level / 2))", "t_crit = float(_sc.stdtrit(df, level))",
      STATS),
    M("stats-welch-df", S, "return (a + b) ** 2 / denom", "return (a + b) / denom", STATS),
    M("stats-welch-p2", S, "return float(2 * _sc.stdtr(welch_df(a, b, n_t, n_c), -(abs(diff) / se)))",
      "return float(_sc.stdtr(welch_df(a, b, n_t, n_c), -(abs(diff) / se)))", STATS),
    M("stats-welch-p1-sign", S, "p = float(_sc.stdtr(df, -(diff / se)))", "p = float(_sc.stdtr(df, diff / se))", STATS),
    M("stats-ratio-cov2", S, "_delta_variance(var_x, -2 * r * cov, r * r * var_y)",
      "_delta_variance(var_x, -r * cov, r * r * var_y)", STATS),
    M("stats-ratio-meany2", S, "/ (n * mean_y * mean_y)", "/ (n * mean_y)", STATS),
    # ---------------------------------------------------------------- estimators
    M("est-ratiodiff-cross-sign", E, "-2 * co_ac / be", "2 * co_ac / be", EST),
    M("est-ratiodiff-v1-factor", E, "-2 * r1 * co_ab / b2", "-r1 * co_ab / b2", EST),
    M("est-ratiodiff-cov-ddof", E, "    k = n - 1\n", "    k = n\n", EST),
    M("est-ratiodiff-c10-term", E, "2 * r1 * co_bc / be", "2 * r0 * co_bc / be", EST),
    M("est-pndcg-diff-moment", E, '("sum_diff", "m2_diff", "co_diff_den")', '("sum_diff", "m2_diff", "co_den")',
      EST, "pnDCG paired-effect SE reading the wrong co-moment"),
    M("est-pool-spread", "offeval_core/moment_columns.py",
      "spread = values[:, layout.counts][:, layout.count_at] * d[:, layout.x] * d[:, layout.y]",
      "spread = 0.0 * d[:, layout.x] * d[:, layout.y]", EST, "pooled second moments without the between-group part"),
    M("est-merge-twice", "offeval_core/moment_columns.py",
      "out[..., layout.second] += layout.between(a[..., layout.counts]",
      "out[..., layout.second] += 2 * layout.between(a[..., layout.counts]", EST,
      "Chan's between-group term applied twice"),
    M("est-ratio-diff-p", E, "return Effect(est.value, est.stderr, est.n, est.ci, stats.one_sided_p(est.value, est.stderr))",
      "return Effect(est.value, est.stderr, est.n, est.ci, stats.two_sided_p(est.value, est.stderr))", EST),
    M("est-welch-swap", E, 'stats.welch_effect(t[0], t[1], t[2], c[0], c[1], c[2], level=level)',
      'stats.welch_effect(c[0], c[1], c[2], t[0], t[1], t[2], level=level)', EST),
    M("est-select-all-arms", E, 'clip: float = math.inf, arm: str | None = OFFLINE_ARM) -> pd.DataFrame:',
      'clip: float = math.inf, arm: str | None = None) -> pd.DataFrame:', EST, "offline rows = control arm"),
    M("est-impression-se", E, "se = math.sqrt(t.stderr ** 2 + c.stderr ** 2)", "se = t.stderr + c.stderr", EST),
    M("est-impression-p2", E, "p2 = stats.two_sided_p(diff, se)", "p2 = stats.one_sided_p(diff, se)", EST),
    M("arms-fallback", "offeval_core/arms.py", "return mask if mask.any() else np.ones(len(values), dtype=bool)",
      "return mask", ARMS, "logs without a control arm: all rows are offline rows"),
    # ---------------------------------------------------------------- importance
    M("imp-zero-cap-tie-sql", f"{IM}/reduce.py", "ibis.ifelse(tab.w < tab.clip, tab.w, 0.0)",
      "ibis.ifelse(tab.w <= tab.clip, tab.w, 0.0)", IMP, "zero-capping at a weight equal to the cap"),
    M("imp-zero-cap-tie-numpy", f"{IM}/weights.py", "np.where(w < clip, w, 0.0) if capping", "np.where(w <= clip, w, 0.0) if capping",
      IMP),
    M("imp-max-cap", f"{IM}/reduce.py", "ibis.least(tab.w, tab.clip)", "ibis.greatest(tab.w, tab.clip)", IMP),
    M("imp-ncis-mean-weight", f"{IM}/reduce.py", "y_ncis = per.s / per.m * u", "y_ncis = per.s * u", IMP),
    M("imp-exposure-psi-value-only", f"{IM}/reduce.py",
      "psi = (a * big_w + big_a * p2.w_sum - big_a * big_w * p2.s / big_s) / big_s", "psi = a * big_w / big_s", IMP,
      "same value, wrong SE"),
    M("imp-exposure-share-old", f"{IM}/reduce.py", "exposure=setup.mode != PROPENSITY", "exposure=False", IMP,
      "session NCIS on ranking logs normalised by the mean capped weight"),
    M("imp-piece-psi-value-only", f"{IM}/reduce.py", "return ibis.ifelse(big_y > 0, p2.u_ * rg + big_u / big_y * (a - rg * p2.y_), 0.0)",
      "return ibis.ifelse(big_y > 0, p2.u_ * rg, 0.0)", IMP, "same value, wrong SE"),
    M("imp-point-no-pooling", f"{IM}/normalisation.py", "MIN_CONTEXT_ROWS = 2", "MIN_CONTEXT_ROWS = 1", IMP,
      "PointNCIS one-row contexts return the logging value"),
    M("imp-numpy-exposure", f"{IM}/bootstrap.py", 'exposure_session = scale == "session" and not bool(per["propensity"].iloc[0])',
      'exposure_session = False and not bool(per["propensity"].iloc[0])', IMP),
    M("imp-boot-quantiles", f"{IM}/bootstrap.py", "lo, hi = (1 - level) / 2, (1 + level) / 2", "lo, hi = 1 - level, level", IMP,
      "bootstrap CI quantiles"),
    M("imp-boot-ddof", f"{IM}/bootstrap.py", "float(np.nanstd(replicates, ddof=1))", "float(np.nanstd(replicates, ddof=0))",
      IMP),
    M("imp-boot-p-tail", f"{IM}/bootstrap.py", "p_one = float(np.mean(diff <= 0))", "p_one = float(np.mean(diff >= 0))", IMP,
      "bootstrap p-value tail"),
    M("imp-key-capping", f"{IM}/keys.py", 'cap = key_capping or capping or "max"', 'cap = capping or "max"', IMP,
      "bootstrap key bug: -zero ignored"),
    M("imp-key-scale", f"{IM}/keys.py", 'sc = key_scale or scale or "session"', 'sc = scale or "session"', IMP,
      "bootstrap key bug: @impression ignored"),
    M("imp-ess", "offeval_core/stats.py", "out = np.where(t2 == 0, 0.0, t * t / np.where(t2 == 0, 1.0, t2))",
      "out = np.where(t2 == 0, 0.0, t / np.where(t2 == 0, 1.0, t2))", [*IMP, "tests/test_ess.py"]),
    M("imp-capped-share", f"{IM}/reduce.py", 'out["capped_share"] = 1 - out["wc_sum"] / out["w_sum"]',
      'out["capped_share"] = out["wc_sum"] / out["w_sum"]', IMP),
    M("imp-midzuno-accept", f"{IM}/estimate.py", "if rng.uniform() < r1:", "if rng.uniform() > r1:", IMP),
    M("imp-exact-nu", f"{IM}/reduce.py", "nu=(acts.lp * acts.wbar).sum()", "nu=(acts.wbar).sum()", IMP),
    M("imp-logging-ref", f"{IM}/reduce.py", 'ref_sum=c.sum(), ref_m2=m2(c)', 'ref_sum=c.sum(), ref_m2=co(c, u)', IMP),
    # ---------------------------------------------------------------- engine kernel
    M("engine-unshown-d1", G, 'pos.mutate(**{f"p{i}": pos[f"p{i}"].fill_null(0.0)})',
      'pos.mutate(**{f"p{i}": pos[f"p{i}"].fill_null(1.0)})', ENGINE, "an item the target does not show gets D = 1"),
    M("engine-unshown-lookup", G, "return ibis.ifelse((rank >= 1) & (rank <= max_rank), arr[rank - 1], 0.0)",
      "return ibis.ifelse((rank >= 1) & (rank <= max_rank), arr[rank - 1], 1.0)", ENGINE,
      "exposure weight of an unshown item"),
    M("engine-clip-greatest", G, "pair.c * ibis.least(pair.m, pair.w)", "pair.c * ibis.greatest(pair.m, pair.w)",
      ENGINE),
    M("engine-pair-join", G, "pair = bound.join(clip, clip.m < bound.maxw)", "pair = bound.join(clip, clip.m > bound.maxw)",
      ENGINE, "only clip values below a session's largest weight are computed clip by clip"),
    M("engine-accumulate-b0", G, "free[b[b >= 0], gid[b >= 0]] = values[b >= 0]",
      "free[b[b > 0], gid[b > 0]] = values[b > 0]", ENGINE, "sessions no clip value binds count at every m"),
    M("engine-zero-sessions", "offeval_core/moment_columns.py",
      "out[..., layout.second] += layout.between(values[..., layout.counts], z,",
      "out[..., layout.second] += 0 * layout.between(values[..., layout.counts], z,", ENGINE,
      "sessions without a reward left out of the second moments"),
    M("engine-ideal-order", G, "order_by=[pos.w.desc(), pos[\"rank\"]]", "order_by=[pos.w, pos[\"rank\"]]", ENGINE),
    M("engine-ndcg-zero-rule", "offeval_core/engine/grid.py", "def ndcg_of(dcg, idcg, *, empty: float = 0.0):",
      "def ndcg_of(dcg, idcg, *, empty: float = 1.0):", [*ENGINE, "tests/test_one_rule.py"], "nDCG of a session without an ideal ranking counted as 1"),
    M("engine-diff-sign", G, 'x[f"d{i}"] - x.d0 for i', 'x[f"d{i}"] + x.d0 for i', ENGINE),
    M("engine-diff-den", G, "                                - values[:, [pos[lg] for _, _, lg in paired]])",
      "                                + values[:, [pos[lg] for _, _, lg in paired]])", ENGINE, "pnDCG effect co-moment"),
    M("engine-running-merge", "offeval_core/moment_columns.py",
      "np.cumsum(between.reshape(len(parts) - 1, *parts.shape[1:-1], -1), axis=0)",
      "between.reshape(len(parts) - 1, *parts.shape[1:-1], -1)", ENGINE,
      "the running merge over b keeps only each step's own between term"),
    M("engine-den-m2", G, '"den_m2": _m2(idcg, n_r)', '"den_m2": idcg.sum()', ENGINE),
    # ---------------------------------------------------------------- decisions
    M("dec-decide-low", D, "    if low > 0:\n        return \"positive\"", "    if low >= 0:\n        return \"positive\"", DEC,
      "decide at a CI bound of exactly 0"),
    M("dec-decide-high", D, "    if high < 0:\n        return \"negative\"", "    if high <= 0:\n        return \"negative\"", DEC),
    M("dec-classify-fp", D, '    if offline == "positive":\n        return "false positive"',
      '    if online == "positive":\n        return "false positive"', DEC),
    M("dec-precision-den", D, "float((off & on).sum() / off.sum())", "float((off & on).sum() / on.sum())", DEC),
    M("dec-fnr-den", D, "float((on & ~off).sum() / on.sum())", "float((on & ~off).sum() / off.sum())", DEC),
    M("dec-agreement-sum", D, 'float((b["category"] == "agree").mean())', 'float((b["category"] == "agree").sum())', DEC,
      "Decisions' agreement (sum vs mean)"),
    M("dec-ci-size", D, 'ratio = b.set_index(keys)["offline_rel_width"] / ref_w', 'ratio = ref_w / b.set_index(keys)["offline_rel_width"]',
      DEC, "Decisions' ci_size"),
    M("dec-rel-abs", D, "return x / abs(base) if base != 0", "return x / base if base != 0", DEC,
      "relative uplift denominator"),
    M("dec-rel-online-base", D, 'rec[k] = 100 * _rel(rec[k], on_base)', 'rec[k] = 100 * _rel(rec[k], off_base)', DEC,
      "relative online uplift over the offline baseline"),
    # ---------------------------------------------------------------- heldout / mnar (GS)
    M("mnar-t41-snips-nu", H, "w = n_u[u] * inv / n_hat[u]", "w = inv / n_hat[u]", MNAR, "Theorem 4.1's SNIPS term"),
    M("mnar-t41-snips-nhat", H, "n_hat = np.bincount(u, weights=inv * obs, minlength=n_users)",
      "n_hat = np.bincount(u, weights=inv, minlength=n_users)", MNAR, "Theorem 4.1's SNIPS term"),
    M("mnar-t41-abs", H, "weights=np.abs(w * p_true - 1.0) * row_ok", "weights=(w * p_true - 1.0) * row_ok", MNAR),
    M("mnar-t41-conc-den", H, "wmax * 7 * log_term / (3 * (n_u - 1))", "wmax * 7 * log_term / (3 * n_u)", MNAR),
    M("mnar-t41-naive", H, "w = n_u[u] / n_obs[u]", "w = n_obs[u] / n_u[u]", MNAR),
    M("mnar-snips-den", H, "w, d = inv_p, n_hat", "w, d = inv_p, n_obs", MNAR),
    # ---------------------------------------------------------------- Table 2 across clip values
    M("corrclip-strict-win", "offeval_core/analyses/correlation_clip.py", "if d > 0)", "if d >= 0)", CLIPCORR,
      "a tie counted as a win"),
    M("corrclip-max-log2", "offeval_core/analyses/correlation_clip.py", "float(a - max(raw, b))",
      "float(a - min(raw, b))", CLIPCORR, "beating the worse log2 variant instead of both"),
    M("corrclip-raw-ref", "offeval_core/analyses/correlation_clip.py", "float(a - max(raw, b))", "float(a - b)",
      CLIPCORR, "raw labels (log2, C) left out of the comparison"),
    # ---------------------------------------------------------------- verdict thresholds (module constants, which
    # mutmut does not mutate: it mutates function bodies only)
    M("verd-ess-dont", "offeval_core/verdicts.py", "ESS_DONT, ESS_CAUTION, SHARE_CAUTION, CLIP_CAUTION = 0.01,",
      "ESS_DONT, ESS_CAUTION, SHARE_CAUTION, CLIP_CAUTION = 0.02,", VERD, "the ESS 'don't' line"),
    M("verd-ess-caution", "offeval_core/verdicts.py", "= 0.01, 0.10, 0.05, 1.0", "= 0.01, 0.05, 0.05, 1.0", VERD,
      "the ESS caution line"),
    M("verd-share", "offeval_core/verdicts.py", "= 0.01, 0.10, 0.05, 1.0", "= 0.01, 0.10, 0.10, 1.0", VERD,
      "the largest-weight-share line"),
    M("verd-clip", "offeval_core/verdicts.py", "= 0.01, 0.10, 0.05, 1.0", "= 0.01, 0.10, 0.05, 2.0", VERD,
      "the clip-sensitivity line"),
    M("verd-support", "offeval_core/verdicts.py", "SUPPORT_MATERIAL = 0.05", "SUPPORT_MATERIAL = 0.03", VERD,
      "a support shortfall that is only a caution"),
]


def _locate(work: Path, m: Mutant) -> Path | None:
    """The file holding the mutant's text: its own (or, for a package path, one of its modules), else the
    unique module of the package that holds it."""
    target = work / m.file
    candidates = sorted(target.rglob("*.py")) if target.is_dir() else [target] if target.exists() else []
    hits = [p for p in candidates if p.read_text(encoding="utf-8").count(m.old) == 1]
    if len(hits) == 1:
        return hits[0]
    hits = [p for p in sorted((work / "offeval_core").rglob("*.py")) if p.read_text(encoding="utf-8").count(m.old) == 1]
    return hits[0] if len(hits) == 1 else None


def _pytest(work: Path, tests: tuple[str, ...], timeout: float, *, show: bool = False) -> tuple[str, float]:
    env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1", HYPOTHESIS_PROFILE="ci")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not browser and not spark",
           *tests]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - t0
    elapsed = time.perf_counter() - t0
    if show and proc.returncode:
        print("\n".join((proc.stdout + proc.stderr).splitlines()[-40:]))
    return {0: "survived", 1: "killed"}.get(proc.returncode, f"error {proc.returncode}"), elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="run only mutants whose id contains this text")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per mutant (a timeout counts as killed)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if args.k in m.id]
    if args.list:
        for m in chosen:
            print(f"{m.id:32s} {m.file}  {m.note}")
        print(f"{len(chosen)} mutants")
        return 0
    with tempfile.TemporaryDirectory(prefix="offeval-mutants-") as tmp:
        work = Path(tmp)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
        shutil.copytree(ROOT / "offeval_core", work / "offeval_core", ignore=ignore)
        shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
        for f in ("pyproject.toml", "conftest.py"):
            if (ROOT / f).exists():
                shutil.copy2(ROOT / f, work / f)
        if not args.no_baseline:
            suites = sorted({t for m in chosen for t in m.tests if t != "--doctest-modules"})
            doctest = [t for t in suites if t.startswith("offeval_core")]
            tests = [t for t in suites if not t.startswith("offeval_core")]
            status, secs = _pytest(work, (*tests, "--doctest-modules", *doctest), args.timeout * 3, show=True)
            print(f"baseline (no mutant): {'pass' if status == 'survived' else status} in {secs:.0f} s", flush=True)
            if status != "survived":
                print("the unmutated tests do not pass; fix them first")
                return 2
        results = []
        for m in chosen:
            path = _locate(work, m)
            if path is None:
                results.append((m, "missing", 0.0))
                print(f"{m.id:32s} missing (text not found once)", flush=True)
                continue
            original = path.read_text(encoding="utf-8")
            path.write_text(original.replace(m.old, m.new, 1), encoding="utf-8")
            try:
                status, secs = _pytest(work, m.tests, args.timeout)
            finally:
                path.write_text(original, encoding="utf-8")
            results.append((m, status, secs))
            print(f"{m.id:32s} {status:9s} {secs:5.0f} s  {m.note}", flush=True)
    applied = [r for r in results if r[1] != "missing"]
    killed = [r for r in applied if r[1] in ("killed", "timeout") or r[1].startswith("error")]
    rate = len(killed) / len(applied) if applied else float("nan")
    print(f"\n{len(killed)} of {len(applied)} mutants killed ({rate:.0%}); "
          f"{len(results) - len(applied)} missing")
    survivors = [r[0].id for r in applied if r not in killed]
    if survivors:
        print("survived: " + ", ".join(survivors))
    return 0 if not survivors else 1


if __name__ == "__main__":
    raise SystemExit(main())
