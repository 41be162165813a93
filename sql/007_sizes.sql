-- tableswap journal, version 7: the sizes of the directories swaps wrote, carried to the deletion queue,
-- so that `tableswap janitor status` shows how many bytes wait for the janitor without listing storage.
-- Portable between SQLite and PostgreSQL. Existing rows keep their data; their sizes are unknown (NULL).

-- The bytes of the data files of each location a swap points the table at, as its staging listing
-- found them (known without extra work: the listing plans the swap), recorded with the swap's intent.
-- location_key: sha256 (hex) of the location's comparison key (tableswap.core.locations.key), so that
-- the spellings of one location share one row and no index holds a long path.
CREATE TABLE IF NOT EXISTS tableswap_location_sizes (
    location_key VARCHAR(64) PRIMARY KEY,
    location     TEXT        NOT NULL,
    bytes        BIGINT      NOT NULL,
    swap_id      VARCHAR(64) NOT NULL,
    recorded_at  VARCHAR(40) NOT NULL
);

-- A queued location's bytes as recorded in tableswap_location_sizes when it was queued; NULL when
-- unknown (a directory written before this version or by something else than a tableswap swap).
ALTER TABLE tableswap_deletions ADD COLUMN bytes BIGINT;
