"""Swap groups in the journal (schema ``sql/014_groups.sql``): several member swaps, each with its own record
and intent in ``tableswap_swaps``, published as one unit.

A group goes ``open`` → ``pending`` (:meth:`GroupLog.record_intent`: the one group intent, recorded once every
member's own intent is journaled and before the first flip) → ``committed`` (:meth:`GroupLog.commit`: one
transaction marking every member and the group committed), or ``failed`` (nothing of it was flipped; with every
member still staged it can be published again: :meth:`GroupLog.reopen`), or ``discarded`` (:meth:`GroupLog.discard`:
every member discarded in one transaction).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import sqlalchemy as sa

from tableswap import errors
from tableswap.core.group import COMMITTED, DISCARDED, FAILED, OPEN, PENDING, GroupMember, GroupRecord
from tableswap.core.records import ABORTED as SWAP_ABORTED, COMMITTED as SWAP_COMMITTED, STAGED as SWAP_STAGED
from tableswap.journal.db import stored_error, utcnow, write_transaction
from tableswap.journal.store import Journal


class GroupLog:
    """The journal's record of swap groups; safe to use from several threads and processes."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.engine = journal.engine

    def create(self, group_id: str, name: str | None, kind: str, *, rollback_of: str | None = None) -> None:
        """Record a new group (state ``open``)."""
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text(
                "INSERT INTO tableswap_groups (group_id, name, kind, state, rollback_of, created_at) "
                "VALUES (:g, :n, :k, :st, :r, :t)"),
                {"g": group_id, "n": name, "k": kind, "st": OPEN, "r": rollback_of, "t": utcnow()})

    def add_member(self, group_id: str, swap_id: str, db: str, table: str, *, catalog: str | None = None,
                   state_token: str | None = None) -> None:
        """Make the swap ``swap_id`` (of ``db.table``, staged in ``catalog``) a member of the open group; one table
        once per group. ``state_token``: its ``if_unchanged_since``, checked at the group's publish."""
        with write_transaction(self.engine) as conn:
            rows = conn.execute(sa.text(
                "SELECT db_name, table_name FROM tableswap_group_members WHERE group_id = :g"), {"g": group_id}).all()
            if (db, table) in {(r.db_name, r.table_name) for r in rows}:
                raise errors.InvalidInputError(
                    f"{db}.{table} is already a member of group {group_id}: a group changes each table once "
                    "(put the whole batch of that table in one call)", table=f"{db}.{table}")
            conn.execute(sa.text(
                "INSERT INTO tableswap_group_members (group_id, swap_id, db_name, table_name, position, catalog, "
                "state_token) VALUES (:g, :s, :d, :t, :p, :c, :k)"),
                {"g": group_id, "s": swap_id, "d": db, "t": table, "p": len(rows), "c": catalog, "k": state_token})

    def reopen(self, group_id: str) -> bool:
        """A group that failed before its intent (nothing flipped) is ``open`` again, to be published anew; False
        (nothing changed) when it was not ``failed`` any more. The caller checked every member is staged."""
        with write_transaction(self.engine) as conn:
            updated = conn.execute(sa.text(
                "UPDATE tableswap_groups SET state = :open, error = NULL WHERE group_id = :g AND state = :failed"),
                {"open": OPEN, "g": group_id, "failed": FAILED})
            return updated.rowcount == 1

    def discard(self, group_id: str, reason: str, staged_data: Mapping[str, Sequence[tuple[str, str]]]) -> None:
        """Every member (each ``staged``) ``aborted`` with ``reason`` and its staged data (``swap id → (partition,
        location)``) queued for the janitor, and the group ``discarded``, in one transaction: a member that is
        no longer staged (a publish came first) or a group no longer open or failed changes nothing
        (:class:`NotStagedError`)."""
        now = utcnow()
        error = stored_error(f"discarded with group {group_id}: {reason}", self.journal.url)
        with write_transaction(self.engine) as conn:
            group = conn.execute(sa.text(
                "UPDATE tableswap_groups SET state = :d, error = :e WHERE group_id = :g AND state IN (:open, :failed)"),
                {"d": DISCARDED, "e": stored_error(f"discarded: {reason}", self.journal.url), "g": group_id,
                 "open": OPEN, "failed": FAILED})
            if group.rowcount != 1:
                raise errors.NotStagedError(f"swap group {group_id} left state open meanwhile (published or discarded "
                                            "by another process?); nothing was changed")
            for swap_id, data in staged_data.items():
                updated = conn.execute(sa.text(
                    "UPDATE tableswap_swaps SET state = :ab, finished_at = :t, error = :e "
                    "WHERE swap_id = :s AND state = :staged"),
                    {"ab": SWAP_ABORTED, "t": now, "e": error, "s": swap_id, "staged": SWAP_STAGED})
                if updated.rowcount != 1:  # raising rolls the whole transaction back: nothing half-discarded
                    raise errors.NotStagedError(
                        f"member swap {swap_id} of group {group_id} left state staged meanwhile (published or "
                        "discarded by another process?); nothing was changed", swap_id=swap_id)
                self.journal._queue_all(conn, swap_id, list(data), "orphan", now)  # the journal's own queueing

    def named(self, name: str) -> list[GroupRecord]:
        """Every group of this name, newest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT * FROM tableswap_groups WHERE name = :n ORDER BY created_at DESC, group_id DESC"),
                {"n": name}).all()
            return [self._record(conn, r) for r in rows]

    def find(self, group_id: str) -> GroupRecord | None:
        """The group with this id, None if none."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.text("SELECT * FROM tableswap_groups WHERE group_id = :g"), {"g": group_id}).first()
            return None if row is None else self._record(conn, row)

    def record_intent(self, group_id: str) -> None:
        """The one group intent (``open`` → ``pending``): every member's own intent is journaled; from here
        ``tableswap recover`` finishes every member, whatever its own flip reached."""
        with write_transaction(self.engine) as conn:
            updated = conn.execute(sa.text(
                "UPDATE tableswap_groups SET state = :st, intent_at = :t WHERE group_id = :g AND state = :open"),
                {"st": PENDING, "t": utcnow(), "g": group_id, "open": OPEN})
            if updated.rowcount != 1:
                raise errors.SwapConflictError(
                    f"group {group_id} is no longer open in the journal; nothing was changed")

    def commit(self, group_id: str, displaced: Mapping[str, Iterable[tuple[str, str]]]) -> None:
        """One transaction: every member swap committed (``displaced``: swap id → the ``(partition, location)``
        pairs it queues for the janitor, once each) and the group committed."""
        now = utcnow()
        with write_transaction(self.engine) as conn:
            for swap_id, gone in displaced.items():
                self.journal._queue_all(conn, swap_id, list(gone), "displaced", now)  # the journal's own queueing
                conn.execute(sa.text(
                    "UPDATE tableswap_swaps SET state = :st, committed_at = :t WHERE swap_id = :s"),
                    {"st": SWAP_COMMITTED, "t": now, "s": swap_id})
            conn.execute(sa.text(
                "UPDATE tableswap_groups SET state = :st, committed_at = :t WHERE group_id = :g"),
                {"st": COMMITTED, "t": now, "g": group_id})

    def finish(self, group_id: str, state: str | None = None, error: str | None = None, *,
               only_from: Sequence[str] = ()) -> None:
        """Set the group's state (``failed``: nothing of it flipped) and/or note an error; with ``only_from``, only
        while the group is in one of those states (another publisher of it may have committed it meanwhile)."""
        sets: list[str] = []
        params: dict[str, str | None] = {"g": group_id}
        where = "group_id = :g"
        if only_from:
            where += " AND state IN (" + ", ".join(f":f{i}" for i in range(len(only_from))) + ")"
            params.update({f"f{i}": s for i, s in enumerate(only_from)})
        if state is not None:
            sets.append("state = :st")
            params["st"] = state
        if error is not None:
            sets.append("error = :e")
            params["e"] = stored_error(error, self.journal.url)
        if sets:
            with write_transaction(self.engine) as conn:
                conn.execute(sa.text(f"UPDATE tableswap_groups SET {', '.join(sets)} WHERE {where}"), params)

    def settle(self, group_id: str) -> bool:
        """A pending group whose members are all committed (``tableswap recover`` finished them) is committed;
        returns whether it is now."""
        record = self.get(group_id)
        if record.state == COMMITTED:
            return True
        if record.state != PENDING or any(m.state != SWAP_COMMITTED for m in record.members):
            return False
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text(
                "UPDATE tableswap_groups SET state = :st, committed_at = :t WHERE group_id = :g AND state = :p"),
                {"st": COMMITTED, "t": utcnow(), "g": group_id, "p": PENDING})
        return True

    # ------------------------------------------------------------------ reads
    def group_of(self, swap_id: str) -> GroupRecord | None:
        """The group the swap ``swap_id`` is a member of, if any."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.text("SELECT group_id FROM tableswap_group_members WHERE swap_id = :s"),
                               {"s": swap_id}).first()
        return None if row is None else self.get(row.group_id)

    def groups_of(self, swap_ids: Sequence[str]) -> dict[str, str]:
        """``{swap id: its group's id}`` for those of ``swap_ids`` that are group members."""
        ids, out = sorted(set(swap_ids)), {}
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                rows = conn.execute(sa.text(
                    "SELECT swap_id, group_id FROM tableswap_group_members WHERE swap_id IN ("
                    + ", ".join(f":s{i}" for i in range(len(chunk))) + ")"), {f"s{i}": s for i, s in enumerate(chunk)})
                out.update({r.swap_id: r.group_id for r in rows})
        return out

    def get(self, id_or_name: str) -> GroupRecord:
        """The group with this id or, else, the latest group of this name. :class:`NotFoundError` if none."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.text("SELECT * FROM tableswap_groups WHERE group_id = :g"), {"g": id_or_name}).first()
            if row is None:
                row = conn.execute(sa.text(
                    "SELECT * FROM tableswap_groups WHERE name = :n ORDER BY created_at DESC, group_id DESC"),
                    {"n": id_or_name}).first()
            if row is None:
                raise errors.NotFoundError(f"no swap group with the id or name {id_or_name!r} in the journal; "
                                           "`tableswap history --group` lists the groups")
            return self._record(conn, row)

    def list(self, *, states: Sequence[str] | None = None, limit: int = 50) -> list[GroupRecord]:
        """The groups, newest first."""
        where, params = "", {}
        if states:
            where = "WHERE state IN (" + ", ".join(f":s{i}" for i in range(len(states))) + ")"
            params = {f"s{i}": s for i, s in enumerate(states)}
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT * FROM tableswap_groups {where} "
                                        "ORDER BY created_at DESC, group_id DESC"), params).all()
            return [self._record(conn, r) for r in rows[:limit]]

    def pending_with(self, swap_id: str) -> bool:
        """The swap is a member of a group whose intent is recorded (state ``pending``): ``recover`` finishes
        it forward, as every other member, even when none of its own flip landed."""
        record = self.group_of(swap_id)
        return record is not None and record.state == PENDING

    def _record(self, conn: sa.Connection, row: sa.Row) -> GroupRecord:
        members = conn.execute(sa.text(
            "SELECT m.swap_id, m.db_name, m.table_name, m.position, m.catalog, m.state_token, s.state "
            "FROM tableswap_group_members m "
            "LEFT JOIN tableswap_swaps s ON s.swap_id = m.swap_id WHERE m.group_id = :g ORDER BY m.position"),
            {"g": row.group_id}).all()
        return GroupRecord(row.group_id, row.name, row.kind, row.state, row.created_at, row.intent_at,
                           row.committed_at, row.rollback_of, row.error,
                           tuple(GroupMember(m.swap_id, f"{m.db_name}.{m.table_name}", m.position, m.state, m.catalog,
                                             m.state_token)
                                 for m in members))


__all__ = ["GroupLog", "OPEN", "PENDING", "COMMITTED", "FAILED", "DISCARDED"]
