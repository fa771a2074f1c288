"""Convert the Open Bandit Dataset sample (ZOZOTOWN, CC BY 4.0) into a propensity log of offeval's schema.

The sample ships inside the obp 0.5.7 source distribution (``pip download --no-deps --ignore-requires-python
obp==0.5.7 -d /tmp/obp``): ``obp/dataset/obd/{random,bts}/{all,men,women}/*.csv``, 10 000 rows per campaign and
policy, one row per impression (an item shown at one of three positions, clicked or not), each with the
probability that the policy which logged it shows that item at that position (``propensity_score``). The
prior of the Bernoulli Thompson Sampling policy that ZOZOTOWN ran is ``obp/policy/conf/prior_bts.yaml``.

    .venv/bin/python tools/open_bandit.py /tmp/obp/obp-0.5.7.tar.gz --out tests/fixtures/open_bandit

writes ``open_bandit.csv.gz`` (60 000 rows: 3 campaigns × 2 policies × 10 000) and ``bts_policy.csv`` (per
campaign and item: the prior α, β and the exact probabilities of positions 1-3 under that policy). What the
columns mean and why they are built this way: ``tests/fixtures/open_bandit/SOURCE.md``.

The one quantity that is not in the files is the target propensity π_BTS(a, k) of a row logged by the random
policy: the probability that Bernoulli TS with the ZOZOTOWN prior puts item a at position k. BTS draws
θ_b ~ Beta(α_b, β_b) independently for every item and shows the items with the three largest θ, so

    π_BTS(a, k) = ∫ f_a(x) · P(exactly k − 1 of the other θ_b exceed x) dx,

the inner probability a Poisson-binomial over the other items with success probabilities 1 − F_b(x). It is
integrated here to 1e-10 (obp estimates the same quantity by Monte Carlo with 100 000 draws,
``BernoulliTS.compute_batch_action_dist``).
"""

from __future__ import annotations

import argparse
import gzip
import io
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd

CAMPAIGNS = ("all", "men", "women")
POSITIONS = 3
ROOT = "obp-0.5.7/obp"


def bts_position_probabilities(alpha, beta, *, positions: int = POSITIONS) -> np.ndarray:
    """P(item a has the k-th largest draw θ_a ~ Beta(α_a, β_a)), shape (items, positions), by quadrature.

    >>> p = bts_position_probabilities([1.0, 1.0], [1.0, 1.0], positions=2)   # two exchangeable items
    >>> np.round(p, 6).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    from scipy import integrate, stats

    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    n = len(alpha)
    out = np.zeros((n, positions))
    for a in range(n):
        others = np.arange(n) != a

        def integrand(x, a=a, others=others):
            above = stats.beta.sf(x, alpha[others], beta[others])
            count = np.zeros(positions)  # P(exactly j of the other items exceed x), j < positions
            count[0] = 1.0
            for p in above:
                count[1:] = count[1:] * (1 - p) + count[:-1] * p
                count[0] *= 1 - p
            return stats.beta.pdf(x, alpha[a], beta[a]) * count

        lo, hi = stats.beta.ppf([1e-14, 1 - 1e-14], alpha[a], beta[a])
        out[a] = integrate.quad_vec(integrand, lo, hi, epsabs=1e-13, epsrel=1e-10)[0]
    return out


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    try:
        fh = tar.extractfile(f"{ROOT}/{name}")
    except KeyError:
        raise SystemExit(f"{name} is not in the tarball: expected the obp 0.5.7 source distribution") from None
    if fh is None:
        raise SystemExit(f"{name} in the tarball is not a regular file")
    return fh.read()


def convert(tarball: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(logs, BTS policy table) from the obp 0.5.7 source tarball."""
    import yaml

    with tarfile.open(tarball, "r:gz") as tar:
        prior = yaml.safe_load(_member(tar, "policy/conf/prior_bts.yaml"))
        raw = {(p, c): pd.read_csv(io.BytesIO(_member(tar, f"dataset/obd/{p}/{c}/{c}.csv")), index_col=0)
               for p in ("random", "bts") for c in CAMPAIGNS}
    logs, policy = [], []
    for c in CAMPAIGNS:
        alpha, beta = prior[c]["alpha"], prior[c]["beta"]
        probs = bts_position_probabilities(alpha, beta)
        policy.append(pd.DataFrame({"campaign": c, "item_id": np.arange(len(alpha)), "alpha": alpha, "beta": beta,
                                    **{f"p_position_{k + 1}": probs[:, k] for k in range(POSITIONS)}}))
        for arm, name in (("control", "random"), ("treatment", "bts")):
            d = raw[(name, c)]
            if sorted(d["position"].unique()) != list(range(1, POSITIONS + 1)):
                raise SystemExit(f"{name}/{c}: positions {sorted(d['position'].unique())}, expected 1-3")
            logged = d["propensity_score"].to_numpy(dtype=float)
            if arm == "control":
                if not np.allclose(logged, 1 / len(alpha)):
                    raise SystemExit(f"random/{c}: propensity_score is not 1 / {len(alpha)} items on every row")
                target = probs[d["item_id"].to_numpy(), d["position"].to_numpy() - 1]
            else:  # the rows BTS logged itself: its own propensity at logging time, weight 1
                target = logged
            logs.append(pd.DataFrame({
                "session_id": [f"{c}-{name}-{i:05d}" for i in range(len(d))],
                "position": d["position"].to_numpy(),
                "item_id": d["item_id"].to_numpy(),
                "click": d["click"].to_numpy(),
                "day": pd.to_datetime(d["timestamp"], utc=True).dt.strftime("%Y-%m-%d").to_numpy(),
                "experiment_id": c,
                "arm": arm,
                "logging_propensity": logged,
                "target_propensity__bts": target,
            }))
    return pd.concat(logs, ignore_index=True), pd.concat(policy, ignore_index=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tarball", type=Path, help="obp-0.5.7.tar.gz (pip download --no-deps "
                                               "--ignore-requires-python obp==0.5.7)")
    ap.add_argument("--out", type=Path, required=True, help="output directory")
    args = ap.parse_args(argv)
    logs, policy = convert(args.tarball)
    args.out.mkdir(parents=True, exist_ok=True)
    from offeval_core.safe_io import atomic_write_bytes, atomic_write_text

    text = logs.to_csv(index=False, float_format="%.10g").encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:  # mtime 0: byte-reproducible
        gz.write(text)
    atomic_write_bytes(args.out / "open_bandit.csv.gz", buf.getvalue())
    atomic_write_text(args.out / "bts_policy.csv", policy.to_csv(index=False, float_format="%.12g"))
    print(f"wrote {len(logs):,} rows to {args.out / 'open_bandit.csv.gz'} ({len(buf.getvalue()):,} bytes) and "
          f"{len(policy)} items to {args.out / 'bts_policy.csv'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
