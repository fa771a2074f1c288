"""A database table as the input of the reduce: ``offeval reduce 'postgresql://user@host:5432/db?table=impressions'``.

The URL is that of any installed Ibis backend (``ibis.connect``), with the table in its ``table`` parameter
(``schema.table`` allowed). The table passes the same boundary as Parquet files
(:func:`~offeval_core.engine.sources.source_from_files`: the column names and mapping, every rule of
``read_logs`` with its message, the column limit and the rank ceiling) and the reduce runs in the database
itself, which creates only temporary tables of its own session (the cached rewarded rows, the small parameter
tables). Credentials never leave the connection: messages, the source name and the moments file's metadata
name the URL without user, password or parameters other than the table (:attr:`TableURL.shown`), the driver's
connection errors are quoted with them blanked out, and errors of the reduce's queries (which may quote values)
are named by type only.
"""

from __future__ import annotations

import contextlib
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field

from offeval_core.errors import LimitExceeded, OffevalError, SpecError, UnknownName, UnreadableInput
from offeval_core.limits import Limits

__all__ = ["TableURL", "close", "connect_table", "database_errors", "is_database_url", "parse_table_url",
           "source_from_table"]

_ALIASES = {"postgresql": "postgres"}  # as ibis.connect reads the scheme
# in-process engines that hold no tables a URL could name (Spark reads Parquet files: --engine spark)
_NO_TABLES = {"pyspark": "for Spark, give Parquet files with --engine spark --spark-master URL",
              "polars": "give Parquet files instead", "datafusion": "give Parquet files instead"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")  # one part; PostgreSQL keeps 63 bytes of a name
_SECRET = "***"


def _backend_names() -> tuple[str, ...]:
    """The names of every Ibis backend (installed or not), from Ibis's entry points."""
    from importlib.metadata import entry_points

    return tuple(sorted(e.name for e in entry_points(group="ibis.backends")))


def _installed(name: str) -> bool:
    """Whether the Ibis backend ``name`` imports (its driver is installed)."""
    import ibis

    try:
        getattr(ibis, name)
    except (ImportError, AttributeError):
        return False
    return True


def is_database_url(text: str) -> bool:
    """Whether ``text`` names a database table rather than files: a URL whose scheme is an Ibis backend's
    (``postgresql://…``, ``duckdb://…``) or that has a ``table`` parameter (Parquet locations such as
    ``s3a://…`` or ``hdfs://…`` are files).

    >>> is_database_url("postgresql://me@db:5432/feeds?table=impressions"), is_database_url("s3a://logs/2026/")
    (True, False)
    """
    text = str(text)
    if "://" not in text:
        return False
    parsed = urllib.parse.urlsplit(text)
    scheme = _ALIASES.get(parsed.scheme.lower(), parsed.scheme.lower())
    return scheme in _backend_names() or "table" in urllib.parse.parse_qs(parsed.query)


@dataclass(frozen=True)
class TableURL:
    """A database table named by URL. ``shown`` (also ``str()``) is the URL without credentials or parameters
    other than the table: the only form messages and files carry. ``url`` (the connection, credentials
    included) and ``secrets`` stay out of every message and repr."""

    backend: str
    table: str
    database: str | None
    shown: str
    url: str = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False, default=())
    path: str | None = None  # the database file of a file-based backend (duckdb, sqlite), else None

    def __str__(self) -> str:
        return self.shown

    def scrub(self, text: str) -> str:
        """``text`` with every credential of the URL (and its URL-encoded form) blanked out."""
        for s in sorted(self.secrets, key=len, reverse=True):
            for form in {s, urllib.parse.quote(s, safe=""), urllib.parse.quote_plus(s)}:
                text = text.replace(form, _SECRET)
        return text


def parse_table_url(text: str) -> TableURL:
    """Read a table URL: the scheme of an installed Ibis backend and a ``table`` parameter holding an
    identifier (``name`` or ``schema.name``: letters, digits and ``_``, not starting with a digit).

    >>> u = parse_table_url("postgresql://me:s3cret@db.example:5432/feeds?table=public.impressions")
    >>> u.backend, u.database, u.table, str(u)
    ('postgres', 'public', 'impressions', 'postgresql://***@db.example:5432/feeds?table=public.impressions')
    """
    text = str(text)
    try:
        parsed = urllib.parse.urlsplit(text)
        params = urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)
        user, password, host, port = parsed.username, parsed.password, parsed.hostname, parsed.port
    except ValueError:  # e.g. a port that is not a number; the URL itself is never quoted
        raise SpecError("the database URL cannot be read (expected scheme://user@host:port/database?table=NAME)",
                        source="database URL") from None
    scheme = parsed.scheme.lower()
    secrets = tuple(s for s in (password, user, *(v for k, v in params if k != "table")) if s)
    host = f"[{host}]" if host and ":" in host else (host or "")  # an IPv6 address keeps its brackets
    netloc = ("" if not (user or password) else _SECRET + "@") + host + (f":{port}" if port else "")
    tables = [v for k, v in params if k == "table"]
    shown_base = f"{scheme}://{netloc}{parsed.path}"
    name = _ALIASES.get(scheme, scheme)
    known = _backend_names()
    if name not in known:
        raise SpecError(f"{shown_base}: '{scheme}' is not the scheme of an Ibis backend; a database URL starts with "
                        f"one of: {', '.join(known)} (postgresql:// for PostgreSQL)", source=shown_base)
    if name in _NO_TABLES:
        raise SpecError(f"{shown_base}: '{scheme}' holds no tables a URL can name; {_NO_TABLES[name]}",
                        source=shown_base)
    if not _installed(name):
        raise SpecError(f"{shown_base}: the Ibis backend '{name}' is not installed here (pip install "
                        f"'ibis-framework[{name}]')", source=shown_base)
    if len(tables) != 1 or not tables[0]:
        raise SpecError(f"{shown_base}: name the table once, as ?table=NAME (or ?table=schema.NAME)",
                        source=shown_base)
    parts = tables[0].split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise SpecError(f"{shown_base}: the table must be an identifier (letters, digits and _, not starting with a "
                        "digit, at most 63 characters), or schema.identifier", source=shown_base,
                        expected="?table=NAME or ?table=schema.NAME")
    database, table = (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    rest = urllib.parse.urlencode([(k, v) for k, v in params if k != "table"])
    url = urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, parsed.path, rest, ""))
    path = (parsed.netloc + parsed.path) if name in ("duckdb", "sqlite") else None
    return TableURL(backend=name, table=table, database=database, shown=f"{shown_base}?table={tables[0]}", url=url,
                    secrets=secrets, path=path or None)


@contextlib.contextmanager
def database_errors(url: TableURL, *, stage: str):
    """Turn a failure of the database or its driver into :class:`UnreadableInput` naming ``url.shown``: the
    connection's message with the credentials blanked out (``stage == "connect"``), else only the error's type
    (a query's error may quote values of the table). offeval's own errors pass unchanged."""
    try:
        yield
    except OffevalError:
        raise
    except Exception as exc:
        kind = f"{type(exc).__module__.split('.')[0]}.{type(exc).__name__}"
        if stage == "connect":
            first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
            raise UnreadableInput(f"{url.shown}: cannot connect to the database ({kind}: {url.scrub(first)[:300]})",
                                  source=url.shown) from None
        raise UnreadableInput(f"{url.shown}: the database stopped a query {stage} ({kind}); the table's values are "
                              "not quoted here: run the reduce on an export of the table (Parquet) to see the "
                              "offending rows", source=url.shown) from None


def connect_table(url: TableURL):
    """(backend, Ibis table) of ``url``: the connection (a DuckDB file read-only, PostgreSQL without JIT
    compilation in this session: the reduce's queries are large and their cost estimates on temporary
    tables are high, so the JIT compiled each for seconds) and the table, its columns within the limits."""
    import ibis

    options = {}
    if url.backend == "duckdb":
        options["read_only"] = True  # a typo in the path does not create a database
    if url.backend == "postgres" and "connect_timeout" not in url.url:
        options["connect_timeout"] = 10
    with database_errors(url, stage="connect"):
        backend = ibis.connect(url.url, **options)
        if url.backend == "postgres":
            backend.raw_sql("SET jit = off").close()
    from ibis.common.exceptions import TableNotFound

    try:
        with database_errors(url, stage="reading the table's schema"):
            try:
                table = backend.table(url.table, database=url.database) if url.database else backend.table(url.table)
            except TableNotFound:
                raise UnknownName(f"{url.shown}: no table '{url.table}' in the database"
                                  + (f" schema '{url.database}'" if url.database else ""), source=url.shown) from None
    except BaseException:
        close(backend)
        raise
    return backend, table


def source_from_table(text: str, *, columns: dict[str, str] | None = None, rewards: Sequence[str] | None = None,
                      limits: Limits | None = None, arms=None, ask: str = "ambiguous"):
    """The reduce's :class:`~offeval_core.engine.sources.Source` for the table a URL names: connected, its
    columns within ``max_columns``, then read, checked and summarised by
    :func:`~offeval_core.engine.sources.source_from_files` on the database, exactly as Parquet files are (the
    reading of the columns, the arm labels mapped by ``arms``, questions raised at level ``ask``)."""
    from offeval_core.engine.sources import source_from_files

    limits = limits or Limits.from_env()
    url = parse_table_url(text)
    backend, table = connect_table(url)
    try:
        if len(table.columns) > limits.max_columns:
            raise LimitExceeded(f"{url.shown}: the table has {len(table.columns):,} columns, more than the limit "
                                f"{limits.max_columns:,} (OFFEVAL_MAX_COLUMNS / --max-columns)", source=url.shown,
                                expected=f"at most {limits.max_columns:,} columns")
        with database_errors(url, stage="checking the table"):
            return source_from_files(table, backend, columns=columns, rewards=rewards, limits=limits,
                                     arms=arms, ask=ask, name=url.shown)
    except BaseException:
        close(backend)
        raise


def close(backend) -> None:
    """Drop the temporary tables the reduce cached on ``backend`` and close the connection (the database is
    left as it was; Ibis would otherwise drop them when the process exits, through a closed connection)."""
    cached = getattr(backend, "_cache_name_to_entry", {})
    for name in list(cached):
        with contextlib.suppress(Exception):
            backend._finalize_cached_table(name)
    with contextlib.suppress(Exception):
        backend.disconnect()
