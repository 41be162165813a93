"""The swap journal: the store (:class:`Journal`), its database (engines, dialects, migrations:
:mod:`.db`) and the janitor's view of the deletion queue (:mod:`.queue`)."""

from tableswap.journal.store import (  # noqa: F401 - the journal package's names, re-exported
    ABORTED,
    COMMITTED,
    FAILED,
    PENDING,
    STAGING,
    UNFINISHED,
    Deletion,
    Journal,
    SwapItem,
    SwapRecord,
    create_engine,
    default_url,
    migrate,
    migrations,
    safe_url,
    utcnow,
)
