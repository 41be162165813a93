-- Runs once, when the PostgreSQL volume is initialised: a database for the tableswap journal
-- (TABLESWAP_JOURNAL_URL=postgresql://hive:hive@127.0.0.1:5432/tableswap). tableswap creates its
-- tables itself on first use (sql/NNN_*.sql).
CREATE DATABASE tableswap OWNER hive;
