"""One set of defaults: the library, the dashboard, the HTML report and the command line use the same confidence
level and online significance threshold (offeval_core.defaults)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pandas as pd
import pytest
from dashboard_support import environment, write_small_world

from dashboard.state import PAGE_CONTROLS, Settings
from offeval_core import defaults, report
from offeval_core.analyses import sensitivity
from offeval_core.cli import build_parser
from offeval_core.logs import read_logs


def _command_defaults(command: str) -> dict:
    parser = build_parser(command)
    sub = next(a for a in parser._subparsers._group_actions if a.dest == "command")
    return {a.dest: a.default for a in sub.choices[command]._actions}


def test_every_entry_point_uses_the_shared_level_and_online_threshold():
    assert (defaults.LEVEL, defaults.ONLINE_ALPHA) == (0.99, 0.001)  # KDD'24 Sec. 6.2: 99 % CIs, p ≪ 0.001
    assert Settings().level == defaults.LEVEL
    assert PAGE_CONTROLS["sens_alpha"].default == defaults.ONLINE_ALPHA
    sig = inspect.signature(report.build_report)
    assert sig.parameters["sensitivity_level"].default == defaults.LEVEL
    assert sig.parameters["decision_level"].default == defaults.LEVEL  # the report's decisions used 95 % before
    assert sig.parameters["online_alpha"].default == defaults.ONLINE_ALPHA
    s = inspect.signature(sensitivity)
    assert (s.parameters["level"].default, s.parameters["online_alpha"].default) == (defaults.LEVEL,
                                                                                     defaults.ONLINE_ALPHA)
    assert _command_defaults("estimate")["level"] == defaults.LEVEL
    rep = _command_defaults("report")
    assert (rep["level"], rep["online_alpha"]) == (defaults.LEVEL, defaults.ONLINE_ALPHA)


# ------------------------------------------------------------------------ one level for every public function


def _public_callables():
    """Every public function, class and public method defined in a module of offeval_core."""
    import importlib
    import pkgutil

    import offeval_core

    for info in pkgutil.walk_packages(offeval_core.__path__, "offeval_core."):
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isfunction(obj):
                yield f"{mod.__name__}.{name}", obj
            elif inspect.isclass(obj):
                yield f"{mod.__name__}.{name}", obj
                for m_name, member in vars(obj).items():
                    if inspect.isfunction(member) and not m_name.startswith("_"):
                        yield f"{mod.__name__}.{name}.{m_name}", member


def level_defaults() -> dict[str, object]:
    """Every public signature's default for a confidence level (a parameter ``level`` or ``*_level``)."""
    out = {}
    for qualname, obj in _public_callables():
        try:
            params = inspect.signature(obj).parameters.values()
        except (TypeError, ValueError):  # some builtins have no signature
            continue
        for p in params:
            if (p.name == "level" or p.name.endswith("_level")) and p.default is not inspect.Parameter.empty:
                out[f"{qualname}({p.name})"] = p.default
    return out


def test_no_public_signature_in_the_core_hard_codes_another_level():
    """``oe.dcg(...)`` and ``offeval estimate`` used to disagree out of the box: 35 signatures defaulted to 0.95
    while the command line and the dashboard used 0.99. Every default level is now ``defaults.LEVEL``."""
    found = level_defaults()
    assert len(found) >= 40  # the scan reaches the estimators, analyses, diagnostics, held-out and slate code
    for name in ("offeval_core.estimators.dcg(level)", "offeval_core.importance.estimate.estimate(level)",
                 "offeval_core.slate.estimators.estimate(level)", "offeval_core.diagnose.diagnose(level)",
                 "offeval_core.diagnose.Diagnosis(level)", "offeval_core.report.build_report(decision_level)"):
        assert name in found, name
    other = {k: v for k, v in found.items() if v != defaults.LEVEL}
    assert not other, other


def test_every_command_with_a_level_defaults_to_the_shared_level():
    from offeval_core.cli import COMMANDS

    levels = {c: _command_defaults(c)["level"] for c in COMMANDS if "level" in _command_defaults(c)}
    assert {"estimate", "report", "diagnose", "heldout"} <= set(levels)
    assert set(levels.values()) == {defaults.LEVEL}, levels


# ------------------------------------------------- the library, the command line and the dashboard agree


@pytest.fixture(scope="module")
def one_ab_test(tmp_path_factory):
    """The simulator's small world cut to its first A/B test (exp01), written as a real Parquet file: with one
    test, the dashboard's per-test table and the ungrouped library and command-line estimates cover the same
    sessions."""
    world = write_small_world(tmp_path_factory.mktemp("world"))
    frame = pd.read_parquet(world / "logs.parquet")
    out = tmp_path_factory.mktemp("one_test")
    frame[frame["experiment_id"] == "exp01"].to_parquet(out / "logs.parquet", index=False)
    return out


def _cli(path, *args) -> dict:
    proc = subprocess.run([sys.executable, "-m", "offeval_core.cli", "estimate", str(path), "--reward", "like",
                           "--policy", "treatment", "--json", *args],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_library_command_line_and_dashboard_give_the_same_ci_without_options(one_ab_test):
    """Issue 23's acceptance: ``oe.dcg(...)``, ``offeval estimate`` (a real subprocess on a real file) and the
    dashboard's estimates (the Clip tuning page's ``data.estimates_at`` at the settings' defaults) give the same
    99 % CI, target and paired effect, for DCG, nDCG and post-normalised DCG."""
    import offeval_core as oe
    from dashboard import data

    path = one_ab_test / "logs.parquet"
    logs = read_logs(path)
    s = Settings()
    with environment(OFFEVAL_DEMO_DIR=str(one_ab_test)):
        page = data.estimates_at("demo", "like", "treatment", s.discount, s.exposure, s.clip, s.level,
                                 ("dcg", "ndcg", "pndcg")).set_index("metric")
    z99 = 2.5758293035489
    for metric, library in (("dcg", oe.dcg), ("ndcg", oe.ndcg), ("pndcg", oe.pndcg)):
        target = library(logs, reward="like", policy="treatment")
        eff = oe.effect(logs, reward="like", policy="treatment", metric=metric)
        # the interval is value ± z_0.995 · stderr: the default level is 99 %, not 95 %
        assert target.ci.level == 0.99 and eff.ci.level == 0.99
        assert target.ci.high - target.value == pytest.approx(z99 * target.stderr, rel=1e-9)
        cli = _cli(path, "--estimator", metric)
        assert cli["settings"]["level"] == 0.99
        (group,) = cli["groups"]
        assert group["target"]["ci"] == pytest.approx([target.ci.low, target.ci.high], rel=1e-9, abs=1e-12)
        assert group["effect"]["ci"] == pytest.approx([eff.ci.low, eff.ci.high], rel=1e-9, abs=1e-12)
        row = page.loc[metric]
        assert [row["target_low"], row["target_high"]] == pytest.approx([target.ci.low, target.ci.high], rel=1e-9)
        assert [row["effect_low"], row["effect_high"]] == pytest.approx([eff.ci.low, eff.ci.high], rel=1e-9)


def test_the_importance_estimators_and_the_command_line_share_the_default_level(one_ab_test):
    """The importance family (Gilotte et al.): ``oe.estimate_importance`` and ``offeval estimate --estimator
    snips`` without a level give the same 99 % CI of the target and of the effect."""
    import offeval_core as oe

    path = one_ab_test / "logs.parquet"
    res = oe.estimate_importance(read_logs(path), reward="like", policy="treatment", estimator="snips")
    assert res.target.ci.level == 0.99
    (group,) = _cli(path, "--estimator", "snips")["groups"]
    assert group["target"]["ci"] == pytest.approx([res.target.ci.low, res.target.ci.high], rel=1e-9)
    assert group["effect"]["ci"] == pytest.approx([res.effect.ci.low, res.effect.ci.high], rel=1e-9)
