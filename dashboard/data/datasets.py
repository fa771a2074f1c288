"""Datasets of the dashboard: the bundled demo, uploads (temp dir only), simulated worlds and moments files,
keyed by short strings (their moments: :mod:`.dataset_moments`).

Heavy objects (validated logs, moments) are cached with ``st.cache_resource``: one shared, read-only copy
instead of a pickled copy per rerun. Every cache key is a dataset key string (``demo:<dir>``, ``sim:<spec>``,
``upload:<sha>|<name>|<mapping>``, ``mfile:<name>``, ``mupload:<sha>|<name>``, ``served:…``) plus the
settings the result depends on, so no large object is ever hashed. A moments file serves every view that
needs only moments; a view that needs rows raises :class:`~offeval_core.errors.NeedsRawLogs`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd
import streamlit as st

from offeval_core.engine import Moments
from offeval_core.arm_values import parse_arms
from offeval_core.errors import (
    InputError,
    LimitExceeded,
    MissingInput,
    NeedsAnswers,
    NeedsRawLogs,
    UnknownName,
)
from offeval_core.formatting import needs_raw_logs
from offeval_core.inputs import PARQUET_SUFFIXES, data_file
from offeval_core.logs import Logs, LogSummary, read_logs, read_table, summarize
from offeval_core.mapping import parse_mapping
from offeval_core.moments_io import is_moments_file, read_metadata, read_moments
from offeval_core.policies import TargetPolicies, target_policies
from dashboard.data.upload_store import store as _uploads
from dashboard.served import served, served_key
from offeval_core.sim_spec import SIM_LIMITS, SIM_PRESETS, SIM_SWITCHES, parse_sim_spec, sim_spec, simulated_config

__all__ = [
    "DEMO_SEED", "REPO", "SIM_LIMITS", "SIM_PRESETS", "SIM_SWITCHES", "Dataset", "NeedsRawLogs", "UploadGone",
    "content_key", "demo_dir", "file_stamp", "is_ready", "keep_upload", "load", "load_demo", "load_moments_path",
    "load_served", "load_simulated", "load_upload", "mark_ready", "needs_raw_logs_text", "parse_sim_spec", "sim_spec",
    "simulated_config", "upload_key", "upload_moments", "upload_raw",
]

REPO = Path(__file__).resolve().parents[2]
DEMO_SEED = 0  # the seed of `make data`
_READY: set[tuple] = set()  # keys whose heavy work is already cached in this process (for progress UI)


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


def is_ready(*key) -> bool:
    return tuple(key) in _READY


def mark_ready(*key) -> None:
    _READY.add(tuple(key))
