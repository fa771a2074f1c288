"""Content fingerprints of logs: what the persistent moments cache (:mod:`offeval_core.moments_cache`) keys on.

Logs read from a path are named by the SHA-256 of the bytes read (a file, or every file of a Parquet directory
with its relative name) together with the reading options (column mapping, rewards, arm labels, guessing);
the bytes are hashed before reading and the files' size, modification time and inode compared after it, so
logs whose file changed while being read get no file fingerprint. Any other logs (a DataFrame, an upload, a
simulated world) are named by the SHA-256 of their validated columns, computed on first use.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import weakref
from pathlib import Path

import numpy as np
import pandas as pd

from offeval_core.log_schema import Logs

__all__ = ["file_digest", "file_signature", "logs_fingerprint", "remember_origin"]

_CHUNK = 1 << 20
_ORIGINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Logs → fingerprint (read from files)
_LOCK = threading.Lock()


def _files(path: Path) -> list[tuple[str, Path]]:
    """(relative name, path) of the regular files a path names: itself, or every file under a directory
    (sorted; symbolic links and special files are not followed: the digest then fails, see :func:`file_digest`)."""
    if path.is_dir():
        out = []
        for root, dirs, names in os.walk(path):
            dirs.sort()
            for n in sorted(names):
                p = Path(root) / n
                out.append((p.relative_to(path).as_posix(), p))
        return out
    return [("", path)]


def file_signature(path: str | os.PathLike) -> tuple | None:
    """(name, size, mtime_ns, inode) of every file :func:`file_digest` reads; None when one is not a regular
    file. Equal signatures before and after a read mean the read saw the bytes that were hashed."""
    try:
        sig = []
        for name, p in _files(Path(path)):
            s = os.lstat(p)
            if not stat.S_ISREG(s.st_mode):
                return None
            sig.append((name, s.st_size, s.st_mtime_ns, s.st_ino))
        return tuple(sig)
    except OSError:
        return None


def file_digest(path: str | os.PathLike) -> str | None:
    """SHA-256 (hex) of a file's bytes, or of a directory's files (each one's relative name, size and bytes);
    None when the path cannot be read or holds anything but regular files.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "a.bin"; _ = p.write_bytes(b"abc")
    >>> file_digest(p) == hashlib.sha256(b"\\0" + (3).to_bytes(8, "little") + b"abc").hexdigest()
    True
    """
    h = hashlib.sha256()
    try:
        for name, p in _files(Path(path)):
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as fh:
                s = os.fstat(fh.fileno())
                if not stat.S_ISREG(s.st_mode):
                    return None
                h.update(name.encode() + b"\0" + s.st_size.to_bytes(8, "little"))
                while chunk := fh.read(_CHUNK):
                    h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def remember_origin(logs: Logs, digest: str | None, options: dict) -> None:
    """Record that ``logs`` were read from files whose :func:`file_digest` is ``digest`` with the reading
    ``options`` (JSON-able); nothing when ``digest`` is None."""
    if digest is None:
        return
    text = json.dumps({"files": digest, "options": options}, sort_keys=True, default=repr)
    with _LOCK:
        _ORIGINS[logs] = "file:" + hashlib.sha256(text.encode()).hexdigest()


def logs_fingerprint(logs: Logs) -> str:
    """The content fingerprint of validated ``logs``: their files' (:func:`remember_origin`), else a SHA-256 of
    their columns, rewards and policies (computed once per Logs object)."""
    with _LOCK:
        known = _ORIGINS.get(logs)
    if known is not None:
        return known
    h = hashlib.sha256()
    h.update(json.dumps([list(logs.rewards), list(logs.policies), list(map(str, logs.frame.columns)),
                         list(map(str, logs.sessions.columns))]).encode())
    for frame in (logs.frame, logs.sessions):
        for c in frame.columns:
            col = frame[c]
            h.update(str(c).encode() + b"\0" + str(col.dtype).encode() + b"\0")
            if isinstance(col.dtype, np.dtype) and col.dtype.kind in "biuf":
                h.update(np.ascontiguousarray(col.to_numpy()).tobytes())
            else:  # text, categories, dates: by value
                try:
                    hashed = pd.util.hash_pandas_object(col, index=False)
                except TypeError:  # values pandas cannot hash as they are
                    hashed = pd.util.hash_pandas_object(col.map(repr), index=False)
                h.update(hashed.to_numpy().tobytes())
    out = "frame:" + h.hexdigest()
    with _LOCK:
        _ORIGINS[logs] = out
    return out
