"""The "Which estimator?" page in headless Chromium on a simulated world with each assumption switch: the
takeaway names the switched assumption, no error or exception, the slate chart is drawn."""

from __future__ import annotations

import pytest
from test_browser_dashboard import no_exception, open_page, server  # noqa: F401 - server is a fixture

pytestmark = pytest.mark.browser

WORLDS = {"cascade": ("cascade", "pbm"), "reward_interactions": ("reward interaction", "pbm"),
          "contextual_position_bias": ("context-dependent position bias", "pbm"), "support=8": ("support", "log2")}


def test_which_estimator_names_each_switched_assumption(server, tab, tmp_path):  # noqa: F811
    for switch, (name, discount) in WORLDS.items():
        url = (f"{server}/which-estimator?dataset=sim&sim=small;seed=1;sessions=1000;{switch}"
               f"&reward=watch_complete&discount={discount}")
        open_page(tab, url, chart=True)
        no_exception(tab)
        assert not tab.get_by_test_id("stAlertContentError").all_inner_texts(), switch
        take = tab.locator(".offeval-takeaway").first.inner_text()
        assert "1 of 4 assumptions are rejected" in take and f": {name} —" in take, take
        path = tmp_path / f"which_{switch.split('=')[0]}.png"
        tab.screenshot(path=str(path))
        assert path.stat().st_size > 10_000
