"""The markdown table of every world run by tools/world_sweep.py (/tmp/worlds.jsonl; the last run of a (world,
seed) kept), with the columns of data/README.md's "Worlds tried" and the failing lines."""

from __future__ import annotations

import json
import sys

SHORT = {"improvements ≥ 20": "improvements", "DCG TPR rises from m = 1": "DCG rise",
         "nDCG TPR rises from m = 1": "nDCG rise", "DCG at m = ∞ below its best finite m": "DCG drop at ∞",
         "DCG's best ≥ nDCG's best > 0": "DCG ≥ nDCG", "DCG sign agreement ≥ 95 % at its best m": "sign",
         "Table 2: pbm Q̂ above both log2 variants": "Table 2", "coverage ≥ 90 %": "coverage"}


def curve(d: dict) -> str:
    fin = [v for k, v in d.items() if k != "inf"]
    return f"{fin[0]} → {max(fin)} → {d['inf']}"


def main(path: str = "/tmp/worlds.jsonl") -> None:
    runs = {}
    for line in open(path):
        r = json.loads(line)
        runs[(r["name"], r["seed"])] = r
    print("| world | overrides | seed | rows | like % | improvements | DCG m=1 → best → ∞ | nDCG m=1 → best → ∞ "
          "| coverage | Table 2 like (pbm Q̂ / log2 C / log2 Q̂) | failing lines |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, seed), r in runs.items():
        t = r["table2"]["like"]
        ov = ", ".join(f"{k} {v}" for k, v in r["overrides"].items()) or "–"
        print(f"| {name} | {ov} | {seed} | {r['rows'] / 1e6:.2f} M | {100 * r['like_rate']:.1f} | {r['improvements']} "
              f"| {curve(r['dcg'])} | {curve(r['ndcg'])} | {100 * r['coverage']:.1f} % "
              f"| {t[0]:.4f} / {t[1]:.4f} / {t[2]:.4f} | {', '.join(SHORT[f] for f in r['failed']) or '–'} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
