"""AppTest of the Estimator lab's interval-coverage section: the table on the page is the core's coverage
study with the same settings, the takeaway states its numbers, and the sample size round-trips the URL."""

from __future__ import annotations

import pytest
from dashboard_support import environment, number, open_page, write_small_world

from offeval_core.formatting import format_number, format_share
from offeval_core.slate.coverage import interval_coverage


@pytest.fixture(scope="module", autouse=True)
def env(tmp_path_factory):
    demo = write_small_world(tmp_path_factory.mktemp("demo"))
    with environment(OFFEVAL_DEMO_DIR=str(demo), OFFEVAL_CACHE_DIR=str(tmp_path_factory.mktemp("cache"))):
        yield


def coverage_table(at):
    return next(d.value for d in at.dataframe if "MC error" in d.value.columns)


def test_coverage_section_matches_the_core_and_follows_the_sample_size():
    from dashboard.data import COVERAGE_REPS

    at = open_page("estimator_lab", timeout=240)
    assert at.selectbox(key="w_lab_cov_n").value == 300 and "lab_cov_n" not in at.query_params
    page = coverage_table(at)
    core = interval_coverage(n_sessions=300, reps=COVERAGE_REPS, rng=0)
    assert page[["estimator", "interval"]].values.tolist() == core.table[["estimator", "interval"]].values.tolist()
    # every cell as the page formats it: shares in %, the width with ≤ 4 significant digits
    for col, head, fmt in (("coverage", "coverage", format_share), ("mc_se", "MC error", format_share),
                           ("mean_width", "mean width", format_number), ("miss_low", "truth above", format_share),
                           ("miss_high", "truth below", format_share)):
        assert page[head].tolist() == [fmt(v) for v in core.table[col]], col
    takes = [m.value for m in at.markdown if "offeval-takeaway" in m.value]
    assert any(f"over {COVERAGE_REPS} replications of 300 sessions" in t for t in takes)
    sips = core.table.set_index(["estimator", "interval"]).loc[("SIPS", "normal")]
    assert any(f"SIPS: normal {100 * sips['coverage']:.0f} % ± {100 * sips['mc_se']:.1f}" in t for t in takes)

    at.selectbox(key="w_lab_cov_n").set_value(100).run()
    assert not at.exception
    assert at.query_params["lab_cov_n"] == "100"
    small = coverage_table(at)
    assert (small["replications"] == f"{COVERAGE_REPS:,}").all()
    assert any(f"over {COVERAGE_REPS} replications of 100 sessions" in m.value for m in at.markdown)
    # fewer sessions per log: the heavy SIPS weights cost the normal interval more coverage
    by = small.set_index(["estimator", "interval"])["coverage"].map(number)
    assert by[("SIPS", "normal")] < page.set_index(["estimator", "interval"])["coverage"].map(number)[("SIPS", "normal")]
