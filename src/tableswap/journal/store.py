"""The swap journal: swap history (intent → commit) and the queue of displaced locations.

SQLite (the default, a file under the user's state directory) serves one machine; PostgreSQL
(``postgresql://user@host/db``) a journal shared by several. The schema lives in ``sql/NNN_*.sql``
and is brought up to date on open; engines, dialects and migrations are in :mod:`.db`.
The SQL here is portable between both dialects.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import sqlalchemy as sa

from tableswap import errors
from tableswap.journal.db import (  # noqa: F401 - re-exported
    JOURNAL_SETTING_HINT, applied_versions, create_engine, default_url, missing_sqlite_journal, migrate, migrations,
    safe_url, stored_error, utcnow, write_transaction,
)
from tableswap.logs import get_logger
from tableswap.core.deprecated import renamed
from tableswap.core.records import (  # noqa: F401 (re-exported: the journal's vocabulary)
    ABORTED, COMMITTED, FAILED, PENDING, STAGED, STAGING, UNFINISHED, Action, Deletion, DeletionState, HookOutcome,
    PartitionChange, SwapKind, SwapRecord, SwapState,
)

log = get_logger("tableswap.journal")


class Journal:
    """Swap history and deletion queue. Safe to share between processes."""

    def __init__(self, url: str | None = None, *, create: bool = True) -> None:
        """Open (``create``: and create or upgrade) the journal at ``url`` (default: the local SQLite file).

        With ``create=False`` (read-only commands) a journal that does not exist yet is an error
        (:class:`JournalNotFoundError`) instead of a new, empty journal: reading an empty one would
        silently answer "nothing here" about the wrong journal.
        """
        self.url = url or default_url()
        if not create:
            missing_sqlite_journal(self.url)
        self.engine = create_engine(self.url)
        try:
            if not create and not applied_versions(self.engine):
                raise errors.JournalNotFoundError(
                    f"no swap journal in {safe_url(self.url)} (its tableswap_* tables do not exist); "
                    f"{JOURNAL_SETTING_HINT}", url=safe_url(self.url))
            migrate(self.engine)
        except errors.JournalError:
            self.engine.dispose()
            raise
        except Exception as exc:  # noqa: BLE001 - any driver error opening it is the journal's error, with the URL masked
            self.engine.dispose()
            raise errors.JournalError(f"cannot open the swap journal at {safe_url(self.url)}: {exc}") from exc

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql`` (or another SQLAlchemy dialect name)."""
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    def schema_version(self) -> int:
        """The highest schema version applied to this journal (see ``sql/NNN_*.sql``)."""
        with self.engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT MAX(version) FROM tableswap_schema")).scalar() or 0)

    def check_writable(self) -> None:
        """Write a row inside a transaction and roll it back; raise :class:`JournalError` if refused."""
        try:
            with self.engine.connect() as conn:
                trans = conn.begin()
                try:
                    conn.execute(sa.text("INSERT INTO tableswap_schema (version, applied_at) VALUES (:v, :t)"),
                                 {"v": -1, "t": "tableswap doctor write probe"})
                finally:
                    trans.rollback()
        except sa.exc.SQLAlchemyError as exc:
            raise errors.JournalError(f"the swap journal at {safe_url(self.url)} is not writable: "
                                      f"{getattr(exc, 'orig', None) or exc}") from exc


    # ------------------------------------------------------------------ swaps
    def begin_swap(self, record: SwapRecord) -> None:
        """Record a swap that is about to stage data (state ``staging``)."""
        row = {k: getattr(record, k) for k in _SWAP_COLUMNS}
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text(
                f"INSERT INTO tableswap_swaps ({', '.join(_SWAP_COLUMNS)}) "
                f"VALUES ({', '.join(':' + c for c in _SWAP_COLUMNS)})"
            ), row)

    def record_intent(self, swap_id: str, items: Sequence[PartitionChange], sizes: Mapping[str, int] | None = None,
                      columns: str | None = None) -> None:
        """The plan, written before the flip: enough for ``recover`` to finish or abort it. ``sizes``: the
        data bytes of the new locations where the swap knows them (``tableswap_location_sizes``: the queue
        carries them when a later swap displaces a location, for ``tableswap janitor status``). ``columns``:
        the table's columns (JSON, :func:`tableswap.core.column_types.to_json`), kept if None."""
        now = utcnow()
        with write_transaction(self.engine) as conn:
            if sizes:
                # The first record of a location wins (a recovery re-recording an intent changes nothing).
                conn.execute(sa.text(
                    "INSERT INTO tableswap_location_sizes (location_key, location, bytes, swap_id, recorded_at) "
                    "VALUES (:k, :l, :b, :s, :t) ON CONFLICT (location_key) DO NOTHING"
                ), [{"k": location_key(location), "l": location, "b": int(size), "s": swap_id, "t": now}
                    for location, size in sorted(sizes.items())])
            conn.execute(sa.text("DELETE FROM tableswap_swap_items WHERE swap_id = :s"), {"s": swap_id})
            if items:
                conn.execute(sa.text(
                    "INSERT INTO tableswap_swap_items (swap_id, partition_name, action, old_location, new_location) "
                    "VALUES (:s, :p, :a, :o, :n)"
                ), [{"s": swap_id, "p": i.partition_name, "a": i.action, "o": i.old_location, "n": i.new_location}
                    for i in items])
            # A staged swap's publish records its intent from 'staged'; a discard that won the race
            # (state 'aborted') makes it fail here, before anything changed.
            updated = conn.execute(sa.text(
                "UPDATE tableswap_swaps SET state = :st, intent_at = :t, table_columns = COALESCE(:c, table_columns) "
                "WHERE swap_id = :s AND state IN (:staging, :staged, :st)"
            ), {"st": PENDING, "t": now, "s": swap_id, "staging": STAGING, "staged": STAGED, "c": columns})
            if updated.rowcount == 0:  # e.g. `tableswap recover` aborted it as stale meanwhile
                now_row = conn.execute(sa.text("SELECT state, error FROM tableswap_swaps WHERE swap_id = :s"),
                                       {"s": swap_id}).first()
                why = (f"it is {now_row.state}" + (f" ({stored_error(now_row.error, self.url)})" if now_row.error
                                                   else "")) if now_row else "it has no journal record"
                raise errors.SwapConflictError(
                    f"swap {swap_id} is no longer in progress in the journal: {why}; its flip was not started "
                    "and nothing was changed. Rerun the swap.",
                    swap_id=swap_id
                )

    def heartbeat(self, swap_id: str) -> bool:
        """The swap's process is alive: set its ``heartbeat_at`` to now. False (nothing changed) once the swap
        is no longer ``staging`` or ``pending``: finished, failed, staged, or aborted by ``tableswap recover``."""
        with write_transaction(self.engine) as conn:
            updated = conn.execute(sa.text(
                "UPDATE tableswap_swaps SET heartbeat_at = :t WHERE swap_id = :s AND state IN (:staging, :pending)"
            ), {"t": utcnow(), "s": swap_id, "staging": STAGING, "pending": PENDING})
            return updated.rowcount == 1

    def abort_silent(self, swap_id: str, heartbeat_at: str | None, reason: str,
                     staged_data: Sequence[tuple[str, str]] = ()) -> bool:
        """A swap still ``staging`` whose process went silent is aborted: ``staging`` → ``aborted`` with
        ``reason`` and its staged data (``(partition name, location)``) queued for the janitor, in one
        transaction, only if its heartbeat is still ``heartbeat_at`` (the value the caller judged stale). False,
        nothing changed, if it moved on or beat meanwhile. Its process, if it is only frozen, then fails at
        its intent (:meth:`record_intent`) before its flip."""
        now = utcnow()
        beat = "heartbeat_at IS NULL" if heartbeat_at is None else "heartbeat_at = :hb"
        with write_transaction(self.engine) as conn:
            updated = conn.execute(sa.text(
                "UPDATE tableswap_swaps SET state = :ab, finished_at = :t, error = :e "
                f"WHERE swap_id = :s AND state = :staging AND {beat}"
            ), {"ab": ABORTED, "t": now, "e": stored_error(reason, self.url), "s": swap_id, "staging": STAGING,
                "hb": heartbeat_at})
            if updated.rowcount != 1:
                return False
            self._queue_all(conn, swap_id, staged_data, "orphan", now)
            return True

    def commit(self, swap_id: str, displaced: Iterable[tuple[str, str]], reason: str = "displaced") -> None:
        """Mark the swap committed and queue each displaced ``(partition_name, location)`` once."""
        now = utcnow()
        with write_transaction(self.engine) as conn:
            self._queue_all(conn, swap_id, displaced, reason, now)
            conn.execute(sa.text(
                "UPDATE tableswap_swaps SET state = :st, committed_at = :t WHERE swap_id = :s"
            ), {"st": COMMITTED, "t": now, "s": swap_id})

    def _queue_all(self, conn, swap_id, locations, reason, now) -> None:
        swap = conn.execute(sa.text(
            "SELECT db_name, table_name, table_root, state FROM tableswap_swaps WHERE swap_id = :s"
        ), {"s": swap_id}).one()
        rows = [{"s": swap_id, "l": location, "d": swap.db_name, "t": swap.table_name, "p": partition_name,
                 "r": swap.table_root, "reason": reason, "now": now, "k": location_key(location)}
                for partition_name, location in locations]
        if not rows:
            return
        # Exactly once, also when two processes queue the same location at the same time (e.g. a
        # writer and `tableswap recover` committing one swap): the primary key arbitrates. Each row
        # carries the location's recorded size (NULL: unknown), looked up by its primary key. One
        # executemany for all of them.
        conn.execute(sa.text(
            "INSERT INTO tableswap_deletions (swap_id, location, db_name, table_name, partition_name, "
            "table_root, reason, state, queued_at, attempts, bytes) "
            "VALUES (:s, :l, :d, :t, :p, :r, :reason, 'pending', :now, 0, "
            "(SELECT bytes FROM tableswap_location_sizes WHERE location_key = :k)) "
            "ON CONFLICT (swap_id, location) DO NOTHING"
        ), rows)

    def mark_staged(self, swap_id: str, drops: Sequence[str] = (), scope: str | None = None,
                    files: Mapping[str, int] | None = None,
                    written_for: Mapping[str, object] | None = None) -> bool:
        """A swap that has staged its batch pauses before its commit: ``staging`` → ``staged``, with the
        partitions its scope drops (``drops``, partition names), its scope (``scope``, JSON text, see
        :meth:`tableswap.core.scope.ScopeDrops.to_json`) and, in the same transaction, what it staged
        (``files``: its data files, path relative to the staging location → bytes; ``written_for``: the
        target's format and columns), read back by :meth:`staged_batch`. False if it was not staging."""
        import json

        now = utcnow()
        with write_transaction(self.engine) as conn:
            updated = conn.execute(sa.text(
                "UPDATE tableswap_swaps SET state = :st, staged_at = :t, staged_drops = :d, staged_scope = :sc, "
                "error = NULL WHERE swap_id = :s AND state = :staging"
            ), {"st": STAGED, "t": now, "d": json.dumps(list(drops)) if drops else None, "sc": scope, "s": swap_id,
                "staging": STAGING})
            if updated.rowcount != 1:
                return False
            if files is not None:
                conn.execute(sa.text("DELETE FROM tableswap_staged_batches WHERE swap_id = :s"), {"s": swap_id})
                conn.execute(sa.text(
                    "INSERT INTO tableswap_staged_batches "
                    "(swap_id, file_count, bytes, files, written_for, recorded_at) "
                    "VALUES (:s, :n, :b, :f, :w, :t)"
                ), {"s": swap_id, "n": len(files), "b": sum(files.values()),
                    "f": json.dumps(dict(sorted(files.items()))), "w": json.dumps(dict(written_for or {})), "t": now})
            return True

    def staged_batch(self, swap_id: str) -> tuple[dict[str, int], dict[str, object]] | None:
        """What :meth:`mark_staged` recorded of ``swap_id``: ``(files, written_for)``; None for a swap
        staged before journal version 9 (or never staged)."""
        import json

        with self.engine.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT files, written_for FROM tableswap_staged_batches WHERE swap_id = :s"
            ), {"s": swap_id}).first()
        if row is None:
            return None
        return {str(k): int(v) for k, v in json.loads(row.files).items()}, dict(json.loads(row.written_for))

    def end_staged(self, swap_id: str, reason: str, staged_data: Sequence[tuple[str, str]] = ()) -> bool:
        """A staged swap is discarded: ``staged`` → ``aborted`` with ``reason``, and its staged data
        (``(partition name, location)``) queued for the janitor, in one transaction. False (nothing
        changed) if it was not staged any more: a publish or another discard came first."""
        now = utcnow()
        with write_transaction(self.engine) as conn:
            updated = conn.execute(sa.text(
                "UPDATE tableswap_swaps SET state = :ab, finished_at = :t, error = :e "
                "WHERE swap_id = :s AND state = :staged"
            ), {"ab": ABORTED, "t": now, "e": stored_error(reason, self.url), "s": swap_id, "staged": STAGED})
            if updated.rowcount != 1:
                return False
            self._queue_all(conn, swap_id, staged_data, "orphan", now)
            return True

    def restage(self, swap_id: str, error: str, *, states: Sequence[str] = (FAILED, PENDING)) -> bool:
        """A staged swap's publish failed before its flip (its intent was recorded, nothing changed): it is
        ``staged`` again, its intent forgotten, so that it can be published or discarded anew. Only for a
        swap that was staged (``staged_at`` set) and is now in one of ``states`` (``failed``: the publish's
        failure mapping found its flip never started; ``pending``: ``recover`` found none of it landed);
        False otherwise."""
        wanted = [s for s in states if s in (FAILED, PENDING)]
        if not wanted:
            return False
        with write_transaction(self.engine) as conn:
            updated = conn.execute(sa.text(
                "UPDATE tableswap_swaps SET state = :staged, intent_at = NULL, finished_at = NULL, error = :e "
                "WHERE swap_id = :s AND staged_at IS NOT NULL AND state IN ("
                + ", ".join(f":st{i}" for i in range(len(wanted))) + ")"
            ), {"staged": STAGED, "e": stored_error(error, self.url), "s": swap_id,
                **{f"st{i}": str(st) for i, st in enumerate(wanted)}})
            if updated.rowcount != 1:
                return False
            conn.execute(sa.text("DELETE FROM tableswap_swap_items WHERE swap_id = :s"), {"s": swap_id})
            return True

    def queue_orphans(self, swap_id: str, locations: Iterable[tuple[str, str]]) -> None:
        """Queue data a failed or aborted swap staged, for the janitor."""
        with write_transaction(self.engine) as conn:
            self._queue_all(conn, swap_id, locations, "orphan", utcnow())

    def finish(self, swap_id: str, state: str | None = None, error: str | None = None) -> None:
        """Set ``finished_at`` (cleanup done) and optionally a final state and error text."""
        sets = ["finished_at = :t"]
        params: dict[str, object] = {"t": utcnow(), "s": swap_id}
        if state:
            sets.append("state = :st")
            params["st"] = state
        if error is not None:
            sets.append("error = :e")
            params["e"] = stored_error(error, self.url)
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text(f"UPDATE tableswap_swaps SET {', '.join(sets)} WHERE swap_id = :s"), params)

    def get_swap(self, swap_id: str) -> SwapRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.text(
                f"SELECT {', '.join(_SWAP_COLUMNS)} FROM tableswap_swaps WHERE swap_id = :s"
            ), {"s": swap_id}).mappings().first()
            if row is None:
                return None
            return self._with_items(conn, [row])[0]

    def last_batch_partitions(self, db: str, table: str) -> int | None:
        """How many partitions the batch of the table's latest committed swap of partitions (or merge) wrote
        (its items added, replaced or unchanged; its drops not); None when it has none. Two indexed reads: what
        ``write_distribution = "auto"`` takes as the next batch's count when nothing else tells it."""
        with self.engine.connect() as conn:
            swap_id = conn.execute(sa.text(
                "SELECT swap_id FROM tableswap_swaps WHERE db_name = :d AND table_name = :t AND state = :c "
                "AND kind IN (:p, :m) ORDER BY started_at DESC, swap_id DESC LIMIT 1"
            ), {"d": db, "t": table, "c": COMMITTED, "p": SwapKind.PARTITIONS.value,
                "m": SwapKind.MERGE.value}).scalar()
            if swap_id is None:
                return None
            return int(conn.execute(sa.text(
                "SELECT COUNT(*) FROM tableswap_swap_items WHERE swap_id = :s AND action <> :drop"
            ), {"s": swap_id, "drop": Action.DROP.value}).scalar() or 0)

    def list_swaps(self, db: str | None = None, table: str | None = None, *, states: Sequence[str] | None = None,
                   limit: int | None = None) -> list[SwapRecord]:
        where, params = _filters(db, table, states)
        sql = f"SELECT {', '.join(_SWAP_COLUMNS)} FROM tableswap_swaps"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC, swap_id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        with self.engine.connect() as conn:
            rows = list(conn.execute(sa.text(sql), params).mappings())
            return self._with_items(conn, rows)

    def _with_items(self, conn, rows) -> list[SwapRecord]:
        out = []
        for row in rows:
            items = tuple(
                PartitionChange(r.partition_name, r.action, r.old_location, r.new_location)
                for r in conn.execute(sa.text(
                    "SELECT partition_name, action, old_location, new_location FROM tableswap_swap_items "
                    "WHERE swap_id = :s ORDER BY partition_name"
                ), {"s": row["swap_id"]})
            )
            # Masked on reading too: rows written before tableswap masked stored errors.
            out.append(SwapRecord(**{**dict(row), "error": stored_error(row["error"], self.url)}, items=items))
        return out

    # ------------------------------------------------------------------ post-commit hooks
    def record_hook_runs(self, swap_id: str, outcomes: Sequence[HookOutcome]) -> None:
        """Record what the post-commit hooks of ``swap_id`` did (each run, failed or not)."""
        if not outcomes:
            return
        now = utcnow()
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text(
                "INSERT INTO tableswap_hook_runs (swap_id, hook, ok, seconds, error, ran_at) "
                "VALUES (:s, :h, :ok, :sec, :e, :t)"
            ), [{"s": swap_id, "h": o.hook[:256], "ok": int(o.ok), "sec": float(o.seconds),
                 "e": stored_error(o.error, self.url), "t": o.ran_at or now} for o in outcomes])

    def hook_runs(self, swap_ids: Sequence[str]) -> dict[str, list[HookOutcome]]:
        """The recorded hook runs of these swaps, oldest first, by swap id."""
        out: dict[str, list[HookOutcome]] = {}
        if not swap_ids:
            return out
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT swap_id, hook, ok, seconds, error, ran_at FROM tableswap_hook_runs "
                "WHERE swap_id IN :ids ORDER BY ran_at, hook"
            ).bindparams(sa.bindparam("ids", expanding=True)), {"ids": list(swap_ids)})
            for r in rows:
                out.setdefault(r.swap_id, []).append(HookOutcome(r.hook, bool(r.ok), r.seconds,
                                                                  stored_error(r.error, self.url), r.ran_at))
        return out

    # ------------------------------------------------------------------ deletion queue
    def deletions(self, *, states: Sequence[str] = (DeletionState.PENDING,), db: str | None = None,
                  table: str | None = None) -> list[Deletion]:
        where, params = _filters(db, table, states)
        where = where or ["1 = 1"]
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT swap_id, location, db_name, table_name, partition_name, table_root, reason, state, "
                "queued_at, deleted_at, attempts, last_error, bytes, delete_begun_at FROM tableswap_deletions WHERE "
                + " AND ".join(where) + " ORDER BY queued_at, swap_id, location"
            ), params).mappings()
            return [Deletion(**dict(r)) for r in rows]

    def set_deletion_state(self, swap_id: str, location: str, state: str, error: str | None = None) -> None:
        deleted_at = ", deleted_at = :t" if state == DeletionState.DELETED else ""
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text(
                f"UPDATE tableswap_deletions SET state = :st, last_error = :e, attempts = attempts + 1{deleted_at} "
                "WHERE swap_id = :s AND location = :l"
            ), {"st": state, "e": stored_error(error, self.url), "t": utcnow(), "s": swap_id, "l": location})

    # ------------------------------------------------------------------ admin: rollback and recover
    # (owned by the admin CLI; schema in sql/003_admin.sql)
    def record_undone(self, rollback_id: str, undone: Iterable[tuple[str, str]]) -> None:
        """Record which ``(swap id, partition name)`` changes the rollback ``rollback_id`` undoes.

        Effective only once that rollback is committed."""
        rows = [{"r": rollback_id, "s": s, "p": p} for s, p in sorted(set(undone))]
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text("DELETE FROM tableswap_undone WHERE rollback_id = :r"), {"r": rollback_id})
            if rows:
                conn.execute(sa.text(
                    "INSERT INTO tableswap_undone (rollback_id, swap_id, partition_name) VALUES (:r, :s, :p)"
                ), rows)

    def undone(self, db: str, table: str) -> list[tuple[str, str, str]]:
        """``(rollback id, swap id, partition name)`` for every committed rollback of ``db.table``."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT u.rollback_id, u.swap_id, u.partition_name FROM tableswap_undone u "
                "JOIN tableswap_swaps r ON r.swap_id = u.rollback_id "
                "WHERE r.db_name = :d AND r.table_name = :t AND r.state = :st"
            ), {"d": db, "t": table, "st": COMMITTED})
            return [(r.rollback_id, r.swap_id, r.partition_name) for r in rows]

    def mark_restored(self, rollback_id: str, db: str, table: str,
                      locations: Iterable[str]) -> list[tuple[str, str]]:
        """A rollback makes ``locations`` live again: set their ``pending`` deletion rows of
        ``db.table`` to ``restored`` (the janitor skips them). Returns the rows changed."""
        from tableswap.core.locations import key as normalize

        wanted = {normalize(x) for x in locations if x}
        if not wanted:
            return []
        now = utcnow()
        changed: list[tuple[str, str]] = []
        with write_transaction(self.engine) as conn:
            rows = conn.execute(sa.text(
                "SELECT swap_id, location FROM tableswap_deletions "
                "WHERE db_name = :d AND table_name = :t AND state = 'pending'"
            ), {"d": db, "t": table}).all()
            for row in rows:
                if normalize(row.location) not in wanted:
                    continue
                conn.execute(sa.text(
                    "UPDATE tableswap_deletions SET state = 'restored' "
                    "WHERE swap_id = :s AND location = :l AND state = 'pending'"
                ), {"s": row.swap_id, "l": row.location})
                conn.execute(sa.text(
                    "INSERT INTO tableswap_restores (rollback_id, swap_id, location, restored_at) "
                    "VALUES (:r, :s, :l, :t)"
                ), {"r": rollback_id, "s": row.swap_id, "l": row.location, "t": now})
                changed.append((row.swap_id, row.location))
        return changed

    def unmark_restored(self, rollback_id: str) -> int:
        """Undo :meth:`mark_restored` for a rollback that did not happen: its rows go back to
        ``pending``. Returns how many rows were put back."""
        with write_transaction(self.engine) as conn:
            rows = conn.execute(sa.text(
                "SELECT swap_id, location FROM tableswap_restores WHERE rollback_id = :r"
            ), {"r": rollback_id}).all()
            for row in rows:
                conn.execute(sa.text(
                    "UPDATE tableswap_deletions SET state = 'pending' "
                    "WHERE swap_id = :s AND location = :l AND state = 'restored'"
                ), {"s": row.swap_id, "l": row.location})
            conn.execute(sa.text("DELETE FROM tableswap_restores WHERE rollback_id = :r"), {"r": rollback_id})
            return len(rows)

    def janitor_claims_on(self, locations: Iterable[str]) -> list[str]:
        """Those of ``locations`` a janitor holds an unexpired claim on (it may be deleting them)."""
        from tableswap.core.locations import key as normalize

        wanted = {normalize(x) for x in locations if x}
        if not wanted:
            return []
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(sa.text(
                    "SELECT location FROM tableswap_janitor_claims WHERE expires_at > :now"
                ), {"now": utcnow()}).all()
        except sa.exc.DBAPIError as exc:  # "no claims" would be a guess: a rollback must not go on
            raise errors.JournalError(
                f"cannot read the janitor's claims from the journal at {safe_url(self.url)}: {exc.orig or exc}"
            ) from exc
        return sorted({r.location for r in rows if normalize(r.location) in wanted})

    def unfinished_cleanups(self) -> list[tuple[str, str, str, str]]:
        """``(swap id, db, table, temp table)`` of committed swaps whose cleanup never finished."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT swap_id, db_name, table_name, temp_table FROM tableswap_swaps "
                "WHERE state = :st AND finished_at IS NULL AND temp_table IS NOT NULL ORDER BY started_at"
            ), {"st": COMMITTED})
            return [(r.swap_id, r.db_name, r.table_name, r.temp_table) for r in rows]

    def deletions_of(self, db: str, table: str) -> list[Deletion]:
        """Every deletion-queue row of ``db.table``, whatever its state."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT swap_id, location, db_name, table_name, partition_name, table_root, reason, state, "
                "queued_at, deleted_at, attempts, last_error, bytes, delete_begun_at FROM tableswap_deletions "
                "WHERE db_name = :d AND table_name = :t ORDER BY queued_at, swap_id, location"
            ), {"d": db, "t": table}).mappings()
            return [Deletion(**dict(r)) for r in rows]


def location_key(location: str) -> str:
    """The key of ``location`` in ``tableswap_location_sizes``: sha256 (hex) of its comparison key, one for
    every spelling of the location (:func:`tableswap.core.locations.key`), short enough for any index."""
    from tableswap.core.locations import key

    return hashlib.sha256(key(location).encode("utf-8")).hexdigest()


def _filters(db: str | None, table: str | None, states: Sequence[str] | None) -> tuple[list[str], dict[str, object]]:
    """WHERE clauses and parameters selecting rows by database, table and states."""
    where: list[str] = []
    params: dict[str, object] = {}
    if db is not None:
        where.append("db_name = :d")
        params["d"] = db
    if table is not None:
        where.append("table_name = :t")
        params["t"] = table
    if states:
        where.append("state IN (" + ", ".join(f":st{i}" for i in range(len(states))) + ")")
        params.update({f"st{i}": s for i, s in enumerate(states)})
    return where, params


_SWAP_COLUMNS = (
    "swap_id", "db_name", "table_name", "kind", "state", "table_root", "staging_location", "temp_table",
    "rollback_of", "started_at", "intent_at", "committed_at", "finished_at", "user_name", "host_name",
    "app_id", "error", "staged_at", "staged_drops", "staged_scope", "table_columns", "heartbeat_at",
)


if TYPE_CHECKING:  # the old name, for one release (tableswap.core.deprecated)
    SwapItem = PartitionChange
else:
    def __getattr__(name: str) -> Any:
        return renamed(__name__, globals(), name, {"SwapItem": "PartitionChange"})
