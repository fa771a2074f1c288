"""What the persistent caches share (:mod:`offeval_core.moments_cache`, :mod:`offeval_core.logs_cache`): where
they live, when they are on, the code's digest in their keys, and a directory of files named by key with a
byte cap (least recently used out).

Entries live in ``$OFFEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/offeval/moments``, else
``~/.cache/offeval/moments``; ``OFFEVAL_CACHE=0`` turns every cache off; ``OFFEVAL_CACHE_MAX_BYTES`` (default
1 GiB) caps each directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from offeval_core.errors import InputError

__all__ = ["DEFAULT_MAX_BYTES", "ENV_DIR", "ENV_MAX_BYTES", "ENV_SWITCH", "FileCache", "cache_directory",
           "code_digest"]

ENV_DIR, ENV_SWITCH, ENV_MAX_BYTES = "OFFEVAL_CACHE_DIR", "OFFEVAL_CACHE", "OFFEVAL_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
_PACKAGE = Path(__file__).resolve().parent
_CODE: list[str] = []
T = TypeVar("T")


def code_digest() -> str:
    """SHA-256 of every ``offeval_core`` source file (relative name and bytes), computed once per process."""
    if not _CODE:
        h = hashlib.sha256()
        for p in sorted(_PACKAGE.rglob("*.py")):
            h.update(p.relative_to(_PACKAGE).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
        _CODE.append(h.hexdigest())
    return _CODE[0]


def cache_directory(environ=None) -> Path:
    """Where entries live: ``$OFFEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/offeval/moments``, else
    ``~/.cache/offeval/moments``.

    >>> str(cache_directory({"XDG_CACHE_HOME": "/c"})), str(cache_directory({"OFFEVAL_CACHE_DIR": "/x"}))
    ('/c/offeval/moments', '/x')
    """
    env = os.environ if environ is None else environ
    if env.get(ENV_DIR, "").strip():
        return Path(env[ENV_DIR].strip())
    base = env.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base and os.path.isabs(base) else Path.home() / ".cache") / "offeval" / "moments"


def cache_settings(environ=None) -> tuple[Path, int] | None:
    """(directory, byte cap) the environment names; None when ``OFFEVAL_CACHE=0``. A cap that is not a whole
    number is the default.

    >>> cache_settings({"OFFEVAL_CACHE": "0"}) is None
    True
    >>> cache_settings({"OFFEVAL_CACHE_DIR": "/x", "OFFEVAL_CACHE_MAX_BYTES": "1000"})
    (PosixPath('/x'), 1000)
    """
    env = os.environ if environ is None else environ
    if env.get(ENV_SWITCH, "1").strip() == "0":
        return None
    raw = env.get(ENV_MAX_BYTES, "").strip()
    try:
        cap = int(raw) if raw else DEFAULT_MAX_BYTES
    except ValueError:
        cap = DEFAULT_MAX_BYTES
    return cache_directory(env), max(cap, 0)


@dataclass(frozen=True)
class FileCache:
    """A directory of files named ``<key><suffix>``, at most ``max_bytes`` in all (least recently used out)."""

    directory: Path
    max_bytes: int = DEFAULT_MAX_BYTES
    suffix: ClassVar[str] = ".entry"

    @classmethod
    def from_env(cls, environ=None):
        """The cache the environment names (:func:`cache_settings`); None when ``OFFEVAL_CACHE=0``."""
        settings = cache_settings(environ)
        return None if settings is None else cls(*settings)

    def path(self, key: str) -> Path:
        if len(key) != 64 or any(ch not in "0123456789abcdef" for ch in key):
            raise ValueError("a cache key is 64 hex digits")
        return self.directory / f"{key}{self.suffix}"

    def read_entry(self, key: str, read: Callable[[Path], T], *, refused: tuple[type[BaseException], ...] = ()
                   ) -> T | None:
        """``read(path)`` of the entry of ``key``, or None: absent, or refused (not a regular file — a link is
        never followed —, or ``read`` raised one of ``refused``, an InputError, OSError, KeyError, TypeError or
        ValueError: a partial, corrupt or foreign file, then removed so it is computed again). A hit becomes the
        most recently used entry."""
        path = self.path(key)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                raise InputError(f"{path.name}: not a regular file")
            out = read(path)
        except FileNotFoundError:
            return None
        except (InputError, OSError, KeyError, TypeError, ValueError, *refused):
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return out

    def entries(self) -> list[tuple[Path, int, int]]:
        """(path, size, last use in ns) of every entry, least recently used first."""
        out = []
        with contextlib.suppress(OSError):
            for p in self.directory.iterdir():
                if p.name.endswith(self.suffix) and not p.name.startswith("."):
                    with contextlib.suppress(OSError):
                        s = p.stat()
                        out.append((p, s.st_size, s.st_mtime_ns))
        return sorted(out, key=lambda e: (e[2], e[0].name))

    def evict(self) -> list[Path]:
        """Remove the least recently used entries until the rest fit in ``max_bytes``, and temporary files
        of writes interrupted more than an hour ago; the removed entries."""
        with contextlib.suppress(OSError):
            for p in self.directory.glob(f".*{self.suffix}.*.tmp"):
                with contextlib.suppress(OSError):
                    if time.time() - p.stat().st_mtime > 3600:
                        p.unlink()
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = []
        for path, size, _ in entries:
            if total <= self.max_bytes:
                break
            with contextlib.suppress(FileNotFoundError):  # another server may have removed it first
                path.unlink()
                removed.append(path)
            total -= size
        return removed
