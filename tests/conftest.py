"""Test-suite settings: Hypothesis profiles.

``dev`` (default): Hypothesis defaults. ``ci`` (selected when the environment has ``CI=true``, or with
``HYPOTHESIS_PROFILE=ci``, as ``make test`` and ``make test-fast`` do): derandomised (the same examples on every run), no deadline (2 shared cores),
at most 50 examples for tests that do not set their own, and no shrink phase (only explicit, reuse and
generate): a failing property reports the example it found at once instead of shrinking for minutes on
two cores; rerun it locally (``dev`` profile) to get the minimal example.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

settings.register_profile("dev", settings.get_profile("default"))
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=50,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=(HealthCheck.too_slow,),
    print_blob=True,
)
# the dashboard servers that browser tests start skip the background preparation of every page's defaults
# (about a minute of CPU per server on the demo); the benchmark, which is not a test, keeps it
os.environ.setdefault("OFFEVAL_PREPARE", "0")
# the persistent moments cache stays off unless a test turns it on with its own directory (tests never write
# into the user's cache, and a result computed by one test is never another test's cache hit)
os.environ.setdefault("OFFEVAL_CACHE", "0")
_profile = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
settings.load_profile(_profile)


VIEWPORT = {"width": 1280, "height": 1400}


@pytest.fixture(scope="module")
def chromium():
    """One headless Debian chromium per browser-test module (tests/browser_support.py)."""
    from browser_support import launched_chromium

    playwright_api = pytest.importorskip("playwright.sync_api")
    with launched_chromium(playwright_api) as browser:
        yield browser


@pytest.fixture
def tab(chromium):
    """A fresh browser context and page per test, 1280 × 1400."""
    ctx = chromium.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    yield page
    ctx.close()
