"""The janitor's persistent reference index in the journal (schema: ``sql/019_reference_index.sql``).

A cache of what the metastore references, kept up to date from the metastore's notification log
(:mod:`tableswap.ops.janitor.refs`): what is stored here only ever narrows what a janitor run reads when the
index is certainly complete; rows missing or dropped make the next run a full scan."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import sqlalchemy as sa

from tableswap.journal.db import write_transaction
from tableswap.journal.store import Journal, utcnow


@dataclass(frozen=True)
class IndexState:
    roots: tuple[str, ...]
    last_event_id: int
    full_scan_at: str


@dataclass(frozen=True)
class StoredTable:
    db: str
    table: str
    info: Mapping[str, Any]
    refs: Sequence[Sequence[Any]]


class ReferenceIndexStore:
    """Reads and writes one index (``index_key``) of a journal."""

    def __init__(self, journal: Journal, index_key: str) -> None:
        self.engine = journal.engine
        self.key = index_key

    def state(self) -> IndexState | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT roots, last_event_id, full_scan_at FROM tableswap_ref_index WHERE index_key = :k"
            ), {"k": self.key}).first()
        if row is None:
            return None
        return IndexState(tuple(json.loads(row[0])), int(row[1]), str(row[2]))

    def tables(self) -> list[StoredTable]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT db_name, table_name, info, refs FROM tableswap_ref_index_tables WHERE index_key = :k"
            ), {"k": self.key})
            return [StoredTable(r[0], r[1], json.loads(r[2]), json.loads(r[3])) for r in rows]

    def save(self, state: IndexState, tables: Iterable[StoredTable], *, replace_all: bool,
             removed: Iterable[tuple[str, str]] = ()) -> None:
        """Store ``state`` and ``tables`` in one transaction: every table of the index replaced
        (``replace_all``: after a full scan) or only those given, and ``removed`` deleted."""
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text("DELETE FROM tableswap_ref_index WHERE index_key = :k"), {"k": self.key})
            conn.execute(sa.text(
                "INSERT INTO tableswap_ref_index (index_key, roots, last_event_id, full_scan_at, updated_at) "
                "VALUES (:k, :r, :e, :f, :u)"
            ), {"k": self.key, "r": json.dumps(list(state.roots)), "e": state.last_event_id,
                "f": state.full_scan_at, "u": utcnow()})
            rows = [{"k": self.key, "d": t.db, "t": t.table, "i": json.dumps(t.info), "r": json.dumps(list(t.refs))}
                    for t in tables]
            if replace_all:
                conn.execute(sa.text("DELETE FROM tableswap_ref_index_tables WHERE index_key = :k"), {"k": self.key})
            else:
                gone = [{"k": self.key, "d": d, "t": t} for d, t in removed] + [
                    {"k": self.key, "d": r["d"], "t": r["t"]} for r in rows]
                if gone:
                    conn.execute(sa.text(
                        "DELETE FROM tableswap_ref_index_tables "
                        "WHERE index_key = :k AND db_name = :d AND table_name = :t"), gone)
            if rows:
                conn.execute(sa.text(
                    "INSERT INTO tableswap_ref_index_tables (index_key, db_name, table_name, info, refs) "
                    "VALUES (:k, :d, :t, :i, :r)"), rows)

    def clear(self) -> None:
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text("DELETE FROM tableswap_ref_index_tables WHERE index_key = :k"), {"k": self.key})
            conn.execute(sa.text("DELETE FROM tableswap_ref_index WHERE index_key = :k"), {"k": self.key})
