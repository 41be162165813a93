-- tableswap journal, version 19: the janitor's index of what the metastore references, kept from the metastore's
-- notification log between runs (docs/janitor.md#the-reference-index). Portable between SQLite and PostgreSQL.
-- One index per metastore and reference scope (index_key). Only a cache: dropping its rows makes the next run a
-- full scan, nothing else.
CREATE TABLE tableswap_ref_index (
    index_key VARCHAR(512) PRIMARY KEY,  -- '<scope> <metastore URI>'
    roots TEXT NOT NULL,                 -- JSON list: the storage roots whose references are kept
    last_event_id BIGINT NOT NULL,       -- the last notification-log event applied
    full_scan_at VARCHAR(40) NOT NULL,   -- when the metastore was last read in full for it
    updated_at VARCHAR(40) NOT NULL
);
-- Per table: what identifies it (JSON: location, partition keys, parameters) and the locations it references
-- that matter (JSON list of [location, owner, container, temp_of, partition]).
CREATE TABLE tableswap_ref_index_tables (
    index_key VARCHAR(512) NOT NULL,
    db_name VARCHAR(256) NOT NULL,
    table_name VARCHAR(256) NOT NULL,
    info TEXT NOT NULL,
    refs TEXT NOT NULL,
    PRIMARY KEY (index_key, db_name, table_name)
);
