"""The logs of Gilotte Table 1's NCIS counter-example (``importance.counterexample``) by hand: exact population
counts without an rng, i.i.d. draws with one, the arms, the schema and the checks of ``n``."""

import pandas as pd
import pytest

from offeval_core.errors import InputError
from offeval_core.importance.counterexample import COUNTEREXAMPLE_ACTIONS, ncis_counterexample

COLUMNS = ["session_id", "rank", "item_id", "segment", "arm", "value", "logging_propensity", "target_propensity__test"]


def test_exact_counts_are_the_population_frequencies():
    """n = 1000: control (π_p) registered 0.1 × (0.01, 0.37, 0.62), unknown 0.9 × (0.6, 0.4); treatment (π_t)
    registered 0.1 × (0.4, 0.3, 0.3), unknown 0.9 × (0.4, 0.6)."""
    df = ncis_counterexample(1000)
    assert list(df.columns) == COLUMNS
    assert df.index.equals(pd.RangeIndex(2000))
    counts = df.groupby(["arm", "item_id"]).size().to_dict()
    assert counts == {("control", "good_deal"): 1, ("control", "popular"): 37, ("control", "niche"): 62,
                      ("control", "generic_a"): 540, ("control", "generic_b"): 360,
                      ("treatment", "good_deal"): 40, ("treatment", "popular"): 30, ("treatment", "niche"): 30,
                      ("treatment", "generic_a"): 360, ("treatment", "generic_b"): 540}
    assert (df["rank"] == 1).all()
    assert df.loc[df["arm"] == "control", "session_id"].tolist() == [f"c{i}" for i in range(1000)]
    assert df.loc[df["arm"] == "treatment", "session_id"].tolist() == [f"t{i}" for i in range(1000)]
    # each arm's logging propensity is its own policy's, the target column is π_t's, the value the action's
    acts = COUNTEREXAMPLE_ACTIONS.set_index("item_id")
    for arm, col in (("control", "logging_propensity"), ("treatment", "target_propensity")):
        part = df[df["arm"] == arm]
        assert part["logging_propensity"].tolist() == acts.loc[part["item_id"], col].tolist()
        assert part["target_propensity__test"].tolist() == acts.loc[part["item_id"], "target_propensity"].tolist()
        assert part["value"].tolist() == acts.loc[part["item_id"], "value"].tolist()
        assert part["segment"].tolist() == acts.loc[part["item_id"], "segment"].tolist()


def test_default_size_arms_and_policy_name():
    df = ncis_counterexample()
    assert (df["arm"] == "control").sum() == (df["arm"] == "treatment").sum() == 10_000
    control = ncis_counterexample(2000, arms=False, policy="new")
    assert set(control["arm"]) == {"control"} and len(control) == 2000
    assert "target_propensity__new" in control.columns


def test_draws_follow_the_rng():
    a, b = ncis_counterexample(1, rng=5), ncis_counterexample(1, rng=5)
    assert len(a) == 2 and a.equals(b)                # n = 1 is allowed with an rng
    draws = [ncis_counterexample(500, rng=s, arms=False)["item_id"].tolist() for s in (5, 5, 6)]
    assert draws[0] == draws[1] != draws[2]


@pytest.mark.parametrize("n, message", [
    (0, "n must be a positive integer, got 0"),
    (-3, "n must be a positive integer, got -3"),
    (True, "n must be a positive integer, got True"),
    (1.5, "n must be a positive integer, got 1.5"),
    (1500, "n must be a multiple of 1000 for exact population frequencies (rng=None), got 1500"),
])
def test_bad_sizes(n, message):
    with pytest.raises(InputError) as err:
        ncis_counterexample(n)
    assert str(err.value) == message
