"""The persistent cache of validated logs: a file's validation done once per content, reading options and code
version, across restarts, servers and commands of one machine.

Validation is a function of the bytes read, the reading options (column mapping, rewards, arm labels,
guessing, questions), the name shown in messages, the input limits and the code. An entry is keyed by all of
them (the SHA-256 of the file's bytes from :func:`~offeval_core.fingerprint.file_digest`, the others as text,
and :func:`~offeval_core.file_cache.code_digest`), so it holds exactly what :func:`~offeval_core.logs.read_logs`
would return for those bytes: the validated frame and session table (Arrow IPC, LZ4: the demo's
42 MB take 0.08 s of CPU to read into pandas, zstd's 23 MB 0.18 s) and the reading (JSON of
the reading's own dataclasses, nothing executable). Only logs that passed validation are stored; a file
whose signature changed while it was read is neither stored nor looked up.

Entries live in the moments cache's directory (:func:`~offeval_core.file_cache.cache_directory`) under
``logs/``, private to the user (0700), written atomically, and share its switch (``OFFEVAL_CACHE=0``) and byte
cap (least recently used out). An entry is checked on reading (its key, format, columns, row counts and the
reading's classes); one that fails is removed and the file read and validated again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pyarrow as pa

from offeval_core.arm_values import ArmValues
from offeval_core.errors import InputError
from offeval_core.file_cache import FileCache, cache_settings, code_digest
from offeval_core.limits import Limits
from offeval_core.log_schema import Logs
from offeval_core.reading import ColumnReading, Hint, Question, Reading
from offeval_core.safe_io import atomic_write

__all__ = ["LOGS_FORMAT", "LogsCache", "logs_cache_key"]

LOGS_FORMAT = "offeval-logs/1"
_CLASSES = {c.__name__: c for c in (Reading, ColumnReading, Question, Hint, ArmValues)}
_MAX_META = 16 * 1024**2


def logs_cache_key(digest: str, options: dict, *, name: str, limits: Limits) -> str:
    """The key (64 hex digits) of the validation of a file with :func:`~offeval_core.fingerprint.file_digest`
    ``digest`` read with ``options`` (JSON-able; other values by ``repr``), shown as ``name``, within ``limits``.

    >>> k = logs_cache_key("ab", {"guess": False}, name="logs.csv", limits=Limits())
    >>> len(k), k == logs_cache_key("ab", {"guess": True}, name="logs.csv", limits=Limits())
    (64, False)
    """
    text = json.dumps({"format": LOGS_FORMAT, "code": code_digest(), "files": digest, "options": options,
                       "name": name, "limits": dataclasses.asdict(limits)}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _encode(x):
    """JSON of the reading: its dataclasses by class name and fields, tuples as lists, dicts tagged."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        name = type(x).__name__
        if _CLASSES.get(name) is not type(x):
            raise TypeError(f"cannot store a {name}")
        return {"__class__": name, **{f.name: _encode(getattr(x, f.name)) for f in dataclasses.fields(x)}}
    if isinstance(x, tuple | list):
        return [_encode(v) for v in x]
    if isinstance(x, dict):
        return {"__dict__": {str(k): _encode(v) for k, v in x.items()}}
    if x is None or isinstance(x, str | int | float | bool):
        return x
    raise TypeError(f"cannot store a {type(x).__name__}")


def _decode(x):
    """The inverse of :func:`_encode`: only the reading's own classes are made (KeyError for any other)."""
    if isinstance(x, list):
        return tuple(_decode(v) for v in x)
    if isinstance(x, dict):
        if set(x) == {"__dict__"}:
            return {k: _decode(v) for k, v in x["__dict__"].items()}
        cls = _CLASSES[x["__class__"]]
        return cls(**{k: _decode(v) for k, v in x.items() if k != "__class__"})
    return x


def _arrow(frame: pd.DataFrame) -> bytes:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _frame(data: bytes) -> pd.DataFrame:
    return pa.ipc.open_file(pa.py_buffer(data)).read_all().to_pandas()


@dataclasses.dataclass(frozen=True)
class LogsCache(FileCache):
    """A directory of validated logs named by key (:func:`logs_cache_key`), at most ``max_bytes`` in all."""

    suffix: ClassVar[str] = ".logs.zip"

    @classmethod
    def from_env(cls, environ=None) -> LogsCache | None:
        """``logs/`` in the moments cache's directory, with its byte cap; None when ``OFFEVAL_CACHE=0``.

        >>> str(LogsCache.from_env({"OFFEVAL_CACHE_DIR": "/x"}).directory)
        '/x/logs'
        """
        settings = cache_settings(environ)
        if settings is None:
            return None
        directory, cap = settings
        return cls(directory / "logs", cap)

    def get(self, key: str) -> Logs | None:
        """The validated logs stored under ``key``, or None (absent, or refused: then removed)."""
        def read(path: Path) -> Logs:
            with zipfile.ZipFile(path) as z:
                info = z.getinfo("meta.json")
                if info.file_size > _MAX_META:
                    raise InputError(f"{path.name}: metadata too large")
                meta = json.loads(z.read(info))
                if meta.get("format") != LOGS_FORMAT or meta.get("key") != key:
                    raise InputError(f"{path.name}: not the entry of its key")
                frame, sessions = _frame(z.read("frame.arrow")), _frame(z.read("sessions.arrow"))
            for part, df in (("frame", frame), ("sessions", sessions)):
                if list(map(str, df.columns)) != meta[f"{part}_columns"] or len(df) != meta[f"{part}_rows"]:
                    raise InputError(f"{path.name}: the {part} is not the one recorded")
            logs = Logs(frame=frame, rewards=_decode(meta["rewards"]), policies=_decode(meta["policies"]),
                        source=meta["source"], notes=_decode(meta["notes"]), sessions=sessions,
                        columns=_decode(meta["columns"]), reading=_decode(meta["reading"]))
            if not isinstance(logs.reading, Reading | None) or not isinstance(logs.columns, dict):
                raise InputError(f"{path.name}: not a reading")
            return logs

        return self.read_entry(key, read, refused=(zipfile.BadZipFile, pa.ArrowException))

    def put(self, key: str, logs: Logs) -> Path | None:
        """Store validated ``logs`` under ``key`` (atomically), then evict past the byte cap; None when the logs
        hold something the entry cannot (the reading as JSON) or the directory cannot be written."""
        try:
            meta = {"format": LOGS_FORMAT, "key": key, "source": logs.source, "rewards": _encode(logs.rewards),
                    "policies": _encode(logs.policies), "notes": _encode(logs.notes),
                    "columns": _encode(dict(logs.columns)), "reading": _encode(logs.reading),
                    "frame_columns": list(map(str, logs.frame.columns)), "frame_rows": len(logs.frame),
                    "sessions_columns": list(map(str, logs.sessions.columns)), "sessions_rows": len(logs.sessions)}
            parts = {"meta.json": json.dumps(meta).encode(), "frame.arrow": _arrow(logs.frame),
                     "sessions.arrow": _arrow(logs.sessions)}
        except (TypeError, ValueError, pa.ArrowException):
            return None

        def write(tmp: Path) -> None:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
                for name, data in parts.items():
                    z.writestr(name, data)

        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # private to the user
            path = atomic_write(self.path(key), write)
        except (OSError, InputError):
            return None
        self.evict()
        return path
