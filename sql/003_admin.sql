-- tableswap journal, version 3: bookkeeping of the admin commands (rollback, recover).
-- Portable between SQLite and PostgreSQL.

-- Which (swap, partition) changes a rollback undid ('' partition for an unpartitioned table).
-- Written before the rollback's flip; it takes effect only once that rollback is committed.
-- A change is "rolled back" when a committed rollback undid it and that rollback was not itself
-- rolled back (a rollback of a rollback re-applies the change).
CREATE TABLE IF NOT EXISTS tableswap_undone (
    rollback_id    VARCHAR(64) NOT NULL REFERENCES tableswap_swaps (swap_id),
    swap_id        VARCHAR(64) NOT NULL REFERENCES tableswap_swaps (swap_id),
    partition_name TEXT        NOT NULL,
    PRIMARY KEY (rollback_id, swap_id, partition_name)
);
CREATE INDEX IF NOT EXISTS tableswap_undone_by_swap ON tableswap_undone (swap_id);

-- Deletion-queue rows a rollback set to 'restored' because it made their location live again, so
-- that an aborted rollback can put exactly those rows back to 'pending'.
CREATE TABLE IF NOT EXISTS tableswap_restores (
    rollback_id    VARCHAR(64) NOT NULL REFERENCES tableswap_swaps (swap_id),
    swap_id        VARCHAR(64) NOT NULL,  -- the deletion row's swap
    location       TEXT        NOT NULL,  -- the deletion row's location
    restored_at    VARCHAR(40) NOT NULL,
    PRIMARY KEY (rollback_id, swap_id, location)
);
