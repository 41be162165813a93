"""An EXCLUSIVE Hive Metastore table lock with a heartbeat thread.

The lock is taken through the metastore's lock API (``lock`` / ``check_lock`` / ``heartbeat`` /
``unlock``), so it is visible to ``SHOW LOCKS`` and expires on the server if its holder dies
(``hive.txn.timeout``). Its ``agentInfo`` names tableswap, the swap id, host and pid, so a stuck
holder can be found. The heartbeat runs on its own connection: a Thrift client is not thread-safe.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from typing import Callable

from tableswap.logs import get_logger
from hmsclient.genthrift.hive_metastore import ttypes as tt

from tableswap import errors
from tableswap.metastore import compat
from tableswap.metastore.client import MetastoreClient

log = get_logger("tableswap.lock")


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
        self.timeout_s = timeout_s
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        self._factory = client_factory or client.sibling
        self.lock_id: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: BaseException | None = None
        self.heartbeats = 0
        self._confirmed_at = 0.0  # monotonic time the server last confirmed the lock

    # ------------------------------------------------------------------ acquire / release
    def acquire(self) -> "TableLock":
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
        deadline = time.monotonic() + self.timeout_s
        delay = self.poll_s
        while state == tt.LockState.WAITING:
            if time.monotonic() >= deadline:
                holders = [h for h in self.client.lock_holders(self.db, self.table)
                           if h.lock_id != self.lock_id and h.state == "ACQUIRED"]
                self._unlock_quietly()
                who = "; ".join(h.describe() for h in holders) or "unknown holder"
                raise errors.LockTimeoutError(
                    f"could not lock {self.db}.{self.table} within {self.timeout_s:.0f}s: held by {who}. "
                    "Wait for that swap to finish, or if its process is dead, for the lock to expire "
                    f"({compat.lock_expiry_hint(self._server_info())}), then retry."
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 5.0)
            lock_id = self.lock_id
            state = self.client.read(
                f"check_lock({lock_id})", lambda c: c.check_lock(tt.CheckLockRequest(lockid=lock_id))
            ).state
        if state != tt.LockState.ACQUIRED:
            self._unlock_quietly()
            raise errors.MetastoreError(
                f"lock on {self.db}.{self.table} was not granted (state "
                f"{tt.LockState._VALUES_TO_NAMES.get(state, state)})"
            )
        self._confirmed_at = time.monotonic()
        log.info("lock.acquired", table=f"{self.db}.{self.table}", lock_id=self.lock_id, swap_id=self.swap_id)
        self._thread = threading.Thread(target=self._heartbeat_loop, name=f"tableswap-heartbeat-{self.lock_id}",
                                        daemon=True)
        self._thread.start()
        return self

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
        if self.lost is not None:
            raise errors.LockTimeoutError(
                f"the lock on {self.db}.{self.table} was lost ({self.lost}), e.g. it expired while the metastore "
                "was unreachable; nothing more is changed. Rerun the swap"
            )

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
