"""Safe writes: every output is written to a temporary file next to it and renamed into place, an
existing output is kept unless the caller forces, and an output is never written onto one of the inputs.

A write that fails or is interrupted (an exception, Ctrl-C, a full disk) removes its temporary file and
leaves the previous output exactly as it was: the rename is the only step that touches it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from offeval_core.errors import OutputExists

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "check_output"]


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_output(out: str | os.PathLike, *, inputs: Iterable[str | os.PathLike] = (), force: bool = False,
                 flag: str = "--out") -> Path:
    """Check that ``out`` may be written: it is none of ``inputs`` (nor inside an input directory), and it
    does not exist unless ``force``. Raises :class:`OutputExists` otherwise; changes nothing.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "logs.csv"; _ = p.write_text("x")
    >>> check_output(p, inputs=[p])
    Traceback (most recent call last):
    ...
    offeval_core.errors.OutputExists: refusing to write the output onto an input: logs.csv (choose another --out)
    """
    path = Path(out)
    for given in inputs:
        src = Path(given)
        if not src.exists():
            continue
        if _same(path, src) or (src.is_dir() and os.path.realpath(path).startswith(os.path.realpath(src) + os.sep)):
            raise OutputExists(f"refusing to write the output onto an input: {path.name} (choose another {flag})")
    if path.exists() or path.is_symlink():
        if path.is_dir():
            raise OutputExists(f"{path.name} is a directory; {flag} must name a file")
        if not force:
            raise OutputExists(f"{path.name} already exists; pass --force to replace it, or choose another {flag}")
    return path


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary file in ``path``'s directory, then rename it onto ``path``.

    If ``write`` raises (or the process is interrupted), the temporary file is removed and ``path`` is
    left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: str | os.PathLike, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding=encoding))
