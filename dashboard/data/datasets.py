"""Datasets of the dashboard: the bundled demo, uploads (temp dir only), simulated worlds, moments files,
and the moments (the one heavy reduce) of each, keyed by short strings.

Heavy objects (validated logs, moments) are cached with ``st.cache_resource``: one shared, read-only copy
instead of a pickled copy per rerun. Every cache key is a dataset key string (``demo:<dir>``, ``sim:<spec>``,
``upload:<sha>|<name>|<mapping>``, ``mfile:<name>``, ``mupload:<sha>|<name>``, ``served:…``) plus the
settings the result depends on, so no large object is ever hashed. A moments file serves every view that
needs only moments; a view that needs rows raises :class:`~offeval_core.errors.NeedsRawLogs`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd
import streamlit as st

from offeval_core.engine import DEFAULT_CLIPS, Grid, Moments, prepare, reduce
from offeval_core.arm_values import parse_arms
from offeval_core.errors import (
    InputError,
    LimitExceeded,
    MissingInput,
    NeedsAnswers,
    NeedsRawLogs,
    UnknownName,
)
from offeval_core.estimators import require, subset
from offeval_core.formatting import needs_raw_logs
from offeval_core.inputs import PARQUET_SUFFIXES, data_file
from offeval_core.logs import Logs, LogSummary, read_logs, read_table, summarize
from offeval_core.mapping import parse_mapping
from offeval_core.moments_cache import cached
from offeval_core.moments_io import is_moments_file, read_metadata, read_moments
from offeval_core.policies import TargetPolicies, target_policies
from dashboard.data.upload_store import store as _uploads
from dashboard.served import served, served_key
from offeval_core.sim_spec import SIM_LIMITS, SIM_PRESETS, SIM_SWITCHES, parse_sim_spec, sim_spec, simulated_config

__all__ = [
    "DEMO_SEED", "REPO", "SIM_LIMITS", "SIM_PRESETS", "SIM_SWITCHES", "Dataset", "NeedsRawLogs", "UploadGone", "content_key",
    "default_grid", "demo_dir",
    "engine_ready", "file_moments_subset", "file_stamp", "importance_moments", "is_ready", "keep_upload", "load",
    "load_demo",
    "load_moments_path", "load_served", "load_simulated", "load_upload", "mark_ready", "moments", "moments_many",
    "moments_ready", "needs_raw_logs_text", "one_policy_moments", "note_prepared_later", "parse_sim_spec",
    "propensity_moments", "target_moments", "sim_spec", "simulated_config", "upload_key",
    "upload_moments", "upload_raw",
]

REPO = Path(__file__).resolve().parents[2]
DEMO_SEED = 0  # the seed of `make data`
_READY: set[tuple] = set()  # keys whose heavy work is already cached in this process (for progress UI)
_PLANNED: set[tuple] = set()  # moments the background preparation computes (:func:`note_prepared_later`)


class UploadGone(MissingInput, LookupError):
    """The session's upload (or the served file) is no longer on this server: a missing input the user fixes by
    uploading again; a ``LookupError`` too, as the page that shows it catches it."""


def demo_dir() -> Path:
    """Where the bundled demo lives: ``$OFFEVAL_DEMO_DIR`` or ``<repo>/data``."""
    return Path(os.environ.get("OFFEVAL_DEMO_DIR", REPO / "data"))


def needs_raw_logs_text(what: str) -> str:
    """The notice for a view that a moments file cannot support: what needs the logs and how to get it."""
    return needs_raw_logs(what) + (" To see it, load the logs themselves on the Data page, or run "
                                   "`offeval report LOGS` on them.")


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

    @cached_property
    def targets(self) -> TargetPolicies:
        """The target policies of the logs or moments file (``policies.target_policies``): rank, then propensity
        policies (``all``), their ``kind``, the ones that are the logging policy and the default target with its
        reason; computed once per loaded dataset, the same as ``offeval validate`` says."""
        return target_policies(self.file_moments if self.is_moments else self.logs)

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


def _from_world(world, *, key: str, label: str, note: str = "") -> Dataset:
    logs = read_logs(world.logs, name=label)
    return Dataset(key=key, label=label, logs=logs, summary=summarize(logs), ground_truth=world.ground_truth,
                   note=note)


@st.cache_resource(show_spinner=False, max_entries=4)
def load_simulated(spec: str) -> Dataset:
    """A simulated world named by a spec (a link's ``sim=`` or the Data page), its options and its size
    checked first (:func:`offeval_core.sim_spec.simulated_config`)."""
    from offeval_core.simulate import simulate

    config, seed = simulated_config(spec)
    world = simulate(config, seed=seed)
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


def keep_upload(sha: str, data: bytes | memoryview) -> None:
    """Keep a new upload's bytes in the server's shared, size-bounded store (:mod:`.upload_store`), so a session
    whose parsed upload other sessions' uploads pushed out of the caches below reads it again."""
    _uploads.put(sha, data)


def _upload_bytes(sha: str, data: bytes | None) -> bytes:
    """The upload's bytes: given (a new upload, kept in the shared store) or read back from the store (the
    parsed copy was pushed out of its cache by other uploads)."""
    if data is not None:
        _uploads.put(sha, data)
        return data
    kept = _uploads.get(sha)
    if kept is None:
        raise UploadGone("the uploaded file is no longer in memory; upload it again on the Data page")
    return kept


@st.cache_resource(show_spinner=False, max_entries=3)
def upload_raw(sha: str, name: str, _data: bytes | None = None) -> pd.DataFrame:
    """Read an uploaded CSV / Parquet file through a private temporary directory that is deleted at once.

    The upload is written in 1 MiB chunks into a fresh ``tempfile.TemporaryDirectory`` (the only place it
    ever touches the disk), read by the core's reader, and the directory is removed before returning.
    """
    _data = _upload_bytes(sha, _data)
    safe = Path(name).name or "upload.csv"
    with tempfile.TemporaryDirectory(prefix="offeval-upload-") as tmp, _memory_bounded(name):
        path = Path(tmp) / safe
        with open(path, "wb") as fh:
            view = memoryview(_data)
            for start in range(0, len(view), 1 << 20):
                fh.write(view[start:start + (1 << 20)])
        return read_table(path, name=name)


@contextmanager
def _memory_bounded(name: str):
    """A MemoryError while reading one user's file becomes that user's LimitExceeded (the input limits are
    estimated before decoding, so this is the last resort); the server and the other sessions go on."""
    try:
        yield
    except MemoryError:
        raise LimitExceeded(f"{name}: the file does not fit in this server's memory (OFFEVAL_MAX_MEMORY is above "
                            "what the machine has)", source=name) from None


def upload_key(sha: str, name: str, mapping: dict[str, str]) -> str:
    return "upload:" + sha + "|" + name + "|" + json.dumps(mapping, sort_keys=True)


@st.cache_resource(show_spinner=False, max_entries=4)
def _read_upload(key: str) -> Dataset | NeedsAnswers:
    """The upload read with the mapping form's entries, or the questions it leaves open (cached either way, so
    a pending question does not read the file again on every rerun)."""
    _, rest = key.split(":", 1)
    sha, name, mapping = rest.split("|", 2)
    raw = upload_raw(sha, name)
    columns = json.loads(mapping)
    rewards = columns.pop("reward", "")  # the reward picker of the mapping form, comma-separated
    arms = columns.pop("arms", "")  # the arm labels of the mapping form: control=A,treatment=B or none
    guess = bool(columns.pop("guess", ""))  # a fresh upload: common names guessed, as the command line does
    try:
        with _memory_bounded(name):
            logs = read_logs(raw, columns=columns, rewards=rewards.split(",") if rewards else None, name=name,
                             arms=parse_arms(arms, what="Arm labels") if arms else None, guess=guess,
                             ask="guesses")
    except NeedsAnswers as exc:  # nothing is computed until the user answers in the form
        return exc
    return Dataset(key=key, label=f"uploaded file {name}", logs=logs, summary=summarize(logs))


def load_upload(key: str) -> Dataset:
    """An uploaded file as a dataset; raises NeedsAnswers (with what was understood) when the file does not say
    which columns are rewards or which column is the arm, or a reward was chosen by value alone."""
    out = _read_upload(key)
    if isinstance(out, NeedsAnswers):
        raise out
    return out


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


@st.cache_resource(show_spinner=False, max_entries=2)
def load_served(key: str) -> Dataset:
    """Read and validate the served file of ``offeval dashboard FILE`` (its path comes from the environment,
    :mod:`dashboard.served`, never from ``key``)."""
    s = served()
    if s is None or key != served_key():
        raise UploadGone("this server was not started on a file (offeval dashboard FILE)")
    path, mapping, rewards, arms = s
    p = Path(path)
    if p.is_file() and is_moments_file(p):
        return _moments_dataset(p, key=key, label=f"moments file {p.name}", name=p.name)
    logs = read_logs(p, columns=parse_mapping(mapping, what="OFFEVAL_MAP entries"), guess=True,
                     rewards=[r.strip() for r in rewards.split(",") if r.strip()] or None, name=p.name,
                     arms=parse_arms(arms, what="OFFEVAL_ARMS"), ask="ambiguous")
    return Dataset(key=key, label=p.name, logs=logs, summary=summarize(logs))


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
    _data = _upload_bytes(sha, _data)
    with tempfile.TemporaryDirectory(prefix="offeval-upload-") as tmp, _memory_bounded(name):
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
            raise InputError(f"{name} is not an offeval moments file", source=name)
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
        ds = load_served(key)
    else:
        raise UnknownName(f"unknown dataset key {key!r}")
    return ds


def _engine(ds: Dataset) -> None:
    """The engine's shared preparation of ``ds`` (:func:`engine_ready`), before the first reduce that is not in
    the moments cache: a dataset whose moments are all cached never pays for it."""
    engine_ready(f"{ds.key}#{id(ds)}", ds)  # keyed by the loaded object: a reloaded demo is prepared again


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


# -------------------------------------------------------------------------------------------- moments


@st.cache_resource(show_spinner=False, max_entries=24)
def moments(key: str, reward: str, discount: str, exposure: str) -> Moments:
    """The reduce of one (reward, D, D0) over every target policy and the whole clip grid (cached); for a
    moments file, the file's rows of that (reward, D, D0)."""
    ds = load(key)
    if ds.is_moments:
        return file_moments_subset(ds.file_moments, reward, discount, exposure)
    grid = default_grid(ds.logs, reward, discount, exposure)
    out = cached(ds.logs, grid)  # the persistent moments cache (offeval_core.moments_cache): nothing computed
    if out is None:
        _engine(ds)
        out = reduce(ds.logs, grid)  # computed and stored in the cache
    mark_ready("moments", key, reward, discount, exposure)
    return out


def target_moments(key: str, reward: str, discount: str, exposure: str, policy: str | None) -> Moments:
    """The moments of one (reward, D, D0) that a page of target policy ``policy`` reads: the reduce over every
    policy (:func:`moments`) when it is at hand or on its way — computed in this process, held by the persistent
    moments cache, planned by the background preparation, or a moments file — else the reduce of that policy alone
    (:func:`one_policy_moments`), a fraction of the whole one for a (D, D0) no page has used yet (the demo, a new
    D: like 0.2 s against 0.7 s). ``policy`` None: every policy."""
    if policy is None or _all_policies_at_hand(key, reward, discount, exposure, policy):
        return moments(key, reward, discount, exposure)
    return one_policy_moments(key, reward, discount, exposure, policy)


def _all_policies_at_hand(key: str, reward: str, discount: str, exposure: str, policy: str) -> bool:
    if is_ready("moments", key, reward, discount, exposure) or ("moments", key, reward, discount, exposure) in _PLANNED:
        return True
    ds = load(key)
    if ds.is_moments or policy not in ds.policies:  # (a policy the logs lack: :func:`moments` says so)
        return True
    from offeval_core.moments_cache import MomentsCache, logs_key

    store = MomentsCache.from_env()
    return store is not None and store.path(logs_key(ds.logs, default_grid(ds.logs, reward, discount,
                                                                           exposure))).is_file()


@st.cache_resource(show_spinner=False, max_entries=24)
def one_policy_moments(key: str, reward: str, discount: str, exposure: str, policy: str) -> Moments:
    """The reduce of one (reward, D, D0) for the logging policy and target ``policy`` alone, over the whole clip
    grid (cached; the persistent moments cache holds it too): the rows of ``policy`` in :func:`moments`."""
    ds = load(key)
    grid = dataclasses.replace(default_grid(ds.logs, reward, discount, exposure), policies=(policy,))
    out = cached(ds.logs, grid)
    if out is None:
        _engine(ds)
        out = reduce(ds.logs, grid)
    mark_ready("moments", key, reward, discount, exposure, policy)
    return out


def moments_ready(key: str, reward: str, discount: str, exposure: str, policy: str | None) -> bool:
    """Whether :func:`target_moments` of these arguments is computed already (for progress UI)."""
    return is_ready("moments", key, reward, discount, exposure) or (
        policy is not None and is_ready("moments", key, reward, discount, exposure, policy))


def note_prepared_later(key: str, reward: str, discount: str, exposure: str) -> None:
    """Note that the background preparation will compute :func:`moments` of these arguments: a page then waits
    for them rather than reducing its own policy alone."""
    _PLANNED.add(("moments", key, reward, discount, exposure))


def default_grid(logs: Logs, reward: str, discount: str, exposure: str) -> Grid:
    """The grid of a page's reduce: one (reward, D, D0) over every target policy and the whole clip grid."""
    return Grid(rewards=(reward,), policies=logs.policies, discounts=(discount,), exposures=(exposure,),
                clips=DEFAULT_CLIPS)


def file_moments_subset(m: Moments, reward: str, discount: str, exposure: str) -> Moments:
    """The rows of one (reward, D, D0) of a moments file; NeedsRawLogs when the file does not hold them."""
    try:
        require(m, rewards=(reward,), discounts=(discount,), exposures=(exposure,), of=" (in the moments file)")
    except UnknownName as exc:
        raise NeedsRawLogs(needs_raw_logs_text(f"The {exc}: choose one of those in the sidebar. Any other "
                                               "variant")) from exc
    return subset(m, rewards=(reward,), discounts=(discount,), exposures=(exposure,))


def moments_many(key: str, pairs: Sequence[tuple[str, str, str]], policy: str | None = None) -> Moments:
    """Moments of several (reward, D, D0) combinations merged into one object (each part cached; of target
    ``policy``, :func:`target_moments`)."""
    from offeval_core.analyses import merge_moments

    parts = [target_moments(key, r, d, e, policy) for r, d, e in dict.fromkeys(pairs)]
    return parts[0] if len(parts) == 1 else merge_moments(*parts)


@st.cache_resource(show_spinner=False, max_entries=12)
def importance_moments(key: str, reward: str, policy: str, discount: str, exposure: str) -> Moments:
    """Moments of the importance-sampling family (Gilotte Sec. 4-5) for one target policy (cached)."""
    from offeval_core.importance import reduce_importance

    ds = load(key)
    if ds.is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The importance-sampling estimators (Gilotte Sec. 4-5) are not "
                                               "in the moments file; each"))
    _engine(ds)
    out = reduce_importance(ds.logs, rewards=(reward,), policies=(policy,), clips=DEFAULT_CLIPS,
                            discount=discount, exposure=exposure, weights="exposure")
    mark_ready("importance", key, reward, policy, discount, exposure)
    return out


PROPENSITY_REDUCE = {"cappings": ("max",), "scales": ("session",)}
"""The importance estimators the pages offer for propensity policies: max-capping min(w, c), per session
(``offeval estimate`` also has zero-capping and the per-impression scale)."""


@st.cache_resource(show_spinner=False, max_entries=12)
def propensity_moments(key: str, reward: str) -> Moments:
    """Moments of the importance-sampling family (IS, SNIPS, CIS, NCIS, PieceNCIS, PointNCIS; Gilotte Sec. 3-5)
    with the logged propensities π_t / π_p, for every propensity policy of a dataset over the whole clip grid
    (the cap c plays the role of m); cached. Discount and exposure of these rows read ``propensity``."""
    from offeval_core.importance import reduce_importance

    ds = load(key)
    if ds.is_moments:
        raise NeedsRawLogs(needs_raw_logs_text("The importance-sampling estimators (Gilotte Sec. 4-5) are not "
                                               "in the moments file; each"))
    policies = tuple(p for p in ds.targets.all if ds.targets.kind(p) == "propensity")
    _engine(ds)
    out = reduce_importance(ds.logs, rewards=(reward,), policies=policies, clips=DEFAULT_CLIPS,
                            weights="propensity", **PROPENSITY_REDUCE)
    mark_ready("propensity", key, reward)
    return out
