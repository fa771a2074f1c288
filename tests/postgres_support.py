"""A real PostgreSQL server for the tests: Debian's PostgreSQL binaries (``initdb``, ``pg_ctl``) run in a temporary
directory on 127.0.0.1 and a free port, with a password (SCRAM) so credentials travel in the URL, and stopped
(``pg_ctl stop -m fast``) with its directory removed at the end, also when a test fails.

The server refuses to run as root, so under root it runs as the ``postgres`` user (``runuser``) in a directory
that user owns. Tables are loaded with ``COPY`` (an INSERT of many rows would hit PostgreSQL's
65 535-parameter limit per statement), row by row so that NULL and the empty string stay apart."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

BIN_DIRS = ("/usr/lib/postgresql/15/bin",)
USER, PASSWORD, DATABASE = "ranker", "Pg-s3cret-7f", "feeds"


def binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (Debian's PostgreSQL 15, else the ones on PATH)."""
    for d in BIN_DIRS:
        if os.access(Path(d) / "initdb", os.X_OK) and os.access(Path(d) / "pg_ctl", os.X_OK):
            return Path(d)
    found = shutil.which("initdb"), shutil.which("pg_ctl")
    if all(found) and Path(found[0]).resolve().parent == Path(found[1]).resolve().parent:
        return Path(found[0]).resolve().parent
    return None


def skip_reason() -> str | None:
    """Why no server can be started here (None: it can)."""
    if binaries() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/15/bin or on PATH"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the server as 'postgres'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Server:
    port: int
    root: Path

    def url(self, table: str | None = None, *, password: str | None = PASSWORD, user: str = USER) -> str:
        auth = f"{user}:{password}" if password is not None else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{DATABASE}" + (f"?table={table}" if table else "")

    def connect(self):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, dbname=DATABASE,
                               autocommit=True, connect_timeout=10)

    def load(self, name: str, frame: pd.DataFrame) -> None:
        """Create table ``name`` with column types from the frame's dtypes and COPY the rows in."""
        cols = ", ".join(f'"{c}" {_sql_type(frame[c])}' for c in frame.columns)
        columns = [[None if _missing(v) else v for v in frame[c].astype(object).tolist()] for c in frame.columns]
        with self.connect() as con, con.cursor() as cur:
            cur.execute(f'DROP TABLE IF EXISTS "{name}"')
            cur.execute(f'CREATE TABLE "{name}" ({cols})')
            names = ", ".join(f'"{c}"' for c in frame.columns)
            with cur.copy(f'COPY "{name}" ({names}) FROM STDIN') as copy:  # NULL and '' stay apart
                for row in zip(*columns, strict=True):
                    copy.write_row(row)
            cur.execute(f'ANALYZE "{name}"')


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v) or v is pd.NA


def _sql_type(col: pd.Series) -> str:
    kind = col.dtype.kind
    if kind == "b":
        return "boolean"
    if kind in "iu":
        return "integer" if col.dtype.itemsize <= 4 else "bigint"
    if kind == "f":
        return "double precision"
    if kind == "M":
        return "timestamp"
    values = col.dropna()
    if len(values) and all(hasattr(v, "isoformat") and not hasattr(v, "hour") for v in values.head(100)):
        return "date"
    return "text"


def _run(cmd: list[str], *, as_postgres: bool, timeout: float) -> subprocess.CompletedProcess:
    if as_postgres:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@contextlib.contextmanager
def postgres_server():
    """A running server (database ``feeds``, user ``ranker`` with a password); stopped and removed on exit."""
    bindir = binaries()
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="offeval-pg-"))
    data, log = root / "data", root / "server.log"
    started = False
    try:
        pwfile = root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if as_postgres:
            import pwd

            pg = pwd.getpwnam("postgres")
            for p in (root, pwfile):
                os.chown(p, pg.pw_uid, pg.pw_gid)
        root.chmod(0o700)
        init = _run([str(bindir / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}",
                     "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"], as_postgres=as_postgres,
                    timeout=120)
        if init.returncode:
            raise RuntimeError(f"initdb failed: {init.stderr[-2000:]}")
        port = _free_port()
        options = (f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c synchronous_commit=off "
                   "-c full_page_writes=off -c shared_buffers=32MB -c max_connections=20")
        start = _run([str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60",
                      "start"], as_postgres=as_postgres, timeout=90)
        started = True
        if start.returncode:
            raise RuntimeError(f"pg_ctl start failed: {start.stderr[-1000:]} {_tail(log)}")
        _create_database(port)
        yield Server(port=port, root=root)
    finally:
        if started:
            stop = _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"],
                        as_postgres=as_postgres, timeout=90)
            if stop.returncode and (data / "postmaster.pid").exists():
                _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "-t", "30", "stop"],
                     as_postgres=as_postgres, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def server_processes(root: Path) -> list[int]:
    """The ids of running processes whose command line names ``root`` (the server and its children)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(root) in cmd:
                out.append(int(entry.name))
    return out


def _create_database(port: int) -> None:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, dbname="postgres",
                         autocommit=True, connect_timeout=10) as con:
        con.execute(f"CREATE DATABASE {DATABASE}")


def _tail(path: Path) -> str:
    try:
        return path.read_text()[-1500:]
    except OSError:
        return ""
