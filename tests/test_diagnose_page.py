"""The "Which estimator?" page on a simulated cascade world: the takeaway names the violated assumption with
its number, the verdict counts match the core's diagnosis, the slate section shows its chart."""

from __future__ import annotations

import pytest
from dashboard_support import metric, open_page

from dashboard import data
from offeval_core.diagnose import diagnose

SPEC = "small;seed=1;sessions=300;cascade"


def test_which_estimator_page_on_a_cascade_world():
    at = open_page("which_estimator", timeout=180, dataset="sim", sim=SPEC, reward="watch_complete")
    d = diagnose(data.load_simulated(SPEC).logs, reward="watch_complete", policy="treatment", discount="pbm")
    assert d.check("cascade").fires
    takes = [m.value for m in at.markdown if "offeval-takeaway" in m.value]
    assert any("cascade — odds ratio of continuing after a reward" in t and f"{d.check('cascade').effect:.3g}" in t
               for t in takes), takes
    dont = sum(e.verdict == "don't" for e in d.estimators)
    assert metric(at, "Verdict: don't") == str(dont) and dont == 2
    assert any("Lowest RMSE" in t for t in takes)
    assert not at.error
    # estimator rows: the estimate is the target's value (reward per session) with its 95 % CI, the ESS share its
    # own column; assumption rows have no ESS share: those cells read "undefined" (the caption says why), never None
    table = next(df.value for df in at.dataframe if "CI low" in df.value.columns)
    est_rows = table[table["row"].str.startswith("estimator")].set_index("row")
    assert len(est_rows) == len(d.estimators)
    for e in d.estimators:
        row = est_rows.loc[f"estimator: {e.label}"]
        assert float(row["estimate"]) == pytest.approx(e.value, rel=1e-12)
        assert float(row["CI low"]) == pytest.approx(e.value - 1.959963984540054 * e.stderr, rel=1e-9)
        assert row["ESS share"] == f"{e.ess_share:.1%}"   # shown in its percent format
    assert all(isinstance(v, str) and v != "None" for v in table["ESS share"])
    assert any("“undefined” in" in c.value and "ESS share" in c.value for c in at.caption)
