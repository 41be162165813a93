"""The janitor's side of the journal: light reads, claims (leases) and results.

Kept apart from :mod:`tableswap.journal.store` (swap history and queueing) so that each module has one
job; it works on the same database through ``Journal.engine``. Schema: ``sql/002_janitor.sql``.

Claiming: before it re-checks and deletes a location, a janitor inserts a row keyed by the queue
row's ``(swap_id, location)`` into ``tableswap_janitor_claims``. The primary key makes the claim
atomic on SQLite and PostgreSQL alike: of two janitors exactly one succeeds (the other's INSERT
fails, or waits on PostgreSQL for the first transaction and then fails). Taking over an expired or
dead claim deletes exactly the old token's row and checks that one row went: of two janitors taking
over the same claim, the second finds it gone and gives up. A claim is a lease
(``expires_at``); a claim whose holder process is known to be dead (same host, pid gone) is taken
over at once, so a janitor killed mid-run and restarted continues where it stopped.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import sqlalchemy as sa

from tableswap import errors
from tableswap.core.records import DeletionState
from tableswap.journal.store import (ABORTED, PENDING, STAGED, STAGING, Journal, location_key, safe_url,
                                     stored_error, utcnow)
from tableswap.journal.db import write_transaction

DELETED, PENDING_DELETION = DeletionState.DELETED, DeletionState.PENDING


@dataclass(frozen=True)
class SwapProgress:
    """Where one swap of a table stands, as the janitor reads it (its state is a
    :class:`~tableswap.core.records.SwapState` value)."""

    swap_id: str
    state: str
    started_at: str
    staging_location: str | None = None
    temp_table: str | None = None
    staged_at: str | None = None  # a staged swap's (journal version 8)
    heartbeat_at: str | None = None  # the swap's process's last beat (journal version 10)


class _NotPending(Exception):
    """Internal: roll back a claim whose queue row is no longer pending."""


def this_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def holder_is_dead(holder: str) -> bool:
    """True only when ``holder`` (``host:pid``) is a process on this host that no longer exists."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, owned by someone else
        return False
    return False


class JanitorQueue:
    """Claims, results and run records of janitor runs, on a :class:`Journal`'s database."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.engine = journal.engine

    # ------------------------------------------------------------------ reads
    def swapped_tables(self) -> list[tuple[str, str]]:
        """Every ``(db, table)`` the journal has a swap for."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT DISTINCT db_name, table_name FROM tableswap_swaps ORDER BY db_name, table_name"
            ))
            return [(r[0], r[1]) for r in rows]

    def swap_states(self, db: str, table: str) -> dict[str, SwapProgress]:
        """State and start time of each swap of a table (no items: cheap)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT swap_id, state, started_at, staging_location, temp_table, staged_at, heartbeat_at "
                "FROM tableswap_swaps "
                "WHERE db_name = :d AND table_name = :t"
            ), {"d": db, "t": table}).mappings()
            return {r["swap_id"]: SwapProgress(**dict(r)) for r in rows}

    def group_commits(self) -> dict[str, tuple[str, str | None]]:
        """For each swap with a displaced location waiting in the queue that is a member of a swap group past its
        intent: ``{swap id: (group id, the group's committed_at, None while it is pending)}``. The grace of what
        a group displaced runs from the group's commit, the same for every member (docs/groups.md)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT DISTINCT d.swap_id, g.group_id, g.committed_at FROM tableswap_deletions d "
                "JOIN tableswap_group_members m ON m.swap_id = d.swap_id "
                "JOIN tableswap_groups g ON g.group_id = m.group_id "
                "WHERE d.state = :p AND d.reason = :r AND g.state IN (:pending, :committed)"
            ), {"p": "pending", "r": "displaced", "pending": "pending", "committed": "committed"})
            return {r.swap_id: (r.group_id, r.committed_at) for r in rows}

    def staged_groups(self, db: str, table: str) -> dict[str, tuple[str, str | None]]:
        """For each swap of ``db.table`` that is a member of a swap group still publishable as one unit (``open``
        or ``failed`` before any flip, every member ``staged`` or still being staged by its writer):
        ``{swap id: (group id, when its last member was staged; None while a member is still staging)}``. The
        janitor's ``staged_ttl`` runs from that time for every member, and discards the group as one unit."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT m.group_id, m.swap_id, s.state, s.staged_at FROM tableswap_group_members m "
                "JOIN tableswap_groups g ON g.group_id = m.group_id "
                "LEFT JOIN tableswap_swaps s ON s.swap_id = m.swap_id "
                "WHERE g.kind = :swap AND g.state IN (:open, :failed) AND m.group_id IN ("
                "SELECT group_id FROM tableswap_group_members WHERE db_name = :d AND table_name = :t)"
            ), {"swap": "swap", "open": "open", "failed": "failed", "d": db, "t": table}).all()
        members: dict[str, list[sa.Row]] = {}
        for r in rows:
            members.setdefault(r.group_id, []).append(r)
        out: dict[str, tuple[str, str | None]] = {}
        for group_id, of_group in members.items():
            states = {r.state for r in of_group}
            if not states <= {STAGED, STAGING} or STAGED not in states:
                continue  # no longer publishable as one unit: each member is a swap of its own
            last = None if STAGING in states else max(r.staged_at or "" for r in of_group) or None
            out.update({r.swap_id: (group_id, last) for r in of_group})
        return out

    def unfinished_locations(self, db: str, table: str) -> list[tuple[str, str]]:
        """``(swap id, location)`` for the old and new location of every item of the table's
        unfinished swaps: ``recover`` may point the table at any of them."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT s.swap_id, i.old_location, i.new_location FROM tableswap_swaps s "
                "JOIN tableswap_swap_items i ON i.swap_id = s.swap_id "
                "WHERE s.db_name = :d AND s.table_name = :t AND s.state IN (:a, :b)"
            ), {"d": db, "t": table, "a": STAGING, "b": PENDING})
            return [(r[0], location) for r in rows for location in (r[1], r[2]) if location]

    def is_pending(self, swap_id: str, location: str) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(sa.text(
                "SELECT state FROM tableswap_deletions WHERE swap_id = :s AND location = :l"
            ), {"s": swap_id, "l": location}).scalar() == PENDING_DELETION

    def claim_blocker(self, swap_id: str, location: str) -> str:
        """Why :meth:`claim` of ``(swap_id, location)`` just failed, for the report (read after the fact:
        what holds now, not necessarily what held then)."""
        key = {"s": swap_id, "l": location}
        with self.engine.connect() as conn:
            claim = conn.execute(sa.text(
                "SELECT holder, expires_at FROM tableswap_janitor_claims WHERE swap_id = :s AND location = :l"
            ), key).first()
            row = conn.execute(sa.text(
                "SELECT state, deleted_at FROM tableswap_deletions WHERE swap_id = :s AND location = :l"
            ), key).first()
        if claim is not None:
            return f"claimed by another janitor ({claim.holder}) until {claim.expires_at}"
        if row is not None and row.state == DELETED:
            return f"already deleted by another janitor run (at {row.deleted_at})"
        if row is not None and row.state != PENDING_DELETION:
            return f"no longer pending deletion (its queue state is {row.state})"
        return "claimed or finished by another janitor meanwhile"

    # ------------------------------------------------------------------ writes
    def mark_delete_begun(self, keys: Iterable[tuple[str, str]]) -> None:
        """Record, before the first delete, that the janitor begins deleting these queue rows' locations
        (``delete_begun_at``, set once, never cleared): from now on they may be partly gone, and nothing
        restores them (:class:`tableswap.ops.locations.LocationChecker`). Raises if the journal cannot
        record it: then nothing may be deleted."""
        rows = [{"s": swap_id, "l": location, "t": utcnow()} for swap_id, location in keys]
        if not rows:
            return
        try:
            with write_transaction(self.engine) as conn:
                conn.execute(sa.text(
                    "UPDATE tableswap_deletions SET delete_begun_at = :t "
                    "WHERE swap_id = :s AND location = :l AND delete_begun_at IS NULL"
                ), rows)
        except sa.exc.DBAPIError as exc:
            raise errors.JournalError(
                f"cannot record in the journal at {safe_url(self.journal.url)} that the janitor begins deleting "
                f"{len(rows)} location(s): {exc.orig or exc}; nothing was deleted") from exc

    def requeue_reappeared(self, swap_id: str, location: str) -> bool:
        """An orphan directory deleted earlier is on storage again (a Spark executor of its swap, still
        writing, wrote into it after the deletion): its ``deleted`` queue row goes back to ``pending`` so that
        it can be claimed and deleted again. Only an orphan's row (never a displaced location's: that one was
        live once and stays unrestorable). True if the row was queued again."""
        with write_transaction(self.engine) as conn:
            updated = conn.execute(sa.text(
                "UPDATE tableswap_deletions SET state = :p, queued_at = :t, deleted_at = NULL, "
                "last_error = 'reappeared on storage after its deletion at ' || COALESCE(deleted_at, '?') "
                "|| ': queued again' "
                "WHERE swap_id = :s AND location = :l AND state = :d AND reason = 'orphan'"
            ), {"p": PENDING_DELETION, "t": utcnow(), "s": swap_id, "l": location, "d": DELETED})
            return updated.rowcount == 1

    def abandon_swap(self, swap_id: str, error: str, state: str = STAGING, *,
                     heartbeat_at: str | None = None) -> bool:
        """``staging`` (or ``state``: ``staged``, a staged swap past its ``staged_ttl``) → ``aborted``
        atomically, a ``staging`` one only if its heartbeat is still ``heartbeat_at`` (the beat the janitor
        judged idle, None: it never beat); False, nothing changed, if the swap left that state meanwhile (a staged swap
        published) or its process beat since (a live writer)."""
        # Only a swap in staging beats (a staged one waits for its publish without a process).
        beat = ("1 = 1" if state != STAGING else
                "heartbeat_at IS NULL" if heartbeat_at is None else "heartbeat_at = :hb")
        with write_transaction(self.engine) as conn:
            result = conn.execute(sa.text(
                "UPDATE tableswap_swaps SET state = :ab, finished_at = :t, error = :e "
                f"WHERE swap_id = :s AND state = :st AND {beat}"
            ), {"ab": ABORTED, "t": utcnow(), "e": stored_error(error), "s": swap_id, "st": state,
                "hb": heartbeat_at})
            return result.rowcount == 1

    def claim(self, swap_id: str, location: str, *, token: str, lease_s: float, queued: bool,
              holder: str | None = None, is_dead: Callable[[str], bool] = holder_is_dead) -> bool:
        """Claim one location. True if this caller (``token``) now holds it.

        An existing claim by another token blocks unless it expired or ``is_dead(holder)``. With
        ``queued``, the queue row must still be ``pending`` (else someone finished it already).
        """
        now = utcnow()
        key = {"s": swap_id, "l": location}
        expires = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=lease_s)).isoformat(
            timespec="microseconds")
        try:
            with write_transaction(self.engine) as conn:
                old = conn.execute(sa.text(
                    "SELECT token, holder, expires_at FROM tableswap_janitor_claims "
                    "WHERE swap_id = :s AND location = :l"
                ), key).first()
                if old is not None:
                    if old.token != token and old.expires_at > now and not is_dead(old.holder):
                        return False
                    taken_over = conn.execute(sa.text(
                        "DELETE FROM tableswap_janitor_claims "
                        "WHERE swap_id = :s AND location = :l AND token = :o"
                    ), {**key, "o": old.token})
                    if taken_over.rowcount != 1:  # another janitor took it over first
                        return False
                conn.execute(sa.text(
                    "INSERT INTO tableswap_janitor_claims (swap_id, location, token, holder, claimed_at, "
                    "expires_at) VALUES (:s, :l, :tok, :h, :now, :exp)"
                ), {**key, "tok": token, "h": (holder or this_holder())[:300], "now": now, "exp": expires})
                if queued:
                    state = conn.execute(sa.text(
                        "SELECT state FROM tableswap_deletions WHERE swap_id = :s AND location = :l"
                    ), key).scalar()
                    if state != PENDING_DELETION:
                        raise _NotPending()
            return True
        except (_NotPending, sa.exc.IntegrityError):
            return False

    def release(self, keys: Iterable[tuple[str, str]], token: str) -> None:
        with write_transaction(self.engine) as conn:
            for swap_id, location in keys:
                conn.execute(sa.text(
                    "DELETE FROM tableswap_janitor_claims WHERE swap_id = :s AND location = :l AND token = :tok"
                ), {"s": swap_id, "l": location, "tok": token})

    def record(self, results: Iterable[tuple[str, str, str, str | None]], token: str | None) -> None:
        """One transaction: for each ``(swap id, location, outcome, message)`` mark the pending queue
        row ``deleted`` (outcome ``deleted``; the location's recorded size goes with it) or note the
        message and leave it pending (any other outcome); then release this janitor's claim on it."""
        now = utcnow()
        with write_transaction(self.engine) as conn:
            for swap_id, location, outcome, message in results:
                key = {"s": swap_id, "l": location, "tok": token}
                if outcome == DELETED:
                    conn.execute(sa.text(
                        "UPDATE tableswap_deletions SET state = 'deleted', deleted_at = :t, last_error = :e, "
                        "attempts = attempts + 1 WHERE swap_id = :s AND location = :l AND state = 'pending'"
                    ), {**key, "t": now, "e": stored_error(message)})
                    conn.execute(sa.text("DELETE FROM tableswap_location_sizes WHERE location_key = :k"),
                                 {"k": location_key(location)})
                else:
                    conn.execute(sa.text(
                        "UPDATE tableswap_deletions SET last_error = :e, attempts = attempts + 1 "
                        "WHERE swap_id = :s AND location = :l AND state = 'pending'"
                    ), {**key, "e": stored_error(f"{outcome}: {message}")})
                if token is not None:
                    conn.execute(sa.text(
                        "DELETE FROM tableswap_janitor_claims "
                        "WHERE swap_id = :s AND location = :l AND token = :tok"
                    ), key)

    def record_run(self, run: Mapping[str, object]) -> None:
        columns = ("run_id", "started_at", "finished_at", "host_name", "table_filter", "grace_seconds",
                   "keep_count", "deleted", "bytes_freed", "refused", "errors")
        with write_transaction(self.engine) as conn:
            conn.execute(sa.text(
                f"INSERT INTO tableswap_janitor_runs ({', '.join(columns)}) "
                f"VALUES ({', '.join(':' + c for c in columns)})"
            ), {c: run.get(c) for c in columns})

    def runs(self, limit: int = 20, *, table: str | None = None, successful: bool = False) -> list[dict[str, object]]:
        """The latest (non-dry) runs, newest first; with ``table`` (``db.table``): the runs that covered it
        (those of every table, and those limited to it); ``successful``: only runs without errors (refusals
        do not fail a run)."""
        clauses, params = [], {}
        if table is not None:
            clauses.append("(table_filter IS NULL OR table_filter = :t)")
            params["t"] = table
        if successful:
            clauses.append("errors = 0")
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(sa.text(
                f"SELECT * FROM tableswap_janitor_runs {where}ORDER BY started_at DESC LIMIT {int(limit)}"
            ), params).mappings()]
