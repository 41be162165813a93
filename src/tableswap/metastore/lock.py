"""An EXCLUSIVE Hive Metastore table lock with a heartbeat thread.

The lock is taken through the metastore's lock API (``lock`` / ``check_lock`` / ``heartbeat`` /
``unlock``), so it is visible to ``SHOW LOCKS`` and expires on the server if its holder dies
(``hive.txn.timeout``). Its ``agentInfo`` names tableswap, the swap id, host and pid, so a stuck
holder can be found. The heartbeat runs on its own connection: a Thrift client is not thread-safe.

The heartbeat interval is checked against the server's lock timeout when the lock is taken
(:func:`safe_heartbeat`): the server must see at least three heartbeats per timeout, so a longer
interval is clamped (with a warning), and a server timeout too short for any workable interval is
refused. Where the server does not reveal its timeout, the interval is used as configured.
Right before its flip, the commit protocol confirms the lock with a server round trip
(:meth:`TableLock.confirm`), whatever the age of the last heartbeat.
"""

from __future__ import annotations

import getpass
import math
import os
import socket
import threading
import time
from typing import Callable

from tableswap.logs import get_logger
from hmsclient.genthrift.hive_metastore import ttypes as tt

from tableswap import errors
from tableswap.core.catalog_port import LOCK_WAIT_NOTICE_EVERY_S, LOCK_WAIT_NOTICE_S
from tableswap.metastore import compat
from tableswap.metastore.client import MetastoreClient

log = get_logger("tableswap.lock")


#: The server must see at least this many heartbeats per lock timeout.
HEARTBEATS_PER_TIMEOUT = 3
#: Heartbeats are never sent more often than this (seconds): a server whose lock timeout would need
#: more is refused (a metastore call can take longer than that under load).
MIN_HEARTBEAT_S = 1.0


def check_seconds(name: str, value: object) -> float:
    """``value`` as a finite number of seconds > 0, else :class:`ConfigurationError` naming ``name``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok:
        raise errors.ConfigurationError(f"{name}={value!r} is invalid: it must be a finite number of seconds > 0")
    return float(value)  # type: ignore[arg-type]  # a number: checked above (isinstance)


def safe_heartbeat(heartbeat_s: float, server_timeout_s: float | None) -> float:
    """The heartbeat interval to use against a server that expires unheartbeated locks after
    ``server_timeout_s`` (None: it does not say; ``heartbeat_s`` is used as it is): at most a third
    of it. Raises :class:`ConfigurationError` when even that would be below :data:`MIN_HEARTBEAT_S`."""
    if server_timeout_s is None:
        return heartbeat_s
    limit = server_timeout_s / HEARTBEATS_PER_TIMEOUT
    if heartbeat_s <= limit:
        return heartbeat_s
    if limit < MIN_HEARTBEAT_S:
        raise errors.ConfigurationError(
            f"the metastore expires a lock after {server_timeout_s:g}s without a heartbeat (hive.txn.timeout; "
            "metastore.txn.timeout on Hive 3+): too short for tableswap to keep its lock, which needs "
            f"{HEARTBEATS_PER_TIMEOUT} heartbeats per timeout at most every {MIN_HEARTBEAT_S:g}s. Raise that "
            f"server setting to at least {HEARTBEATS_PER_TIMEOUT * MIN_HEARTBEAT_S:g}s (60s or more is usual; "
            "`tableswap metastore start --lock-timeout SECONDS` for the development metastore). "
            f"heartbeat_s (now {heartbeat_s:g}) is then lowered to a third of it when needed"
        )
    return limit


#: While waiting for a lock another holds: a warning naming the holder (the port's lock contract).
WAIT_NOTICE_S = LOCK_WAIT_NOTICE_S
WAIT_NOTICE_EVERY_S = LOCK_WAIT_NOTICE_EVERY_S

#: The lock timeout each metastore (by URI) revealed, read on the first lock taken there.
_SERVER_TIMEOUTS: dict[str, float | None] = {}


def agent_info(swap_id: str) -> str:
    return f"tableswap swap={swap_id} host={socket.gethostname()} pid={os.getpid()}"


class TableLock:
    """Context manager: ``with TableLock(client, db, table, swap_id=...) as lock: ...``."""

    def __init__(
        self,
        client: MetastoreClient,
        db: str,
        table: str,
        *,
        swap_id: str,
        timeout_s: float = 300.0,
        heartbeat_s: float = 20.0,
        poll_s: float = 0.5,
        client_factory: Callable[[], MetastoreClient] | None = None,
    ) -> None:
        self.client = client
        self.db, self.table = db, table
        self.swap_id = swap_id
        self.timeout_s = check_seconds("timeout_s", timeout_s)
        #: As configured; :attr:`heartbeat_s` is what is used (lowered to fit the server's lock timeout).
        self.configured_heartbeat_s = self.heartbeat_s = check_seconds("heartbeat_s", heartbeat_s)
        self.poll_s = check_seconds("poll_s", poll_s)
        self.server_timeout_s: float | None = None  # the server's lock timeout, when it reveals it
        self._factory = client_factory or client.sibling
        self.lock_id: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: BaseException | None = None
        self.heartbeats = 0
        self._confirmed_at = 0.0  # monotonic time the server last confirmed the lock

    # ------------------------------------------------------------------ acquire / release
    def acquire(self) -> "TableLock":
        # The server's lock timeout first, so that a heartbeat interval the server would not honour is
        # fixed (or refused) before the lock is taken.
        self._fit_heartbeat(self.client)
        return self._acquire()

    def _fit_heartbeat(self, client: MetastoreClient) -> None:
        # Read once per metastore and process (two calls on the lock's own connection), not per lock.
        if client.uri not in _SERVER_TIMEOUTS:
            _SERVER_TIMEOUTS[client.uri] = compat.server_lock_timeout(client)
        self.server_timeout_s = _SERVER_TIMEOUTS[client.uri]
        self.heartbeat_s = safe_heartbeat(self.configured_heartbeat_s, self.server_timeout_s)
        if self.heartbeat_s < self.configured_heartbeat_s:
            log.warning("lock.heartbeat_lowered", table=f"{self.db}.{self.table}", swap_id=self.swap_id,
                        heartbeat_s=round(self.heartbeat_s, 3), configured_heartbeat_s=self.configured_heartbeat_s,
                        server_lock_timeout_s=self.server_timeout_s,
                        hint="set heartbeat_s to at most a third of the metastore's hive.txn.timeout "
                             "(metastore.txn.timeout)")

    def _acquire(self) -> "TableLock":
        request = tt.LockRequest(
            component=[
                tt.LockComponent(
                    type=tt.LockType.EXCLUSIVE,
                    level=tt.LockLevel.TABLE,
                    dbname=self.db,
                    tablename=self.table,
                    operationType=tt.DataOperationType.NO_TXN,
                )
            ],
            user=getpass.getuser(),
            hostname=socket.gethostname(),
            agentInfo=agent_info(self.swap_id),
        )
        # lock() is not idempotent: a lost response may leave a lock we do not know the id of;
        # it then expires on the server (hive.txn.timeout) as nobody heartbeats it.
        resp = self.client.write(f"lock({self.db}.{self.table})", lambda c: c.lock(request))
        self.lock_id = resp.lockid
        state = resp.state
        started = time.monotonic()
        deadline = started + self.timeout_s
        notice = started + WAIT_NOTICE_S
        delay = self.poll_s
        while state == tt.LockState.WAITING:
            if time.monotonic() >= notice:
                self._log_waiting(time.monotonic() - started)
                notice = time.monotonic() + WAIT_NOTICE_EVERY_S
            if time.monotonic() >= deadline:
                holders = [h for h in self.client.lock_holders(self.db, self.table)
                           if h.lock_id != self.lock_id and h.state == "ACQUIRED"]
                self._unlock_quietly()
                who = "; ".join(h.describe() for h in holders) or "unknown holder"
                raise errors.LockTimeoutError(
                    f"could not lock {self.db}.{self.table} within {self.timeout_s:.0f}s: held by {who}. "
                    "Wait for that swap to finish, or if its process is dead, for the lock to expire "
                    f"({compat.lock_expiry_hint(self._server_info())}), then retry.",
                    table=f"{self.db}.{self.table}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 5.0)
            lock_id = self.lock_id
            state = self.client.read(
                f"check_lock({lock_id})",
                lambda c: c.check_lock(tt.CheckLockRequest(lockid=lock_id)),  # noqa: B023 - called here, at once
            ).state
        if state != tt.LockState.ACQUIRED:
            self._unlock_quietly()
            raise errors.CatalogError(
                f"lock on {self.db}.{self.table} was not granted (state "
                f"{tt.LockState._VALUES_TO_NAMES.get(state, state)})"
            )
        self._confirmed_at = time.monotonic()
        log.info("lock.acquired", table=f"{self.db}.{self.table}", lock_id=self.lock_id, swap_id=self.swap_id)
        self._thread = threading.Thread(target=self._heartbeat_loop, name=f"tableswap-heartbeat-{self.lock_id}",
                                        daemon=True)
        self._thread.start()
        return self

    def _log_waiting(self, waited_s: float) -> None:
        try:
            holders = [h.describe() for h in self.client.lock_holders(self.db, self.table)
                       if h.lock_id != self.lock_id and h.state == "ACQUIRED"]
        except errors.TableSwapError:
            holders = []
        log.warning("lock.waiting", table=f"{self.db}.{self.table}", swap_id=self.swap_id,
                    waited_s=round(waited_s), timeout_s=self.timeout_s, held_by="; ".join(holders) or "unknown holder",
                    hint="the holder's swap is running, or its process died and the server expires its lock "
                         f"({compat.lock_expiry_hint(self._server_info())})")

    def _server_info(self) -> "compat.ServerInfo | None":
        try:
            return compat.server_info(self.client)
        except errors.TableSwapError:
            return None

    def ensure_held(self) -> None:
        """Raise if the lock is gone (expired or revoked). Called before every metastore write.

        When the heartbeat is overdue (its calls failed, e.g. while the metastore restarted, and
        the server may have expired the lock meanwhile), the lock is confirmed with a heartbeat
        of our own first: a write is never sent under a lock that is not known to be held."""
        if self.lost is None and time.monotonic() - self._confirmed_at > self.heartbeat_s:
            self._heartbeat(self.client)
        self._raise_if_lost("nothing more is changed")

    def confirm(self) -> None:
        """Confirm the lock with the server now (a heartbeat round trip on this connection, whatever
        the age of the last one); raise :class:`LockLostError` if the server no longer holds it. The
        commit protocol calls it right before the flip, whose first write follows at once."""
        if self.lost is None:
            self._heartbeat(self.client)
        self._raise_if_lost("nothing was changed")

    def _raise_if_lost(self, changed: str) -> None:
        if self.lost is not None:
            raise errors.LockLostError(
                f"the lock on {self.db}.{self.table} was lost ({self.lost}): the metastore no longer holds it "
                "(it expired after hive.txn.timeout / metastore.txn.timeout without a heartbeat, e.g. while "
                f"this process was paused or the metastore unreachable, or another client removed it); {changed}. "
                "Rerun it", table=f"{self.db}.{self.table}", swap_id=self.swap_id)

    def _heartbeat(self, client: MetastoreClient) -> None:
        lock_id = self.lock_id
        try:
            client.read(f"heartbeat({lock_id})", lambda c: c.heartbeat(tt.HeartbeatRequest(lockid=lock_id)))
        except errors.NotFoundError as exc:
            self.lost = exc
            log.error("lock.lost", lock_id=lock_id, error=str(exc))
            return
        self._confirmed_at = time.monotonic()
        self.heartbeats += 1

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_s + 5)
        self._unlock_quietly()

    def _unlock_quietly(self) -> None:
        if self.lock_id is None:
            return
        lock_id, self.lock_id = self.lock_id, None
        try:
            self.client.read(f"unlock({lock_id})", lambda c: c.unlock(tt.UnlockRequest(lockid=lock_id)))
            log.info("lock.released", table=f"{self.db}.{self.table}", lock_id=lock_id, swap_id=self.swap_id)
        except errors.NotFoundError:
            pass  # already expired or released
        except errors.TableSwapError as exc:
            log.warning("lock.release_failed", lock_id=lock_id, error=str(exc),
                        hint="the lock expires on the server after hive.txn.timeout")

    def __enter__(self) -> "TableLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ------------------------------------------------------------------ heartbeat
    def _heartbeat_loop(self) -> None:
        lock_id = self.lock_id
        client = self._factory()
        try:
            while not self._stop.wait(self.heartbeat_s) and self.lost is None:
                try:
                    self._heartbeat(client)
                except errors.TableSwapError as exc:
                    log.warning("lock.heartbeat_failed", lock_id=lock_id, error=str(exc))
        finally:
            client.close()
