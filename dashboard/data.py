"""Cached data loading for the dashboard: the bundled demo, uploads (temp dir only), simulated worlds,
and the moments (the one heavy reduce) plus every analysis result, keyed by short strings.

Heavy objects (validated logs, moments) are cached with ``st.cache_resource``: one shared, read-only copy
instead of a pickled copy per rerun, which keeps a widget change well under a second. Small analysis results
use ``st.cache_data``. Every cache key is a dataset key string (``demo``, ``sim:<spec>``,
``upload:<sha>|<mapping>``) plus the settings the result depends on, so no large object is ever hashed.
Streamlit-free helpers (``sim_spec``, ``parse_sim_spec``) are importable without a running app.

A dataset can also be a moments file (``offeval reduce LOGS --out FILE``; keys ``mfile:<path>`` and
``mupload:<sha>|<name>``): every view that needs only moments reads them from the file (restricted to the
variants it holds); a view that needs rows (bootstraps, weight diagnostics, the learnt curve) raises
:class:`NeedsRawLogs`, which the pages show as a notice.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

import offeval_core.importance  # noqa: F401 - registers the importance-sampling family in ESTIMATORS
from offeval_core.engine import DEFAULT_CLIPS, Grid, Moments, prepare, reduce
from offeval_core.inputs import PARQUET_SUFFIXES, data_file
from offeval_core.logs import Logs, LogSummary, read_logs, read_table, summarize
from offeval_core.moments_io import is_moments_file, read_metadata, read_moments

REPO = Path(__file__).resolve().parents[1]
DEMO_SEED = 0  # the seed of `make data`
SIM_PRESETS = ("small", "demo")
SIM_SWITCHES = ("cascade", "reward_interactions", "contextual_position_bias")
_READY: set[tuple] = set()  # keys whose heavy work is already cached in this process (for progress UI)


def demo_dir() -> Path:
    """Where the bundled demo lives: ``$OFFEVAL_DEMO_DIR`` or ``<repo>/data``."""
    return Path(os.environ.get("OFFEVAL_DEMO_DIR", REPO / "data"))


class NeedsRawLogs(LookupError):
    """A view needs the raw logs but the dataset is a moments file (shown as a notice, not an error)."""


def needs_raw_logs_text(what: str) -> str:
    """The notice for a view that a moments file cannot support: what needs the logs and how to get it."""
    return (f"{what} needs the raw logs: a moments file holds only per-group sums. To see it, load the logs "
            "themselves on the Data page, or run `offeval report LOGS` on them.")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Loaded, validated logs with their summary and, for simulated data, the exact ground truth; or, for a
    moments file, its :class:`Moments` (``file_moments``) and metadata with ``logs`` / ``summary`` None."""

    key: str
    label: str
    logs: Logs | None
    summary: LogSummary | None
    ground_truth: pd.DataFrame | None = None
    note: str = ""
    file_moments: Moments | None = None
    meta: dict | None = None

    @property
    def is_moments(self) -> bool:
        return self.file_moments is not None

    @property
    def rewards(self) -> tuple[str, ...]:
        return self.file_moments.grid.rewards if self.is_moments else self.logs.rewards

    @property
    def policies(self) -> tuple[str, ...]:
        return self.file_moments.grid.policies if self.is_moments else self.logs.policies

    @property
    def has_arms(self) -> bool:
        if self.is_moments:
            return "arm" in self.file_moments.online and set(self.file_moments.online["arm"]) >= {"control",
                                                                                                   "treatment"}
        return self.logs.has_arms

    @property
    def days(self) -> tuple:
        if self.is_moments:
            on = self.file_moments.online
            return tuple(sorted(on["day"].unique())) if "day" in on else ()
        return tuple(self.summary.days)

    @property
    def experiments(self) -> tuple:
        if self.is_moments:
            on = self.file_moments.online
            return tuple(sorted(on["experiment_id"].unique())) if "experiment_id" in on else ("all",)
        return tuple(self.summary.experiments)

    @property
    def reward_rates(self) -> dict[str, float]:
        """Per reward: the rate per impression (logs) or the online mean per session (moments file); only
        whether it is positive is used outside the Data page."""
        if not self.is_moments:
            return dict(self.summary.reward_rates)
        on = self.file_moments.online.groupby("reward")[["sum", "n"]].sum()
        return {r: float(on.loc[r, "sum"] / on.loc[r, "n"]) if r in on.index and on.loc[r, "n"] else 0.0
                for r in self.rewards}


# ------------------------------------------------------------------------------------------ simulation


def sim_spec(preset: str = "small", seed: int = 1, *, sessions: int | None = None, days: int | None = None,
             switches: Sequence[str] = (), support_depth: int | None = None) -> str:
    """Canonical text of a simulation request, used in the URL and as the cache key.

    >>> sim_spec("small", 7, switches=["cascade"], days=5)
    'small;seed=7;days=5;cascade'
    """
    parts = [preset, f"seed={int(seed)}"]
    if sessions:
        parts.append(f"sessions={int(sessions)}")
    if days:
        parts.append(f"days={int(days)}")
    if support_depth:
        parts.append(f"support={int(support_depth)}")
    parts += [s for s in SIM_SWITCHES if s in switches]
    return ";".join(parts)


def parse_sim_spec(spec: str) -> dict:
    """Inverse of :func:`sim_spec`; raises ValueError naming the bad part.

    >>> parse_sim_spec("small;seed=7;days=5;cascade")["overrides"]
    {'n_days': 5, 'cascade': True}
    """
    parts = [p.strip() for p in str(spec).split(";") if p.strip()]
    if not parts or parts[0] not in SIM_PRESETS:
        raise ValueError(f"simulation spec must start with a preset ({', '.join(SIM_PRESETS)}), got {spec!r}")
    out = {"preset": parts[0], "seed": 1, "overrides": {}}
    names = {"sessions": "sessions_per_arm_day", "days": "n_days", "support": "support_depth"}
    for p in parts[1:]:
        key, eq, value = p.partition("=")
        if not eq:
            if key not in SIM_SWITCHES:
                raise ValueError(f"unknown simulation switch {key!r} in {spec!r}; known: {', '.join(SIM_SWITCHES)}")
            out["overrides"][key] = True
            continue
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"simulation option {key!r} needs an integer, got {value!r} in {spec!r}") from None
        if key == "seed":
            out["seed"] = number
        elif key in names:
            out["overrides"][names[key]] = number
        else:
            raise ValueError(f"unknown simulation option {key!r} in {spec!r}")
    return out


def _from_world(world, *, key: str, label: str, note: str = "") -> Dataset:
    logs = read_logs(world.logs, name=label)
    return Dataset(key=key, label=label, logs=logs, summary=summarize(logs), ground_truth=world.ground_truth,
                   note=note)


@st.cache_resource(show_spinner=False, max_entries=4)
def load_simulated(spec: str) -> Dataset:
    from offeval_core.simulate import preset_config, simulate

    parsed = parse_sim_spec(spec)
    config = preset_config(parsed["preset"], **parsed["overrides"])
    world = simulate(config, seed=parsed["seed"])
    return _from_world(world, key=f"sim:{spec}", label=f"simulated ({spec})")


# ----------------------------------------------------------------------------------------------- demo


def file_stamp(path: Path) -> str:
    """Size and modification time of a file ('' when absent): part of the demo's cache key, so a demo
    rewritten on disk (``make data``) is read again instead of served stale."""
    try:
        st_ = path.stat()
    except OSError:
        return ""
    return f"{st_.st_size}:{st_.st_mtime_ns}"


@st.cache_resource(show_spinner=False, max_entries=2)
def load_demo(directory: str, stamp: str = "") -> Dataset:
    """The bundled demo (``logs.parquet`` + ``ground_truth.parquet``); simulated with the committed seed
    when the files are not there (e.g. before ``make data``). ``stamp`` (:func:`file_stamp` of the logs)
    only keys the cache."""
    d = Path(directory)
    logs_path = d / "logs.parquet"
    if logs_path.exists():
        logs = read_logs(logs_path, name="demo data (data/logs.parquet)")
        gt_path = d / "ground_truth.parquet"
        gt = pd.read_parquet(gt_path) if gt_path.exists() else None
        return Dataset(key=f"demo:{d}", label="demo data", logs=logs, summary=summarize(logs), ground_truth=gt)
    from offeval_core.simulate import preset_config, simulate

    world = simulate(preset_config("demo"), seed=DEMO_SEED)
    return _from_world(world, key=f"demo:{d}", label="demo data",
                       note=f"{logs_path} was not found, so the demo world was simulated in memory "
                            f"(preset 'demo', seed {DEMO_SEED}); `make data` writes the files.")


# --------------------------------------------------------------------------------------------- upload


def content_key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@st.cache_resource(show_spinner=False, max_entries=3)
def upload_raw(sha: str, name: str, _data: bytes | None = None) -> pd.DataFrame:
    """Read an uploaded CSV / Parquet file through a private temporary directory that is deleted at once.

    The upload is written in 1 MiB chunks into a fresh ``tempfile.TemporaryDirectory`` (the only place it
    ever touches the disk), read by the core's reader, and the directory is removed before returning.
    """
    if _data is None:
        raise LookupError("the uploaded file is no longer in memory; upload it again on the Data page")
    safe = Path(name).name or "upload.csv"
    with tempfile.TemporaryDirectory(prefix="offeval-upload-") as tmp:
        path = Path(tmp) / safe
        with open(path, "wb") as fh:
            view = memoryview(_data)
            for start in range(0, len(view), 1 << 20):
                fh.write(view[start:start + (1 << 20)])
        return read_table(path, name=name)


def upload_key(sha: str, name: str, mapping: dict[str, str]) -> str:
    return "upload:" + sha + "|" + name + "|" + json.dumps(mapping, sort_keys=True)


@st.cache_resource(show_spinner=False, max_entries=4)
def load_upload(key: str) -> Dataset:
    _, rest = key.split(":", 1)
    sha, name, mapping = rest.split("|", 2)
    raw = upload_raw(sha, name)
    columns = json.loads(mapping)
    rewards = columns.pop("reward", "")  # the reward picker of the mapping form, comma-separated
    logs = read_logs(raw, columns=columns, rewards=rewards.split(",") if rewards else None, name=name)
    return Dataset(key=key, label=f"uploaded file {name}", logs=logs, summary=summarize(logs))


# ------------------------------------------------------------------------------------------ moments files


def _moments_dataset(path: Path, *, key: str, label: str, name: str) -> Dataset:
    meta = read_metadata(path, name=name)
    m = read_moments(path, name=name)
    return Dataset(key=key, label=label, logs=None, summary=None, file_moments=m, meta=meta,
                   note=f"A moments file ({len(m.offline):,} moment rows, source {m.source or 'unknown'}): "
                        "every view that needs only moments works; bootstraps, weight diagnostics and the "
                        "learnt position-bias curve need the raw logs.")


@st.cache_resource(show_spinner=False, max_entries=4)
def load_moments_path(name: str) -> Dataset:
    """A moments file of the operator's data directory, by plain file name (``?moments=NAME``).

    Never a path: a name with a folder, ``..``, a special file or a file outside ``OFFEVAL_DATA_DIR`` is
    refused (MissingInput / UnreadableInput) before anything is opened, and messages name only ``name``.
    """
    p = data_file(name, kinds=PARQUET_SUFFIXES, what="moments file")
    return _moments_dataset(p, key=f"mfile:{name}", label=f"moments file {name}", name=name)


def _write_temp(tmp: str, name: str, data: bytes) -> Path:
    path = Path(tmp) / (Path(name).name or "upload.parquet")
    with open(path, "wb") as fh:
        view = memoryview(data)
        for start in range(0, len(view), 1 << 20):
            fh.write(view[start:start + (1 << 20)])
    return path


@st.cache_resource(show_spinner=False, max_entries=3)
def upload_moments(sha: str, name: str, _data: bytes | None = None) -> Dataset | None:
    """An uploaded moments file as a dataset, or None when the upload is not one (then it is logs); read
    through a private temporary directory deleted at once."""
    if _data is None:
        raise LookupError("the uploaded file is no longer in memory; upload it again on the Data page")
    with tempfile.TemporaryDirectory(prefix="offeval-upload-") as tmp:
        path = _write_temp(tmp, name, _data)
        if not is_moments_file(path):
            return None
        return _moments_dataset(path, key=f"mupload:{sha}|{name}", label=f"uploaded moments file {name}",
                                name=name)


def load(key: str) -> Dataset:
    """Dispatch a dataset key to its cached loader."""
    if key.startswith("mfile:"):
        return load_moments_path(key[6:])
    if key.startswith("mupload:"):
        sha, name = key[8:].split("|", 1)
        ds = upload_moments(sha, name)
        if ds is None:
            raise ValueError(f"{name} is not an offeval moments file")
        return ds
    if key == "demo" or key.startswith("demo:"):
        # the dataset's own key names its directory, so caches never mix two demos
        directory = str(demo_dir()) if key == "demo" else key[5:]
        ds = load_demo(directory, file_stamp(Path(directory) / "logs.parquet"))
    elif key.startswith("sim:"):
        ds = load_simulated(key[4:])
    elif key.startswith("upload:"):
        ds = load_upload(key)
    elif key.startswith("served:"):  # the file of `offeval dashboard FILE` (named by the environment)
        from dashboard.served import load_served

        ds = load_served(key)
    else:
        raise ValueError(f"unknown dataset key {key!r}")
    if ds.logs is not None:  # a served moments file has no rows to prepare
        engine_ready(f"{ds.key}#{id(ds)}", ds)  # keyed by the loaded object: a reloaded demo is prepared again
    return ds


@st.cache_resource(show_spinner="Preparing the logs for fast analysis (first time only): session table, "
                                 "rank histogram, rewarded rows and the compiled moments queries…", max_entries=8)
def engine_ready(key: str, _ds: Dataset) -> bool:
    """Once per dataset: the work every page shares (``engine.prepare``): the logs registered in the engine
    as Arrow tables, the session table and length histogram, the rewarded rows of every reward, the
    compiled moments query of each reward shape and the online moments. Every later (reward, D, D0)
    combination then costs only the query's execution."""
    prepare(_ds.logs)
    return True


def is_ready(*key) -> bool:
    return tuple(key) in _READY


def mark_ready(*key) -> None:
    _READY.add(tuple(key))


# ------------------------------------------------------------------------------------------ diagnosis
@st.cache_data(show_spinner=False, max_entries=8)
def diagnosis(key: str, reward: str, policy: str | None, discount: str, alpha: float = 0.05):
    """The assumption tests and estimator verdicts of ``offeval diagnose`` on a dataset (the Which-estimator
    page and the Method checklist share it)."""
    from offeval_core.diagnose import diagnose

    return diagnose(load(key).logs, reward=reward, policy=policy, discount=discount, alpha=alpha,
                    categories=simulated_topics(key))


def simulated_topics(key: str):
    """For a simulated world, the simulator's item topics serve as the category table of the
    reward-interaction test (uploaded logs and the demo have none)."""
    if not key.startswith("sim:"):
        return None
    from offeval_core.diagnose_validation import item_topics
    from offeval_core.simulate import preset_config

    spec = parse_sim_spec(key[len("sim:"):])
    return item_topics(preset_config(spec["preset"], **spec["overrides"]), spec["seed"])


# -------------------------------------------------------------------------------------------- moments


@st.cache_resource(show_spinner=False, max_entries=24)
def moments(key: str, reward: str, discount: str, exposure: str) -> Moments:
    """The reduce of one (reward, D, D0) over every target policy and the whole clip grid (cached); for a
    moments file, the file's rows of that (reward, D, D0)."""
    ds = load(key)
    if ds.is_moments:
        return file_moments_subset(ds.file_moments, reward, discount, exposure)
    grid = Grid(rewards=(reward,), policies=ds.logs.policies, discounts=(discount,), exposures=(exposure,),
                clips=DEFAULT_CLIPS)
    out = reduce(ds.logs, grid)
    mark_ready("moments", key, reward, discount, exposure)
    return out


def file_moments_subset(m: Moments, reward: str, discount: str, exposure: str) -> Moments:
    """The rows of one (reward, D, D0) of a moments file; NeedsRawLogs when the file does not hold them."""
    g = m.grid
    for what, value, options in (("reward", reward, g.rewards), ("target discount D", discount, g.discounts),
                                 ("exposure model D0", exposure, g.exposures)):
        if value not in options:
            raise NeedsRawLogs(needs_raw_logs_text(
                f"The {what} {value!r} is not in the moments file (it holds {', '.join(map(str, options))}); "
                "choose one of those in the sidebar. Any other variant"))
    off = m.offline
    keep = (off["reward"] == reward) & (off["discount"] == discount) & (off["exposure"] == exposure)
    grid = Grid(rewards=(reward,), policies=g.policies, discounts=(discount,), exposures=(exposure,),
                clips=g.clips, ndcg_rule=g.ndcg_rule)
    return Moments(offline=off[keep].reset_index(drop=True),
                   online=m.online[m.online["reward"] == reward].reset_index(drop=True), grid=grid,
                   discount_labels=m.discount_labels, source=m.source)


def moments_many(key: str, pairs: Sequence[tuple[str, str, str]]) -> Moments:
    """Moments of several (reward, D, D0) combinations merged into one object (each part cached)."""
    from offeval_core.analyses import merge_moments

    parts = [moments(key, r, d, e) for r, d, e in dict.fromkeys(pairs)]
    return parts[0] if len(parts) == 1 else merge_moments(*parts)


# ------------------------------------------------------------------------------------------ analyses


def _clip(m) -> float:
    return math.inf if m in ("inf", math.inf) else float(m)


def estimator_family(name: str) -> str:
    """``dcg`` for estimators read from the DCG reduce, ``importance`` for the IS family (own reduce)."""
    from offeval_core.estimators import ESTIMATORS

    return getattr(ESTIMATORS[name], "family", "dcg") or "dcg"


@st.cache_resource(show_spinner=False, max_entries=12)
def importance_moments(key: str, reward: str, policy: str, discount: str, exposure: str) -> Moments:
    """Moments of the importance-sampling family (Gilotte Sec. 4-5) for one target policy (cached)."""
    from offeval_core.importance import reduce_importance

    ds = load(key)
    if ds.is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The importance-sampling estimators (Gilotte Sec. 4-5) are not "
                                               "in the moments file; each"))
    out = reduce_importance(ds.logs, rewards=(reward,), policies=(policy,), clips=DEFAULT_CLIPS,
                            discount=discount, exposure=exposure, weights="exposure")
    mark_ready("importance", key, reward, policy, discount, exposure)
    return out


def decision_moments(key: str, reward: str, policy: str, estimators: Sequence[tuple]) -> Moments:
    """DCG-family moments for every (D, D0) the chosen estimators need, plus IS-family moments if any."""
    from offeval_core.analyses import merge_moments

    dcg_pairs = [(reward, e[1], e[2]) for e in estimators if estimator_family(e[0]) != "importance"]
    imp_pairs = [(e[1], e[2]) for e in estimators if estimator_family(e[0]) == "importance"]
    parts = [moments(key, *p) for p in dict.fromkeys(dcg_pairs)]
    parts += [importance_moments(key, reward, policy, d, e) for d, e in dict.fromkeys(imp_pairs)]
    if not parts:
        parts = [moments(key, reward, "pbm", "pbm")]
    return parts[0] if len(parts) == 1 else merge_moments(*parts)


@st.cache_data(show_spinner=False, max_entries=64)
def sensitivity_result(key: str, rewards: tuple[str, ...], discount: str, exposure: str, policy: str,
                       metrics: tuple[str, ...], level: float, online_alpha: float, selection: str):
    from offeval_core.analyses import sensitivity

    m = moments_many(key, [(r, discount, exposure) for r in rewards])
    return sensitivity(m, policy=policy, metrics=metrics, discount=discount, exposure=exposure, level=level,
                       online_alpha=online_alpha, settings=selection, rewards=rewards)


@st.cache_data(show_spinner=False, max_entries=64)
def correlation_result(key: str, reward: str, variants: tuple[tuple, ...], method: str):
    from offeval_core.analyses import Variant, offline_online_correlation

    m = moments_many(key, [(reward, v[1], v[2]) for v in variants])
    return offline_online_correlation(m, variants=[Variant(*v) for v in variants], method=method,
                                      rewards=(reward,))


@st.cache_data(show_spinner=False, max_entries=32)
def agreement_result(key: str, reward: str, policies: tuple[str, ...], discount: str, exposure: str,
                     clip: float, level: float, n_boot: int):
    from offeval_core.analyses import dcg_vs_ndcg

    if load(key).is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The DCG vs nDCG bootstrap over sessions"))
    return dcg_vs_ndcg(load(key).logs, reward=reward, policies=policies, discount=discount, exposure=exposure,
                       clip=clip, n_boot=n_boot, rng=0, level=level)


@st.cache_data(show_spinner=False, max_entries=64)
def decision_result(key: str, reward: str, policy: str, estimators: tuple[tuple, ...], level: float,
                    relative: bool):
    from offeval_core.analyses import Variant, decision_boxes

    m = decision_moments(key, reward, policy, estimators)
    return decision_boxes(m, estimators=[Variant(*e) for e in estimators], policy=policy, level=level,
                          relative=relative, rewards=(reward,))


@st.cache_data(show_spinner=False, max_entries=32)
def clip_tuning_result(key: str, reward: str, policy: str, discount: str, exposure: str, level: float,
                       rule: str):
    from offeval_core.analyses import clip_tuning

    if load(key).is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The clip-tuning chart (bias bound, ESS and clipped share come "
                                               "from the per-row weights)"))
    m = moments(key, reward, discount, exposure)
    return clip_tuning(load(key).logs, reward=reward, policy=policy, discount=discount, exposure=exposure,
                       clips=DEFAULT_CLIPS, level=level, rule=rule, moments=m)


@st.cache_data(show_spinner=False, max_entries=128)
def estimates_at(key: str, reward: str, policy: str | None, discount: str, exposure: str, clip: float,
                 level: float, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Per experiment and metric: logging and target estimates, the paired effect and the online effect
    at one clip value, read from the cached moments (``estimators.summarize_groups``)."""
    from offeval_core.estimators import summarize_groups

    full = moments(key, reward, discount, exposure)
    off = full.offline
    keep = (off["clip"] == clip) & off["policy"].isin(["logging", policy or "logging"])
    # the same moments restricted to one clip value and two policies: every lookup below is then cheap
    grid = Grid(rewards=full.grid.rewards, policies=(policy,) if policy else (), discounts=full.grid.discounts,
                exposures=full.grid.exposures, clips=(clip,), ndcg_rule=full.grid.ndcg_rule)
    m = Moments(offline=off[keep], online=full.online, grid=grid, discount_labels=full.discount_labels,
                source=full.source)
    rows = []
    for metric in metrics:
        for g in summarize_groups(m, reward=reward, policy=policy, metric=metric, discount=discount,
                                  exposure=exposure, clip=clip, by=("experiment_id",), level=level):
            rec = {"experiment_id": g.keys["experiment_id"], "metric": metric,
                   "logging": g.logging.value}
            if g.target is not None:
                rec |= {"target": g.target.value, "effect": g.effect.value, "effect_low": g.effect.ci.low,
                        "effect_high": g.effect.ci.high, "p_one_sided": g.effect.p_value}
            if g.online is not None and g.online.effect is not None:
                rec |= {"online_effect": g.online.effect.value, "online_p": g.online.p_two_sided}
            rows.append(rec)
    return pd.DataFrame(rows)


@st.cache_data(show_spinner=False, max_entries=32)
def clip_tuning_chart(key: str, reward: str, policy: str, discount: str, exposure: str, level: float, rule: str):
    """The clip-tuning figure of :func:`clip_tuning_result` (cached: each call returns a fresh copy)."""
    from offeval_core.analyses import clip_tuning_figure

    return clip_tuning_figure(clip_tuning_result(key, reward, policy, discount, exposure, level, rule))


@st.cache_data(show_spinner=False, max_entries=64)
def sensitivity_chart(key: str, rewards: tuple[str, ...], discount: str, exposure: str, policy: str,
                      metrics: tuple[str, ...], level: float, online_alpha: float, selection: str):
    from offeval_core.analyses import sensitivity_figure

    return sensitivity_figure(sensitivity_result(key, rewards, discount, exposure, policy, metrics, level,
                                                 online_alpha, selection))


# -------------------------------------------------------------------------------------------- held-out

#: Cut-offs, seeds and strata of the estimator lab's settings: ``quick`` (the default, ~10 s cold) and
#: ``full`` (the library defaults: 5 seeds, K = 5…100, 7 strata counts; ~50 s cold).
LAB_PRESETS = {
    "quick": {"seeds": (0, 1), "ks": (10, 20, 50, 100), "strata_grid": (1, 2, 5, 10, 20)},
    "full": {"seeds": (0, 1, 2, 3, 4), "ks": (5, 10, 20, 50, 100), "strata_grid": (1, 2, 3, 5, 10, 20, 50)},
}


def zoo_cache_dir() -> Path:
    """Where the trained zoo is saved between server runs: ``$OFFEVAL_CACHE_DIR/zoo`` or the temp dir."""
    base = os.environ.get("OFFEVAL_CACHE_DIR") or Path(tempfile.gettempdir()) / "offeval-cache"
    return Path(base) / "zoo"


@st.cache_resource(show_spinner=False, max_entries=8)
def zoo_agreement_result(grid: str, k: int, gain: str, n_boot: int, level: float, seed: int = 0):
    """KDD'24 App. A on the simulated model zoo (``heldout.zoo_agreement``; the zoo is also saved on disk)."""
    from offeval_core.heldout.analyses import zoo_agreement

    out = zoo_agreement(k=k, gain_kind=gain, grid=grid, n_boot=n_boot, level=level, seed=seed,
                        cache_dir=zoo_cache_dir())
    mark_ready("zoo", grid, k, gain, n_boot, level, seed)
    return out


@st.cache_resource(show_spinner=False, max_entries=1)
def assumption_contrast_result():
    """Assumption holds vs broken on small simulated worlds (``analyses.assumptions``), seeds 0 and 1."""
    from offeval_core.analyses.assumptions import assumption_contrast

    out = assumption_contrast(seeds=(0, 1))
    mark_ready("assumption_contrast")
    return out


@st.cache_resource(show_spinner=False, max_entries=4)
def estimator_lab_result(preset: str, lam: str, propensity: str):
    """The GS estimator lab (``heldout.estimator_lab``) with the seeds / cut-offs of ``LAB_PRESETS[preset]``."""
    from offeval_core.heldout.analyses import estimator_lab

    if preset not in LAB_PRESETS:
        raise ValueError(f"preset must be one of {', '.join(map(repr, LAB_PRESETS))}; got {preset!r}")
    out = estimator_lab(lam=lam, propensity=propensity, **LAB_PRESETS[preset])
    mark_ready("lab", preset, lam, propensity)
    return out


@st.cache_resource(show_spinner=False, max_entries=16)
def heldout_bytes(sha: str, name: str, _data: bytes | None = None) -> bytes:
    """Keep an uploaded qrels / run file in the server's memory (keyed by its content hash)."""
    if _data is None:
        raise LookupError(f"the uploaded file {name} is no longer in memory; upload it again")
    return bytes(_data)


def _read_heldout(sha: str, name: str, reader):
    """Parse an upload with the core's reader from a private temporary directory deleted at once; the
    temporary path is replaced by the uploaded file's name in error messages."""
    raw = heldout_bytes(sha, name)
    safe = Path(name).name or "upload.txt"
    with tempfile.TemporaryDirectory(prefix="offeval-heldout-") as tmp:
        path = Path(tmp) / safe
        path.write_bytes(raw)
        try:
            return reader(path)
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(str(exc).replace(str(path), safe)) from None
        except Exception as exc:  # pyarrow / parser errors on a file that is not what its name says
            raise ValueError(f"{safe}: cannot read the file ({type(exc).__name__}: {exc})") from None


@st.cache_resource(show_spinner=False, max_entries=8)
def heldout_qrels(sha: str, name: str):
    """Qrels read from an upload (TREC ``qid iter doc rel``, CSV or Parquet; ``heldout.read_qrels``)."""
    from offeval_core.heldout.io import read_qrels

    return _read_heldout(sha, name, read_qrels)


@st.cache_resource(show_spinner=False, max_entries=16)
def heldout_runs(sha: str, name: str) -> list:
    """Every run in an upload (TREC ``qid Q0 doc rank score tag``, CSV or Parquet; ``heldout.read_runs``)."""
    from offeval_core.heldout.io import read_runs

    return _read_heldout(sha, name, read_runs)


@st.cache_resource(show_spinner=False, max_entries=8)
def runs_agreement_result(qrels: tuple[str, str], runs: tuple[tuple[str, str], ...], k: int, gain: str,
                          n_boot: int, level: float, seed: int = 0):
    """DCG@k vs nDCG@k over the uploaded runs on the uploaded qrels (``heldout.runs_agreement``)."""
    from offeval_core.heldout.analyses import runs_agreement

    q = heldout_qrels(*qrels)
    all_runs = [r for sha, name in runs for r in heldout_runs(sha, name)]
    return runs_agreement(q, all_runs, k=k, gain_kind=gain, n_boot=n_boot, level=level, seed=seed)
