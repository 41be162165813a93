-- tableswap journal, version 9: what a staged swap staged, so that its publish can refuse a staging directory
-- that changed since (a lifecycle rule, a stray delete, a file added) and a target whose format or columns
-- changed since (a table dropped and re-created). Portable between SQLite and PostgreSQL. A swap staged
-- before this version has no row: its publish checks its target against its temporary table only.

-- One row per staged swap, written in the transaction that makes it staged.
-- files: JSON {path relative to the staging location: bytes} of its data files (the readers' rule: no part
-- of the path hidden, but partition directories); written_for: JSON of the target's format (input and output
-- format, serde, provider) and columns when it was staged.
CREATE TABLE IF NOT EXISTS tableswap_staged_batches (
    swap_id      VARCHAR(64) PRIMARY KEY REFERENCES tableswap_swaps (swap_id),
    file_count   INTEGER     NOT NULL,
    bytes        BIGINT      NOT NULL,
    files        TEXT        NOT NULL,
    written_for  TEXT        NOT NULL,
    recorded_at  VARCHAR(40) NOT NULL
);
