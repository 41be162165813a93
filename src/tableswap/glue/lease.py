"""A table lock for a catalog without one (the Glue Data Catalog): a lease of tableswap's own in a DynamoDB
table, with the :class:`~tableswap.core.catalog_port.CatalogLock` contract.

One item per table (key ``glue/REGION/DB.TABLE``), written with conditional writes only, as the lock managers
of Iceberg (``DynamoDbLockManager``) and Hudi (``DynamoDBBasedLockProvider``) do:

* **acquire**: put the item if there is none (or it is already ours); else wait. A holder renews its item
  every ``heartbeat_s`` by writing a new ``version``. A waiter that sees the same ``version`` for a whole
  lease (``lease_s``, 3 heartbeats, measured on the waiter's own monotonic clock: no clock of another host is
  trusted) takes the lease over, on the condition that the version is still the one it watched.
* **heartbeat**: a thread renews the lease on the condition that the item's holder is still this lock; a
  refused renewal means the lease was taken over: the lock is lost and :meth:`LeaseLock.ensure_held` raises
  :class:`~tableswap.errors.LockLostError` before any further write.
* **confirm**: a conditional renewal right now (the flip calls it before each chunk: a waiter then needs a
  whole lease more before it may take over).
* **release**: delete the item on the condition that it is still ours.

The lease table is created on first use (``PAY_PER_REQUEST``) unless it exists; its name is the setting
``glue.lock_table`` (``TABLESWAP_GLUE_LOCK_TABLE``).
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
import uuid
from typing import Any

from tableswap import errors
from tableswap.core.catalog import LockHolder
from tableswap.core.catalog_port import LOCK_WAIT_NOTICE_EVERY_S, LOCK_WAIT_NOTICE_S
from tableswap.glue import boto
from tableswap.logs import get_logger

log = get_logger("tableswap.lock")

KEY = "lock_key"
#: Heartbeats per lease: a lease lasts this many heartbeat intervals without a renewal.
HEARTBEATS_PER_LEASE = 3
#: While waiting for a lease another holds: a warning naming the holder (the port's lock contract).
WAIT_NOTICE_S = LOCK_WAIT_NOTICE_S
WAIT_NOTICE_EVERY_S = LOCK_WAIT_NOTICE_EVERY_S


def agent_info(owner: str) -> str:
    """The same form as the Hive Metastore lock's (``recover`` finds a live swap by ``swap=<id> ``)."""
    return f"tableswap swap={owner} host={socket.gethostname()} pid={os.getpid()}"


def lease_key(region: str, db: str, table: str) -> str:
    return f"glue/{region}/{db.lower()}.{table.lower()}"


class LeaseStore:
    """The DynamoDB table of the leases (created on first use)."""

    def __init__(self, client: Any, table: str, *, timeout_s: float = 60.0) -> None:
        self.client = client  # a boto3 DynamoDB client
        self.table = table
        self.timeout_s = timeout_s
        self._ready = False

    def _call(self, what: str, fn: Any) -> Any:
        """A DynamoDB call; every one here is conditional or a read, so retrying a transport error is safe
        (a renewal or a put that landed is recognised by its holder token)."""
        delay = 0.2
        for attempt in range(1, 5):
            try:
                return fn()
            except boto.boto_errors() + (ConnectionError,) as exc:
                code = boto.error_code(exc)
                if code == "ConditionalCheckFailedException":
                    raise
                if code == "ResourceNotFoundException" and not self._ready:
                    self.ensure_table()
                    continue
                retry = isinstance(exc, boto.transport_errors()) or code in boto.TRANSIENT_CODES
                if not retry or attempt == 4:
                    raise boto.translate(exc, what, where=f"the lease table {self.table!r} (DynamoDB)") from exc
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def ensure_table(self) -> None:
        try:
            self.client.describe_table(TableName=self.table)
        except boto.boto_errors() as exc:
            if boto.error_code(exc) != "ResourceNotFoundException":
                raise boto.translate(exc, f"DescribeTable({self.table})", where="DynamoDB") from exc
            log.info("lock.lease_table_created", table=self.table)
            try:
                self.client.create_table(TableName=self.table, BillingMode="PAY_PER_REQUEST",
                                         KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
                                         AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}])
            except boto.boto_errors() as exc2:
                if boto.error_code(exc2) != "ResourceInUseException":  # created meanwhile by another process
                    raise boto.translate(exc2, f"CreateTable({self.table})", where="DynamoDB") from exc2
            self.client.get_waiter("table_exists").wait(TableName=self.table,
                                                        WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        self._ready = True

    def get(self, key: str) -> dict[str, Any] | None:
        resp = self._call(f"GetItem({key})", lambda: self.client.get_item(
            TableName=self.table, Key={KEY: {"S": key}}, ConsistentRead=True))
        item = resp.get("Item")
        return {k: next(iter(v.values())) for k, v in item.items()} if item else None

    def put(self, item: dict[str, str | int], condition: str, values: dict[str, str]) -> bool:
        """Put ``item`` on ``condition``; False if the condition failed."""
        attrs = {k: ({"N": str(v)} if isinstance(v, int) else {"S": v}) for k, v in item.items()}
        kwargs: dict[str, Any] = {"TableName": self.table, "Item": attrs, "ConditionExpression": condition}
        if values:
            kwargs["ExpressionAttributeValues"] = {k: {"S": v} for k, v in values.items()}
        try:
            self._call(f"PutItem({item[KEY]})", lambda: self.client.put_item(**kwargs))
            return True
        except boto.boto_errors() as exc:
            if boto.error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise

    def renew(self, key: str, holder: str, version: str, now_ms: int) -> bool:
        try:
            self._call(f"UpdateItem({key})", lambda: self.client.update_item(
                TableName=self.table, Key={KEY: {"S": key}},
                UpdateExpression="SET version = :v, renewed_ms = :t",
                ConditionExpression="holder = :h",
                ExpressionAttributeValues={":v": {"S": version}, ":t": {"N": str(now_ms)}, ":h": {"S": holder}}))
            return True
        except boto.boto_errors() as exc:
            if boto.error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise

    def delete(self, key: str, holder: str) -> bool:
        try:
            self._call(f"DeleteItem({key})", lambda: self.client.delete_item(
                TableName=self.table, Key={KEY: {"S": key}}, ConditionExpression="holder = :h",
                ExpressionAttributeValues={":h": {"S": holder}}))
            return True
        except boto.boto_errors() as exc:
            if boto.error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise

    def items(self, prefix: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True,
                                  "FilterExpression": "begins_with(lock_key, :p)",
                                  "ExpressionAttributeValues": {":p": {"S": prefix}}}
        while True:
            try:
                resp = self._call("Scan", lambda: self.client.scan(**kwargs))
            except errors.TableNotFoundError:
                return out
            out.extend({k: next(iter(v.values())) for k, v in item.items()} for item in resp.get("Items") or [])
            if not resp.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


#: A lease unrenewed for this many lease durations by the wall clock is shown as expired (``lock_holders``,
#: ``doctor``): a margin for the clocks of two hosts. Taking a lease over never trusts a clock of another host.
EXPIRED_AFTER_LEASES = 2


def holder_of(item: dict[str, Any], now_ms: int) -> LockHolder:
    renewed = int(item.get("renewed_ms", 0))
    fresh = now_ms - renewed <= EXPIRED_AFTER_LEASES * int(item.get("lease_ms", 0))
    return LockHolder(lock_id=item.get("holder", "?"), state="ACQUIRED" if fresh else "EXPIRED",
                      user=item.get("user"), hostname=item.get("host"), agent_info=item.get("agent"),
                      acquired_at_ms=int(item.get("acquired_ms", 0)) or None, last_heartbeat_ms=renewed or None)


def _now_ms() -> int:
    return int(time.time() * 1000)


class LeaseLock:
    """Context manager: the table's lease (see the module's docstring)."""

    def __init__(self, store: LeaseStore, region: str, db: str, table: str, *, owner: str, timeout_s: float,
                 heartbeat_s: float, poll_s: float = 0.25, store_factory: Any = None) -> None:
        for name, value in (("timeout_s", timeout_s), ("heartbeat_s", heartbeat_s), ("poll_s", poll_s)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0 \
                    or value == float("inf"):
                raise errors.ConfigurationError(
                    f"{name}={value!r} is invalid: it must be a finite number of seconds > 0")
        self.store = store
        self.db, self.table = db, table
        self.key = lease_key(region, db, table)
        self.swap_id = owner
        self.timeout_s, self.heartbeat_s, self.poll_s = float(timeout_s), float(heartbeat_s), float(poll_s)
        self.lease_s = self.heartbeat_s * HEARTBEATS_PER_LEASE
        self._store_factory = store_factory
        self.lock_id: str | None = None
        self._token = uuid.uuid4().hex  # this lock's holder token
        self._version: str | None = None
        self._confirmed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()  # the heartbeat thread and the caller renew in turn
        self.lost: str | None = None
        self.heartbeats = 0
        self.taken_over: str | None = None  # the owner whose expired lease this lock took over

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}"

    def _item(self) -> dict[str, str | int]:
        now = _now_ms()
        self._version = uuid.uuid4().hex
        return {KEY: self.key, "holder": self._token, "owner": self.swap_id, "agent": agent_info(self.swap_id),
                "host": socket.gethostname(), "user": _user(), "pid": os.getpid(), "version": self._version,
                "acquired_ms": now, "renewed_ms": now, "lease_ms": int(self.lease_s * 1000)}

    # ------------------------------------------------------------------ acquire / release
    def acquire(self) -> "LeaseLock":
        if not self.store._ready:
            self.store.ensure_table()
        started = time.monotonic()
        deadline, notice = started + self.timeout_s, started + WAIT_NOTICE_S
        watched: tuple[str, float] | None = None  # (version, when first seen) of another holder's lease
        while True:
            if self.store.put(self._item(), "attribute_not_exists(lock_key) OR holder = :h", {":h": self._token}):
                break
            item = self.store.get(self.key)
            if item is None:
                continue  # released meanwhile
            if item.get("holder") == self._token:
                break  # our own put landed, its response was lost
            version, now = str(item.get("version")), time.monotonic()
            if watched is None or watched[0] != version:
                watched = (version, now)
            elif now - watched[1] >= int(item.get("lease_ms", 0)) / 1000:
                # Unrenewed for a whole lease on our clock: take it over if it is still that version.
                if self.store.put(self._item(), "version = :v", {":v": version}):
                    self.taken_over = str(item.get("owner"))
                    log.warning("lock.lease_taken_over", table=self.name, previous_owner=self.taken_over,
                                swap_id=self.swap_id, unrenewed_s=round(now - watched[1], 3))
                    break
                watched = None
                continue
            if now >= notice:
                log.warning("lock.waiting", table=self.name, swap_id=self.swap_id, waited_s=round(now - started),
                            timeout_s=self.timeout_s, held_by=holder_of(item, _now_ms()).describe(),
                            hint="the holder's swap is running, or its process died and its lease is taken over "
                                 f"once unrenewed for {int(item.get('lease_ms', 0)) / 1000:g}s")
                notice = now + WAIT_NOTICE_EVERY_S
            if now >= deadline:
                holder = holder_of(item, _now_ms())
                age = (_now_ms() - (holder.last_heartbeat_ms or 0)) / 1000
                raise errors.LockTimeoutError(
                    f"could not lock {self.name} within {self.timeout_s:g}s: held by {item.get('owner')} "
                    f"({holder.describe()}; lease renewed {age:.1f}s ago, "
                    f"lease {int(item.get('lease_ms', 0)) / 1000:g}s "
                    f"in the DynamoDB table {self.store.table!r}). Wait for that swap to finish; if its process is "
                    "dead, its lease is taken over once unrenewed for a whole lease",
                    table=self.name, swap_id=self.swap_id)
            time.sleep(min(self.poll_s, max(0.0, deadline - now)) or 0.01)
        self.lock_id = self._token
        self._confirmed_at = time.monotonic()
        log.info("lock.acquired", table=self.name, lock_id=self.lock_id, swap_id=self.swap_id, lease_s=self.lease_s)
        self._stop.clear()
        self._thread = threading.Thread(target=self._heartbeat_loop, name=f"tableswap-lease-{self.key}", daemon=True)
        self._thread.start()
        return self

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_s + 5)
            self._thread = None
        if self.lock_id is None:
            return
        self.lock_id = None
        try:
            if self.store.delete(self.key, self._token):
                log.info("lock.released", table=self.name, swap_id=self.swap_id)
        except errors.TableSwapError as exc:
            log.warning("lock.release_failed", table=self.name, error=str(exc),
                        hint="the lease is taken over once unrenewed for a whole lease")

    def __enter__(self) -> "LeaseLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ------------------------------------------------------------------ held?
    def _renew(self, store: LeaseStore) -> None:
        with self._guard:
            if self.lost is not None or self.lock_id is None:
                return
            version = uuid.uuid4().hex
            if store.renew(self.key, self._token, version, _now_ms()):
                self._version = version
                self._confirmed_at = time.monotonic()
                self.heartbeats += 1
                return
            item = store.get(self.key)
            self.lost = (f"taken over by {item.get('owner')}" if item else "the lease item is gone")
            log.error("lock.lost", table=self.name, swap_id=self.swap_id, reason=self.lost)

    def ensure_held(self) -> None:
        """Raise :class:`LockLostError` if the lease is lost; renew it first when the last renewal is older
        than a heartbeat (a write is never sent under a lease not known to be held)."""
        if self.lost is None and time.monotonic() - self._confirmed_at > self.heartbeat_s:
            self._renew(self.store)
        self._raise_if_lost("nothing more is changed")

    def confirm(self) -> None:
        """Renew the lease now, on the condition that it is still ours; raise if it is not."""
        if self.lost is None:
            self._renew(self.store)
        self._raise_if_lost("nothing more is changed")

    def _raise_if_lost(self, changed: str) -> None:
        if self.lost is not None:
            raise errors.LockLostError(
                f"the lease on {self.name} was lost ({self.lost}): it went unrenewed for a whole lease "
                f"({self.lease_s:g}s; e.g. while this process was paused or AWS unreachable) and another "
                f"process took it over; {changed}. Rerun it", table=self.name, swap_id=self.swap_id)

    def _heartbeat_loop(self) -> None:
        store = self._store_factory() if self._store_factory else self.store
        while not self._stop.wait(self.heartbeat_s) and self.lost is None:
            try:
                self._renew(store)
            except errors.TableSwapError as exc:
                log.warning("lock.heartbeat_failed", table=self.name, error=str(exc))


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in a container without passwd entry
        return "?"
