-- tableswap journal, version 14: swap groups (several tables published as one unit). Portable between SQLite
-- and PostgreSQL.
-- A group goes 'open' (its members being staged) -> 'pending' (its one intent: every member's own intent is
-- journaled and the flips may start; `tableswap recover` finishes every member from here) -> 'committed' (one
-- transaction with every member's commit), or 'failed' (nothing of it was flipped; its members staged again or
-- discarded). Each member keeps its own record in tableswap_swaps (and its own intent in tableswap_swap_items).
CREATE TABLE tableswap_groups (
    group_id VARCHAR(64) PRIMARY KEY,
    name VARCHAR(256),
    kind VARCHAR(16) NOT NULL,            -- swap | rollback (a `tableswap rollback --group`)
    state VARCHAR(16) NOT NULL,
    rollback_of VARCHAR(64),              -- the group a rollback group undoes
    created_at VARCHAR(40) NOT NULL,
    intent_at VARCHAR(40),
    committed_at VARCHAR(40),
    error TEXT
);
CREATE INDEX tableswap_groups_name ON tableswap_groups (name, created_at);

CREATE TABLE tableswap_group_members (
    group_id VARCHAR(64) NOT NULL,
    swap_id VARCHAR(64) NOT NULL,
    db_name VARCHAR(256) NOT NULL,
    table_name VARCHAR(256) NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (group_id, swap_id)
);
CREATE UNIQUE INDEX tableswap_group_members_swap ON tableswap_group_members (swap_id);
