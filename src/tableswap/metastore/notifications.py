"""The metastore's notification log (``get_current_notificationEventId``, ``get_next_notification``), decoded
into :class:`tableswap.core.notifications.NotificationEvent` records. Thrift stays here.

Without a notification listener (Hive's ``DbNotificationListener``) the log stays empty: the current id is 0.
The request names no table or database filter: the janitor needs every event to tell that none is missing
(consecutive ids, :meth:`tableswap.ops.janitor.refs.ReferenceScan`)."""

from __future__ import annotations

from typing import Any, Callable, Protocol

from hmsclient.genthrift.hive_metastore import ttypes as tt

from tableswap.core.notifications import (NotificationEvent, decode_message, partition_values,
                                           renamed_table)



class _Reader(Protocol):
    """A metastore client's retried read (:meth:`tableswap.metastore.client.MetastoreClient.read`)."""

    def read(self, what: str, fn: Callable[[Any], Any]) -> Any: ...

#: Events per ``get_next_notification`` call.
EVENT_PAGE = 1000


def current_event_id(client: _Reader) -> int:
    """The id of the newest event in the log (0: none ever)."""
    resp = client.read("get_current_notificationEventId", lambda c: c.get_current_notificationEventId())
    return int(resp.eventId or 0)


def events_after(client: _Reader, last: int, limit: int = EVENT_PAGE) -> list[NotificationEvent]:
    """Up to ``limit`` events with an id above ``last``, oldest first."""
    req = tt.NotificationEventRequest(lastEvent=last, maxEvents=limit)
    resp = client.read(f"get_next_notification({last})", lambda c: c.get_next_notification(req))
    return [_decode(e) for e in (resp.events or [])]


def _decode(event: tt.NotificationEvent) -> NotificationEvent:
    kind = (event.eventType or "").upper()
    message = decode_message(event.message, event.messageFormat)
    return NotificationEvent(
        event_id=int(event.eventId), event_type=kind,
        db=(event.dbName or "").lower() or None, table=(event.tableName or "").lower() or None,
        partitions=partition_values(kind, message),
        catalog=getattr(event, "catName", None), renamed_to=renamed_table(kind, message),
    )
