-- tableswap journal, version 2: janitor claims and run log. Portable between SQLite and PostgreSQL.
-- Only new tables (CREATE TABLE IF NOT EXISTS), so two processes applying it at once is harmless.

-- A janitor claims a location before it re-checks and deletes it, so that two janitors never
-- delete the same path. A claim is a lease: it expires at expires_at, and a claim whose holder
-- process is known to be dead (same host, pid gone) is taken over at once. Not a foreign key to
-- tableswap_deletions: orphaned staging directories without a journaled swap are claimed too.
CREATE TABLE IF NOT EXISTS tableswap_janitor_claims (
    swap_id    VARCHAR(64)  NOT NULL,
    location   TEXT         NOT NULL,
    token      VARCHAR(64)  NOT NULL,
    holder     VARCHAR(300) NOT NULL,  -- host:pid of the janitor process
    claimed_at VARCHAR(40)  NOT NULL,
    expires_at VARCHAR(40)  NOT NULL,
    PRIMARY KEY (swap_id, location)
);

-- One row per (non-dry) janitor run, for operators: when did it last run, what did it free.
CREATE TABLE IF NOT EXISTS tableswap_janitor_runs (
    run_id        VARCHAR(64)  PRIMARY KEY,
    started_at    VARCHAR(40)  NOT NULL,
    finished_at   VARCHAR(40),
    host_name     VARCHAR(256),
    table_filter  VARCHAR(400),
    grace_seconds INTEGER      NOT NULL,
    keep_count    INTEGER      NOT NULL DEFAULT 0,
    deleted       INTEGER      NOT NULL DEFAULT 0,
    bytes_freed   BIGINT       NOT NULL DEFAULT 0,
    refused       INTEGER      NOT NULL DEFAULT 0,
    errors        INTEGER      NOT NULL DEFAULT 0
);
