"""The journal's database: engine per dialect, versioned migrations, and readable connection errors.

Kept apart from :mod:`tableswap.journal.store` (what is recorded) so that this module holds every
dialect difference. Two dialects are supported:

- **SQLite** (the default, one file per machine): WAL mode and a busy timeout, so that several local
  processes can share it; every write transaction (:func:`write_transaction`, and each migration) runs
  under ``BEGIN IMMEDIATE``: it takes the write lock at its start, one writer at a time, so that what it
  reads stays true until it commits.
- **PostgreSQL** (a journal shared by several machines): plain ``postgresql://user@host/db`` URLs use
  the psycopg 3 driver; migrations run under a PostgreSQL advisory lock.

Migrations are the files ``sql/NNN_name.sql`` (portable) and ``sql/NNN_name.<dialect>.sql`` (one
dialect only: it replaces the portable file of the same version for that dialect; a version that
has no file for a dialect is recorded as applied there without doing anything). Each version is
applied once, in order, in its own transaction, and recorded in ``tableswap_schema``.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tableswap import errors
from tableswap.dirs import user_path
from tableswap.redact import known_secrets, mask_text, mask_url

SQLITE, POSTGRESQL = "sqlite", "postgresql"
DIALECTS = (SQLITE, POSTGRESQL)
PG_DRIVER = "psycopg"  # psycopg 3 (the `psycopg[binary]` dependency)
PG_CONNECT_TIMEOUT_S = 10  # default libpq connect_timeout unless the URL sets one
SCHEMA_TABLE = "tableswap_schema"
_MIGRATION_NAME = re.compile(r"^(\d+)_[A-Za-z0-9_]+(?:\.([a-z]+))?\.sql$")
_LOCK_KEY = "tableswap.journal.migrate:"  # + current schema: one migration lock per journal

PRIVILEGES_HINT = (
    "the journal user needs SELECT, INSERT, UPDATE and DELETE on the tableswap_* tables, and CREATE on "
    "the schema while the journal schema is created or upgraded (first use, new tableswap version)"
)


def utcnow() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


def default_url() -> str:
    """The SQLite journal in the user's state directory (:func:`tableswap.dirs.user_path`)."""
    return f"sqlite:///{user_path('journal.db', 'state')}"


JOURNAL_SETTING_HINT = (
    "read-only commands never create a journal: point --journal-url, TABLESWAP_JOURNAL_URL or journal_url in "
    "the config file at the journal the writers use (`tableswap doctor` shows which one is in effect)"
)


def missing_sqlite_journal(url: str) -> None:
    """Raise :class:`JournalNotFoundError` when ``url`` names a SQLite file (or directory) that does not
    exist; nothing is created."""
    try:
        parsed = parse_url(url)
    except errors.JournalError:
        return  # reported by create_engine
    if parsed.get_backend_name() != SQLITE or not parsed.database or parsed.database == ":memory:":
        return
    path = Path(parsed.database).expanduser()
    if path.exists():
        return
    what = "file" if path.parent.is_dir() else f"file, nor its directory {str(path.parent)!r},"
    raise errors.JournalNotFoundError(
        f"no swap journal at {safe_url(url)}: the SQLite {what} does not exist; {JOURNAL_SETTING_HINT}",
        url=safe_url(url))


def safe_url(url: str | sa.engine.URL) -> str:
    """The URL without its password or secret parameters, for messages (:func:`tableswap.redact.mask_url`)."""
    if isinstance(url, sa.engine.URL):
        return mask_url(url.render_as_string(hide_password=True))
    return mask_url(url)


def _escape_userinfo_at(url: str) -> str:
    """``scheme://user:pass@word@host/db`` → ``scheme://user:pass%40word@host/db``: the last ``@`` of the
    authority ends the user-info (as in RFC 3986 and urllib), where SQLAlchemy would take the first and
    send the rest of the password to the server as part of the host name."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = next((i for i, c in enumerate(rest) if c in "/?#"), len(rest))
    authority = rest[:end]
    if authority.count("@") < 2:
        return url
    userinfo, _, host = authority.rpartition("@")
    return f"{scheme}://{userinfo.replace('@', '%40')}@{host}{rest[end:]}"


def stored_error(text: str | None, url: str | None = None, limit: int = 4000) -> str | None:
    """Error text as the journal stores it: no secret in it (:func:`tableswap.redact.mask_text`, with the
    secrets of ``url`` and of this process's configuration), at most ``limit`` characters."""
    if text is None:
        return None
    return mask_text(text, known_secrets(url))[:limit]


# ---------------------------------------------------------------------- engines
def parse_url(url: str) -> sa.engine.URL:
    """Parse a journal URL; ``postgresql://`` and ``postgres://`` use psycopg 3. A password may hold an
    unescaped ``@`` (the last ``@`` before the host ends the user-info)."""
    try:
        parsed = sa.engine.make_url(_escape_userinfo_at(url) if isinstance(url, str) else url)
    except Exception as exc:  # noqa: BLE001 - sqlalchemy raises several types here
        raise errors.JournalError(
            f"journal URL {mask_url(url)!r} is not a valid SQLAlchemy URL: {mask_text(exc, known_secrets(url))}"
        ) from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername=f"postgresql+{PG_DRIVER}")
    return parsed


def create_engine(url: str) -> Engine:
    """An engine for the journal at ``url`` whose connection failures raise :class:`JournalError`."""
    parsed = parse_url(url)
    backend = parsed.get_backend_name()
    try:
        if backend == SQLITE:
            engine = _sqlite_engine(parsed)
        elif backend == POSTGRESQL:
            query = dict(parsed.query)
            query.setdefault("connect_timeout", str(PG_CONNECT_TIMEOUT_S))
            query.setdefault("application_name", "tableswap")
            engine = sa.create_engine(parsed.set(query=query), pool_pre_ping=True)
        else:
            engine = sa.create_engine(parsed, pool_pre_ping=True)
    except errors.JournalError:
        raise
    except ImportError as exc:
        raise errors.JournalError(
            f"cannot open journal {safe_url(parsed)}: its database driver is not installed ({exc}); "
            "for PostgreSQL: python -m pip install 'psycopg[binary]'"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - any driver error opening it is the journal's error, secrets masked
        raise errors.JournalError(
            f"cannot open journal {safe_url(parsed)}: {mask_text(exc, known_secrets(url))}") from exc

    @sa.event.listens_for(engine, "handle_error")
    def _readable(context):  # the library's callers and the CLI see JournalError, not SQLAlchemy
        problem = explain(context.original_exception, url)
        if problem is not None:
            raise errors.JournalError(problem) from context.original_exception

    return engine


def _sqlite_engine(parsed: sa.engine.URL) -> Engine:
    database = parsed.database
    if database and database != ":memory:":
        try:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise errors.JournalError(
                f"cannot create the directory of the journal {database!r}: {exc}; set TABLESWAP_JOURNAL_URL "
                "(or journal_url=) to a writable location"
            ) from exc
    engine = sa.create_engine(parsed, connect_args={"timeout": 60})

    @sa.event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):  # pragma: no cover - trivial
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=60000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return engine


def explain(exc: BaseException, url: str) -> str | None:
    """A message saying what to check, for a failure to reach or use the journal database; None
    for errors that are not about connectivity, credentials or privileges (constraint violations,
    which callers handle)."""
    text = mask_text(str(exc).strip(), known_secrets(url))  # a driver may echo what it was given
    low = text.lower()
    where = safe_url(url)
    try:
        parsed = sa.engine.make_url(_escape_userinfo_at(url))
    except Exception:  # noqa: BLE001 - an unparsable URL: the masked text is shown instead
        parsed = None
    host = f"{parsed.host or 'localhost'}:{parsed.port or 5432}" if parsed is not None else where
    user = (parsed.username if parsed is not None else None) or "(default user)"
    database = parsed.database if parsed is not None else None
    sqlstate = getattr(exc, "sqlstate", None) or ""
    detail = " ".join(text.split())[:500]
    if "does not exist" in low and "database" in low and ("fatal" in low or sqlstate == "3D000"):
        return (f"the journal database {database!r} does not exist on {host} ({detail}); create it "
                f"(CREATE DATABASE {database}) or fix the database name in TABLESWAP_JOURNAL_URL / journal_url")
    if (sqlstate.startswith("28") or "password authentication failed" in low or "no password supplied" in low
            or ("role" in low and "does not exist" in low) or "no pg_hba.conf entry" in low
            or "authentication failed" in low):
        return (f"the journal at {where} refused the login of user {user} ({detail}); check the user name and "
                "password in TABLESWAP_JOURNAL_URL / journal_url (or PGPASSWORD / ~/.pgpass) and the "
                "server's pg_hba.conf")
    if sqlstate == "42501" or "permission denied" in low or "must be owner" in low:
        return f"the journal at {where} denied an operation ({detail}); {PRIVILEGES_HINT}"
    if sqlstate == "3F000" or "no schema has been selected" in low:
        return (f"the journal at {where} has no usable schema ({detail}); create the schema named in the "
                "URL's search_path option or fix the option")
    if ("connection refused" in low or "could not connect" in low or "connection failed" in low
            or "failed to resolve host" in low or "could not translate host name" in low
            or "timeout expired" in low or "server closed the connection" in low
            or "connection is closed" in low or "terminating connection" in low or sqlstate.startswith("08")
            or sqlstate.startswith("57P")):
        return (f"cannot reach the PostgreSQL journal at {host} ({detail}); check the host and port in "
                "TABLESWAP_JOURNAL_URL / journal_url, that the server is running and accepts TCP connections "
                "from this machine (listen_addresses, firewall)")
    if "database is locked" in low:
        return (f"the journal {where} stayed locked by another process for longer than the busy timeout "
                f"({detail}); retry, or use a PostgreSQL journal for many concurrent writers")
    if ("unable to open database file" in low or "readonly database" in low or "disk i/o error" in low
            or "file is not a database" in low):
        return f"cannot use the SQLite journal {where} ({detail}); check the file and its directory"
    return None


# ---------------------------------------------------------------------- transactions
@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that writes (``engine.begin()``: committed at the end, rolled back on an exception).

    On SQLite it takes the write lock at its start (``BEGIN IMMEDIATE``, waiting up to the busy timeout
    for another writer), so that nothing commits between what it reads and what it writes. pysqlite's
    default (its ``isolation_level``, kept here) would begin a deferred transaction only at the first
    INSERT/UPDATE/DELETE: the reads before it ran outside the transaction, and a deferred transaction that
    read first would get "database is locked" at once, the busy timeout not waiting, once another
    connection had committed since its read (WAL's stale snapshot). pysqlite issues no BEGIN of its own
    inside the one begun here, and commits or rolls back that one. PostgreSQL: ``engine.begin()`` as is."""
    with engine.begin() as conn:
        _begin_exclusive(conn)
        yield conn


# ---------------------------------------------------------------------- migrations
def _sql_dir() -> Path:
    packaged = importlib.resources.files("tableswap") / "_sql"
    if packaged.is_dir():
        return Path(str(packaged))
    source = Path(__file__).resolve().parents[3] / "sql"  # editable install / source checkout
    if source.is_dir():
        return source
    raise errors.JournalError("the journal schema files (sql/*.sql) are missing from this installation")


def migrations(dialect: str = SQLITE) -> list[tuple[int, str]]:
    """``(version, script)`` in version order for ``dialect`` (``''`` for a version that has only
    other dialects' variants)."""
    portable: dict[int, str] = {}
    specific: dict[int, str] = {}
    versions: set[int] = set()
    for path in sorted(_sql_dir().glob("*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            continue
        version, variant = int(match.group(1)), match.group(2)
        if variant is not None and variant not in DIALECTS:
            raise errors.JournalError(f"journal migration {path.name}: unknown dialect {variant!r}")
        versions.add(version)
        target = portable if variant is None else specific if variant == dialect else None
        if target is not None:
            if version in target:
                raise errors.JournalError(f"two journal migrations with version {version} for {dialect}")
            target[version] = path.read_text(encoding="utf-8")
    return [(v, specific.get(v, portable.get(v, ""))) for v in sorted(versions)]


def statements(script: str) -> list[str]:
    text = "\n".join(line for line in script.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


def applied_versions(engine: Engine) -> set[int]:
    """Versions recorded in the journal; empty when it has no schema table yet. Read-only."""
    inspector = sa.inspect(engine)
    if not inspector.has_table(SCHEMA_TABLE):
        return set()
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(sa.text(f"SELECT version FROM {SCHEMA_TABLE}"))}


def migrate(engine: Engine) -> list[int]:
    """Apply the missing migrations, each once, in order, each in one transaction. Returns the
    versions this call applied. Safe when several processes open an empty journal at once: they
    serialize on a lock and each re-reads the applied versions under it."""
    dialect = engine.dialect.name
    wanted = migrations(dialect)
    if {v for v, _ in wanted} <= applied_versions(engine):
        return []  # up to date: needs no write privilege
    applied: list[int] = []
    with engine.connect() as conn:
        with _migration_lock(conn):
            for version, script in wanted:
                _begin_exclusive(conn)
                conn.execute(sa.text(
                    f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} "
                    "(version INTEGER PRIMARY KEY, applied_at VARCHAR(40) NOT NULL)"
                ))
                done = {row[0] for row in conn.execute(sa.text(f"SELECT version FROM {SCHEMA_TABLE}"))}
                if version in done:
                    conn.commit()
                    continue
                for statement in statements(script):
                    conn.execute(sa.text(statement))
                conn.execute(sa.text(f"INSERT INTO {SCHEMA_TABLE} (version, applied_at) VALUES (:v, :t)"),
                             {"v": version, "t": utcnow()})
                conn.commit()
                applied.append(version)
    return applied


@contextmanager
def _migration_lock(conn: Connection) -> Iterator[None]:
    """PostgreSQL: a session advisory lock per journal schema, held across all migrations. SQLite
    needs none (each migration transaction is ``BEGIN IMMEDIATE``)."""
    if conn.dialect.name != POSTGRESQL:
        yield
        return
    key = "hashtext(:k || coalesce(current_schema(), ''))"
    conn.execute(sa.text(f"SELECT pg_advisory_lock({key})"), {"k": _LOCK_KEY})
    conn.commit()
    try:
        yield
    finally:
        try:
            conn.rollback()
            conn.execute(sa.text(f"SELECT pg_advisory_unlock({key})"), {"k": _LOCK_KEY})
            conn.commit()
        except sa.exc.DBAPIError:  # connection lost: the server released the lock with the session
            pass


def _begin_exclusive(conn: Connection) -> None:
    """Open a write transaction (a migration's, :func:`write_transaction`'s); on SQLite take the write lock
    at once (``BEGIN IMMEDIATE``: pysqlite would otherwise begin only at the first INSERT/UPDATE/DELETE,
    after the reads and DDL before it)."""
    if conn.dialect.name == SQLITE:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
