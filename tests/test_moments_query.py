"""The Moments query surface: ``require`` / ``select`` / ``subset`` (offeval_core.estimators) raise the one typed
``UnknownName`` with the one message, for every analysis that asks moments for something they lack."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from offeval_core.analyses._common import Variant, check_in_grid, check_policy_in, check_rewards
from offeval_core.engine import Grid, reduce
from offeval_core.errors import UnknownName
from offeval_core.estimators import require, select, subset
from offeval_core.logs import read_logs

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def moments():
    df = pd.DataFrame({"session_id": [1, 1, 2], "rank": [1, 2, 1], "click": [1.0, 0.0, 1.0],
                       "rank__a": [2, 1, 1], "rank__b": [1, 2, 1]})
    return reduce(read_logs(df), Grid(rewards=("click",), policies=("a", "b"), discounts=("log2",),
                                      exposures=("log2",), clips=(1, 4, math.inf)))


def test_require_names_the_first_missing_value_and_what_is_available(moments):
    require(moments, rewards=["click"], policies=["a", "b"], discounts=["log2"], exposures=["log2"], clips=[1, math.inf])
    cases = [({"rewards": ["click", "like"]}, "reward 'like' was not computed; available: click"),
             ({"policies": ["c"]}, "policy 'c' was not computed; available: a, b"),
             ({"policies": ["logging"]}, "policy 'logging' was not computed; available: a, b"),
             ({"discounts": ["pbm"]}, "discount 'pbm' was not computed; available: log2"),
             ({"exposures": ["pbm"], "of": " of X"}, "exposure 'pbm' of X was not computed; available: log2"),
             ({"clips": [8.0]}, "clip 8 was not computed; available: 1, 4, inf")]
    for kwargs, message in cases:
        with pytest.raises(UnknownName) as info:
            require(moments, **kwargs)
        assert str(info.value) == message
    empty = Grid(rewards=("click",), policies=())
    with pytest.raises(UnknownName, match="^policy 'a' was not computed; available: none$"):
        require(type(moments)(offline=moments.offline, online=moments.online, grid=empty), policies=["a"])


def test_every_query_raises_the_same_unknown_name(moments):
    calls = [lambda: select(moments, reward="click", policy="a", metric="dcg", discount="log2", exposure="log2", clip=8),
             lambda: subset(moments, clips=[8]),
             lambda: check_in_grid(moments, Variant("dcg", "log2", "log2", 8.0))]
    for call in calls:
        with pytest.raises(UnknownName, match=r"^clip 8 (of DCG \(log2, Q̂ m=8\) )?was not computed; available: 1, 4, inf$"):
            call()
    for call in (lambda: check_policy_in(moments, "c"), lambda: subset(moments, policies=["c"]),
                 lambda: select(moments, reward="click", policy="c", metric="dcg", discount="log2", exposure="log2")):
        with pytest.raises(UnknownName, match="^policy 'c' was not computed; available: a, b$"):
            call()
    with pytest.raises(UnknownName, match="^reward 'like' was not computed; available: click$"):
        check_rewards(moments, ["like"])
    # the logging policy is always there for select
    assert len(select(moments, reward="click", policy=None, metric="dcg", discount="log2", exposure="log2"))


def test_no_second_not_computed_message_in_product_code():
    found = []
    for path in [*(ROOT / "offeval_core").rglob("*.py"), *(ROOT / "dashboard").rglob("*.py")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.search(r"[\"'][^\"']*(not computed;|not in the computed grid|not in the moments' clip grid"
                         r"|moments lack clip|is not in the moments file)", line):
                found.append(path.relative_to(ROOT).as_posix())
    assert found == ["offeval_core/estimators.py"], found
