-- tableswap journal, version 4, PostgreSQL only (SQLite compares text byte by byte already):
-- compare and sort the identifiers, names and ISO-8601 timestamps the journal orders by, or compares
-- with < and >, byte by byte (collation "C"), whatever the database's default collation. Results are
-- then ordered identically on both dialects, and timestamp text compares chronologically.
ALTER TABLE tableswap_swaps ALTER COLUMN swap_id TYPE VARCHAR(64) COLLATE "C";
ALTER TABLE tableswap_swaps ALTER COLUMN db_name TYPE VARCHAR(128) COLLATE "C";
ALTER TABLE tableswap_swaps ALTER COLUMN table_name TYPE VARCHAR(256) COLLATE "C";
ALTER TABLE tableswap_swaps ALTER COLUMN started_at TYPE VARCHAR(40) COLLATE "C";
ALTER TABLE tableswap_swap_items ALTER COLUMN swap_id TYPE VARCHAR(64) COLLATE "C";
ALTER TABLE tableswap_swap_items ALTER COLUMN partition_name TYPE TEXT COLLATE "C";
ALTER TABLE tableswap_deletions ALTER COLUMN swap_id TYPE VARCHAR(64) COLLATE "C";
ALTER TABLE tableswap_deletions ALTER COLUMN location TYPE TEXT COLLATE "C";
ALTER TABLE tableswap_deletions ALTER COLUMN queued_at TYPE VARCHAR(40) COLLATE "C";
ALTER TABLE tableswap_janitor_claims ALTER COLUMN expires_at TYPE VARCHAR(40) COLLATE "C";
ALTER TABLE tableswap_janitor_runs ALTER COLUMN started_at TYPE VARCHAR(40) COLLATE "C";
ALTER TABLE tableswap_undone ALTER COLUMN rollback_id TYPE VARCHAR(64) COLLATE "C";
ALTER TABLE tableswap_undone ALTER COLUMN swap_id TYPE VARCHAR(64) COLLATE "C";
ALTER TABLE tableswap_restores ALTER COLUMN rollback_id TYPE VARCHAR(64) COLLATE "C";
