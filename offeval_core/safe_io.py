"""Safe writes: every output is written to a temporary file next to it and renamed into place, an
existing output is kept unless the caller forces, and an output is never written onto one of the inputs.

A write that fails or is interrupted (an exception, Ctrl-C, a full disk) removes its temporary file and
leaves the previous output exactly as it was: the rename is the only step that touches it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from offeval_core.errors import OutputExists, UnwritableOutput

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "check_output", "output_mode"]


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _umask() -> int:
    """The process's umask, read without changing it (Linux ≥ 4.7 reports it in /proc/self/status)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: read by setting (not thread-safe; only where /proc is missing)
    os.umask(mask)
    return mask


def output_mode(path: str | os.PathLike) -> int:
    """The permission bits a written output gets: those of the file it replaces, else 0o666 less the
    umask (what ``open(path, "w")`` gives a new file).

    >>> import tempfile, pathlib
    >>> oct(output_mode(pathlib.Path(tempfile.mkdtemp()) / "new.csv") | 0o022)  # under the usual umask 022
    '0o666'
    """
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _unwritable(path: Path, exc: OSError, flag: str) -> UnwritableOutput:
    reason = exc.strerror or type(exc).__name__
    return UnwritableOutput(f"cannot write {path.name} in {path.parent}: {reason.lower()} (choose another {flag})",
                            source=str(path), expected="a path in a directory you can write")


def check_output(out: str | os.PathLike, *, inputs: Iterable[str | os.PathLike] = (), force: bool = False,
                 flag: str = "--out") -> Path:
    """Check that ``out`` may be written: it is none of ``inputs`` (nor inside an input directory), it does
    not exist unless ``force``, and its directory (or the nearest existing one above it) can be written.
    Raises :class:`OutputExists` or :class:`UnwritableOutput` otherwise; changes nothing.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "logs.csv"; _ = p.write_text("x")
    >>> check_output(p, inputs=[p])
    Traceback (most recent call last):
    ...
    offeval_core.errors.OutputExists: refusing to write the output onto an input: logs.csv (choose another --out)
    """
    path = Path(out)
    if not str(out).strip():
        raise UnwritableOutput(f"{flag} is empty; name the file to write", source=flag)
    for given in inputs:
        src = Path(given)
        if not str(given).strip() or not src.exists():
            continue
        if _same(path, src) or (src.is_dir() and os.path.realpath(path).startswith(os.path.realpath(src) + os.sep)):
            raise OutputExists(f"refusing to write the output onto an input: {path.name} (choose another {flag})")
    if path.exists() or path.is_symlink():
        if path.is_dir():
            raise OutputExists(f"{path.name} is a directory; {flag} must name a file")
        if not force:
            raise OutputExists(f"{path.name} already exists; pass --force to replace it, or choose another {flag}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UnwritableOutput(f"cannot write {path.name}: {parent} is a file, not a directory (choose another "
                               f"{flag})", source=str(path))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UnwritableOutput(f"cannot write {path.name} in {parent}: permission denied (choose another {flag})",
                               source=str(path))
    return path


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object], *, flag: str = "--out") -> Path:
    """Call ``write(tmp)`` on a temporary file in ``path``'s directory, then rename it onto ``path``.

    If ``write`` raises (or the process is interrupted), the temporary file is removed and ``path`` is
    left as it was. The file gets :func:`output_mode` (the replaced file's permissions, else the umask's),
    not the private 0600 of a temporary file. A directory that cannot be written raises
    :class:`UnwritableOutput` naming ``flag``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _unwritable(path, exc, flag) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, output_mode(path))
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, PermissionError | IsADirectoryError | NotADirectoryError) or (
                isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT)):
            raise _unwritable(path, exc, flag) from None
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: str | os.PathLike, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding=encoding))
