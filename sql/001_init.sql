-- tableswap journal, version 1. Portable between SQLite and PostgreSQL.
-- Timestamps are ISO-8601 UTC text (sortable as text).

-- One row per swap (a swap_partitions / swap_table call, or a rollback, which is a swap too).
CREATE TABLE IF NOT EXISTS tableswap_swaps (
    swap_id          VARCHAR(64)  PRIMARY KEY,
    db_name          VARCHAR(128) NOT NULL,
    table_name       VARCHAR(256) NOT NULL,
    kind             VARCHAR(16)  NOT NULL,  -- partitions | table | rollback
    state            VARCHAR(16)  NOT NULL,  -- staging | pending | committed | failed | aborted
    table_root       TEXT         NOT NULL,
    staging_location TEXT,
    temp_table       VARCHAR(256),
    rollback_of      VARCHAR(64),
    started_at       VARCHAR(40)  NOT NULL,
    intent_at        VARCHAR(40),
    committed_at     VARCHAR(40),
    finished_at      VARCHAR(40),
    user_name        VARCHAR(128),
    host_name        VARCHAR(256),
    app_id           VARCHAR(256),
    error            TEXT
);
CREATE INDEX IF NOT EXISTS tableswap_swaps_by_table ON tableswap_swaps (db_name, table_name, started_at);
CREATE INDEX IF NOT EXISTS tableswap_swaps_by_state ON tableswap_swaps (state);

-- What a swap changes: one row per partition ('' for an unpartitioned table).
CREATE TABLE IF NOT EXISTS tableswap_swap_items (
    swap_id        VARCHAR(64) NOT NULL REFERENCES tableswap_swaps (swap_id),
    partition_name TEXT        NOT NULL,
    action         VARCHAR(16) NOT NULL,  -- add | replace | drop | unchanged
    old_location   TEXT,
    new_location   TEXT,
    PRIMARY KEY (swap_id, partition_name)
);

-- Displaced locations waiting for the janitor. Each displacement is recorded exactly once.
CREATE TABLE IF NOT EXISTS tableswap_deletions (
    swap_id        VARCHAR(64)  NOT NULL REFERENCES tableswap_swaps (swap_id),
    location       TEXT         NOT NULL,
    db_name        VARCHAR(128) NOT NULL,
    table_name     VARCHAR(256) NOT NULL,
    partition_name TEXT         NOT NULL,
    table_root     TEXT         NOT NULL,
    reason         VARCHAR(16)  NOT NULL,  -- displaced | orphan
    state          VARCHAR(16)  NOT NULL,  -- pending | deleted | refused | restored
    queued_at      VARCHAR(40)  NOT NULL,
    deleted_at     VARCHAR(40),
    attempts       INTEGER      NOT NULL DEFAULT 0,
    last_error     TEXT,
    PRIMARY KEY (swap_id, location)
);
CREATE INDEX IF NOT EXISTS tableswap_deletions_by_state ON tableswap_deletions (state, queued_at);
