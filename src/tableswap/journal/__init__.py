"""The swap journal: the store (:class:`Journal`), its database (engines, dialects, migrations:
:mod:`.db`) and the janitor's view of the deletion queue (:mod:`.queue`)."""

from typing import TYPE_CHECKING, Any

from tableswap.core.deprecated import renamed
from tableswap.journal.store import (  # noqa: F401 - the journal package's names, re-exported
    ABORTED,
    COMMITTED,
    FAILED,
    PENDING,
    STAGING,
    UNFINISHED,
    Deletion,
    Journal,
    PartitionChange,
    SwapRecord,
    create_engine,
    default_url,
    migrate,
    migrations,
    safe_url,
    utcnow,
)

if TYPE_CHECKING:  # the old name, for one release (tableswap.core.deprecated)
    SwapItem = PartitionChange
else:
    def __getattr__(name: str) -> Any:
        return renamed(__name__, globals(), name, {"SwapItem": "PartitionChange"})
