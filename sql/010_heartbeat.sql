-- tableswap journal, version 10: a liveness signal for every unfinished swap. Portable between SQLite and
-- PostgreSQL. The swap's process refreshes heartbeat_at (ISO-8601 UTC, as started_at) on a background thread
-- from its begin until it leaves 'staging' / 'pending'; `tableswap recover` aborts a swap still 'staging' only
-- once its heartbeat is older than --stale-after. Rows written before this version have NULL: recover judges
-- them by started_at, as before.
ALTER TABLE tableswap_swaps ADD COLUMN heartbeat_at VARCHAR(40);
