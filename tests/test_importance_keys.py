"""One estimator-key parser for ``estimate`` and ``bootstrap`` (regression: the bootstrap used to read
``ncis-zero@impression`` as plain session-scale, max-capped NCIS)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from offeval_core import importance as imp
from offeval_core.errors import SpecError
from offeval_core.logs import read_logs
from tests.test_importance import random_multislot_logs


def test_bootstrap_reads_zero_capping_from_the_key_on_table1():
    """Gilotte Table 1 at c = 10: zero-capping drops good_deal (w = 40), so NCIS-zero is
    (0.1 · (0.3·20 + 0.3·4) + 0.9 · 1) / (0.1 · 0.6 + 0.9) = 1.62 / 0.96 = 1.6875; max-capping gives 1.7938."""
    logs = read_logs(imp.ncis_counterexample(1000))
    for key, expected in (("ncis-zero@impression", 1.6875), ("ncis-zero", 1.6875), ("ncis", 1.74 / 0.97)):
        est = imp.estimate(logs, reward="value", policy="test", estimator=key, clip=10)
        boot = imp.bootstrap(logs, reward="value", policy="test", estimator=key, clip=10, n_boot=20, rng=0)
        assert est.target.value == pytest.approx(expected, rel=1e-12)
        assert boot.target.value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("key", ["cis-zero@impression", "ncis@impression", "piece-ncis-zero", "point-ncis@impression"])
def test_bootstrap_point_value_equals_estimate_for_every_key_part(key):
    """Multi-slot sessions: the per-impression scale differs from the per-session one, so a parser that
    drops ``@impression`` (or ``-zero``) gives a different point value."""
    logs = random_multislot_logs(3, n_sessions=80)
    est = imp.estimate(logs, reward="like", policy="t", estimator=key, clip=2, arm=None)
    boot = imp.bootstrap(logs, reward="like", policy="t", estimator=key, clip=2, n_boot=5, rng=1, arm=None)
    assert boot.target.value == pytest.approx(est.target.value, rel=1e-10)
    assert boot.logging.value == pytest.approx(est.logging.value, rel=1e-12)
    plain = imp.estimate(logs, reward="like", policy="t", estimator=key.partition("@")[0].removesuffix("-zero"),
                         clip=2, arm=None)
    assert plain.target.value != pytest.approx(est.target.value, rel=1e-6)


def test_check_estimator_parses_and_rejects():
    assert imp.check_estimator("point-ncis-zero@impression") == imp.EstimatorKey(
        "point-ncis", "zero", "impression", "point-ncis-zero@impression")
    assert imp.check_estimator("cis", capping="zero", scale="impression").key == "cis-zero@impression"
    assert imp.check_estimator("snips", capping="zero").key == "snips"  # no capping at c = ∞
    assert imp.parse_key("ncis-zero") == ("ncis", "zero", "session")
    with pytest.raises(SpecError, match="estimator 'ncis-zero' says capping 'zero' but capping='max' was given"):
        imp.check_estimator("ncis-zero", capping="max")
    with pytest.raises(SpecError, match="estimator must be one of 'is', 'snips'"):
        imp.check_estimator("ncis@day")
    with pytest.raises(SpecError, match="got 'snips-zero'"):
        imp.check_estimator("snips-zero")
    with pytest.raises(TypeError, match="estimator must be a string"):
        imp.check_estimator(3)
    for base in imp.BASES:
        for capping in imp.CAPPINGS:
            for scale in imp.SCALES:
                key = imp.estimator_key(base, capping=capping, scale=scale)
                assert imp.check_estimator(key).key == key


def test_one_rng_convention():
    logs = read_logs(imp.ncis_counterexample(200, rng=np.random.default_rng(5)))
    a = imp.bootstrap(logs, reward="value", policy="test", clip=10, n_boot=30, rng=7)
    b = imp.bootstrap(logs, reward="value", policy="test", clip=10, n_boot=30, rng=np.random.default_rng(7))
    assert a == b
    assert imp.ncis_counterexample(200, rng=5).equals(imp.ncis_counterexample(200, rng=np.random.default_rng(5)))
    assert math.isfinite(imp.midzuno_sen_inverse(lambda k, g: g.uniform(0.5, 3, size=k), n=5, clip=2, rng=1))


def test_key_parts_by_hand_and_errors_name_the_part():
    # defaults: max capping at session scale spell the bare base; a key may carry spaces around it
    assert imp.estimator_key("ncis") == "ncis"
    assert imp.estimator_key("ncis", capping="zero") == "ncis-zero"
    assert imp.estimator_key("ncis", scale="impression") == "ncis@impression"
    assert imp.estimator_key("is", capping="zero", scale="impression") == "is@impression"   # no capping at c = ∞
    assert imp.check_estimator("  ncis@impression ") == imp.EstimatorKey("ncis", "max", "impression", "ncis@impression")
    assert imp.check_estimator("piece-ncis") == imp.EstimatorKey("piece-ncis", "max", "session", "piece-ncis")
    assert imp.parse_key("snips@impression") == ("snips", "max", "impression")
    for call, message in (
        (lambda: imp.estimator_key("x"),
         "estimator must be one of 'is', 'snips', 'cis', 'ncis', 'piece-ncis', 'point-ncis'; got 'x'"),
        (lambda: imp.estimator_key("ncis", capping="none"), "capping must be one of 'max', 'zero'; got 'none'"),
        (lambda: imp.estimator_key("ncis", scale="day"), "scale must be one of 'session', 'impression'; got 'day'"),
        (lambda: imp.check_estimator("ncis", capping="none"), "capping must be one of 'max', 'zero'; got 'none'"),
        (lambda: imp.check_estimator("ncis", scale="day"), "scale must be one of 'session', 'impression'; got 'day'"),
        (lambda: imp.check_estimator("ncis@impression", scale="session"),
         "estimator 'ncis@impression' says scale 'impression' but scale='session' was given"),
    ):
        with pytest.raises(SpecError, match=f"^{re.escape(message)}$"):
            call()
