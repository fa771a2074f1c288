"""The defaults every entry point shares — the dashboard, the HTML report and the command line — defined once
so the three always agree.

``LEVEL`` is the confidence level of every interval and decision: KDD'24 Sec. 6.2 calls an offline
improvement significant when the 99 % confidence interval of the metric difference is strictly positive.
``ONLINE_ALPHA`` is the threshold below which an online A/B effect counts as a true positive in the
sensitivity analysis (the paper restricts itself to online improvements with p ≪ 0.001).

>>> LEVEL, ONLINE_ALPHA
(0.99, 0.001)
"""

from __future__ import annotations

__all__ = ["LEVEL", "ONLINE_ALPHA"]

LEVEL = 0.99
ONLINE_ALPHA = 0.001
