"""Progress of named backfills in the journal (schema ``sql/005_backfills.sql``).

Each unit row goes ``pending`` → ``running`` → ``done`` (with the swap that committed it) or
``failed`` (with the error). A rerun of the same backfill runs every unit that is not ``done``.
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa

from tableswap import errors
from tableswap.core.backfill import BackfillStatus, UnitState, UnitStatus
from tableswap.journal.db import stored_error, utcnow, write_transaction
from tableswap.journal.store import Journal


class BackfillLog:
    """The journal's record of backfills; safe to use from several threads and processes."""

    def __init__(self, journal: Journal) -> None:
        self.engine = journal.engine

    def start(self, name: str, db: str, table: str, units: Sequence[str]) -> None:
        """Register backfill ``name`` of ``db.table`` and its units (new ones ``pending``; known ones
        keep their state). Refuses a name already used for another table."""
        now = utcnow()
        with write_transaction(self.engine) as conn:
            row = conn.execute(sa.text("SELECT db_name, table_name FROM tableswap_backfills WHERE name = :n"),
                               {"n": name}).first()
            if row is None:
                conn.execute(sa.text(
                    "INSERT INTO tableswap_backfills (name, db_name, table_name, created_at, updated_at) "
                    "VALUES (:n, :d, :t, :now, :now) ON CONFLICT (name) DO NOTHING"
                ), {"n": name, "d": db, "t": table, "now": now})
                row = conn.execute(sa.text("SELECT db_name, table_name FROM tableswap_backfills WHERE name = :n"),
                                   {"n": name}).one()  # there is one now: inserted, or by a concurrent caller
            if conn.dialect.name != "sqlite":
                # Read committed: the count below and the insert after it must see no other caller's units in
                # between (two units would take one position). The backfill's row, there now, is the lock;
                # SQLite's write transaction holds the whole database already.
                conn.execute(sa.text("SELECT name FROM tableswap_backfills WHERE name = :n FOR UPDATE"), {"n": name})
            if (row.db_name, row.table_name) != (db, table):
                raise errors.InvalidInputError(
                    f"backfill {name!r} is a backfill of {row.db_name}.{row.table_name}, not {db}.{table}; "
                    "choose another name"
                )
            known = conn.execute(sa.text("SELECT COUNT(*) FROM tableswap_backfill_units WHERE name = :n"),
                                 {"n": name}).scalar() or 0
            if units:
                conn.execute(sa.text(
                    "INSERT INTO tableswap_backfill_units (name, unit, position, state, attempts) "
                    "VALUES (:n, :u, :p, :st, 0) ON CONFLICT (name, unit) DO NOTHING"
                ), [{"n": name, "u": u, "p": known + i, "st": UnitState.PENDING} for i, u in enumerate(units)])
            conn.execute(sa.text("UPDATE tableswap_backfills SET updated_at = :now WHERE name = :n"),
                         {"n": name, "now": now})

    def running(self, name: str, unit: str) -> None:
        self._set(name, unit, "state = :st, attempts = attempts + 1, started_at = :now, finished_at = NULL, "
                  "error = NULL, seconds = NULL", st=UnitState.RUNNING)

    def done(self, name: str, unit: str, swap_id: str | None, seconds: float) -> None:
        self._set(name, unit, "state = :st, swap_id = :s, finished_at = :now, seconds = :sec, error = NULL",
                  st=UnitState.DONE, s=swap_id, sec=round(seconds, 3))

    def failed(self, name: str, unit: str, error: str, swap_id: str | None, seconds: float) -> None:
        self._set(name, unit, "state = :st, swap_id = COALESCE(:s, swap_id), finished_at = :now, seconds = :sec, "
                  "error = :e", st=UnitState.FAILED, s=swap_id, sec=round(seconds, 3), e=stored_error(error))

    def _set(self, name: str, unit: str, sets: str, **params: object) -> None:
        now = utcnow()
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text(f"UPDATE tableswap_backfill_units SET {sets} WHERE name = :n AND unit = :u"),
                         {"n": name, "u": unit, "now": now, **params})
            conn.execute(sa.text("UPDATE tableswap_backfills SET updated_at = :now WHERE name = :n"),
                         {"n": name, "now": now})

    def status(self, name: str) -> BackfillStatus:
        """The backfill's progress; :class:`NotFoundError` for an unknown name."""
        with self.engine.connect() as conn:
            head = conn.execute(sa.text(
                "SELECT name, db_name, table_name, created_at, updated_at FROM tableswap_backfills WHERE name = :n"
            ), {"n": name}).first()
            if head is None:
                raise errors.NotFoundError(f"no backfill named {name!r} in the journal (see `tableswap backfill list`)")
            rows = conn.execute(sa.text(
                "SELECT unit, state, swap_id, attempts, started_at, finished_at, seconds, error "
                "FROM tableswap_backfill_units WHERE name = :n ORDER BY position, unit"
            ), {"n": name}).mappings()
            units = tuple(UnitStatus(**dict(r)) for r in rows)
        return BackfillStatus(head.name, f"{head.db_name}.{head.table_name}", head.created_at, head.updated_at, units)

    def names(self) -> list[str]:
        """Every backfill in the journal, most recently active first."""
        with self.engine.connect() as conn:
            return [r.name for r in conn.execute(sa.text(
                "SELECT name FROM tableswap_backfills ORDER BY updated_at DESC, name"))]
