-- tableswap journal, version 5: progress of named backfills (tableswap.backfill), so that a rerun
-- redoes only the units that did not commit. Additive: no existing table changes.
-- Portable between SQLite and PostgreSQL.

CREATE TABLE IF NOT EXISTS tableswap_backfills (
    name        VARCHAR(200) NOT NULL PRIMARY KEY,
    db_name     VARCHAR(128) NOT NULL,
    table_name  VARCHAR(256) NOT NULL,
    created_at  VARCHAR(40)  NOT NULL,
    updated_at  VARCHAR(40)  NOT NULL
);

-- One row per unit (a partition spec such as dt=2026-06-01): pending -> running -> done | failed.
-- swap_id: the swap that committed it (done) or the last one tried.
CREATE TABLE IF NOT EXISTS tableswap_backfill_units (
    name        VARCHAR(200) NOT NULL REFERENCES tableswap_backfills (name),
    unit        TEXT         NOT NULL,
    position    INTEGER      NOT NULL,
    state       VARCHAR(16)  NOT NULL,
    swap_id     VARCHAR(64),
    attempts    INTEGER      NOT NULL DEFAULT 0,
    started_at  VARCHAR(40),
    finished_at VARCHAR(40),
    seconds     REAL,
    error       TEXT,
    PRIMARY KEY (name, unit)
);
