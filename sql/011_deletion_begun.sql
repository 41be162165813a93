-- tableswap journal, version 11: the janitor marks a queued location before its first delete. Portable between
-- SQLite and PostgreSQL. Existing rows keep NULL (no deletion begun, or one that finished before this version:
-- its row is 'deleted').

-- When a janitor began deleting the location (set once, before its first delete, never cleared). A directory
-- goes in several requests (an object store's DeleteObjects pages, a file system's per-file removes): a janitor
-- that dies between two of them leaves part of it, with the row still pending. A location so marked is never
-- restored (rollback, repair, read_as_of refuse it, whether files remain or not); a later run finishes it.
ALTER TABLE tableswap_deletions ADD COLUMN delete_begun_at VARCHAR(40);
