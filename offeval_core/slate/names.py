"""The slate estimators by name: the plain and self-normalised IPS families, Cascade-DR and adaptive IPS, their
display labels and the assumption on the reward each needs to be unbiased (Kiyohara et al. WSDM'22)."""

from __future__ import annotations

__all__ = ["ASSUMPTION", "LABELS", "NORMALISED", "PLAIN", "SLATE_ESTIMATORS"]


PLAIN = ("iips", "rips", "sips")
NORMALISED = ("sniips", "snrips", "snsips")
SLATE_ESTIMATORS = (*PLAIN, *NORMALISED, "cascade-dr", "aips")
LABELS = {"iips": "IIPS", "rips": "RIPS", "sips": "SIPS", "sniips": "SNIIPS", "snrips": "SNRIPS",
          "snsips": "SNSIPS", "cascade-dr": "Cascade-DR", "aips": "Adaptive IPS"}
ASSUMPTION = {"iips": "independence (reward at a slot depends on its item only)",
              "rips": "cascade (reward at slot k depends on the items at slots 1..k)",
              "sips": "none on the reward (whole-slate weight)",
              "cascade-dr": "cascade (reward at slot k depends on the items at slots 1..k)",
              "aips": "the chosen interaction set per context"}
for _k in NORMALISED:
    ASSUMPTION[_k] = ASSUMPTION[_k[2:]]
