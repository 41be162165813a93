-- tableswap journal, version 13: a staged swap's replace_where scope, and the columns each swap's files carry.
-- Portable between SQLite and PostgreSQL.
-- A publish plans the scope's drops again under the table lock, from every partition listed there (a partition
-- another swap added inside the scope since the stage is dropped, as running the two one after the other gives).

-- JSON text: {"specs": [{"dt": "2026-06-01"}, ...]} (evaluated by the publish itself), or {"predicate": "<Spark SQL>",
-- "outside": [partition names known outside it at stage time]} (a partition neither inside, i.e. staged or
-- dropped, nor outside is evaluated by Spark where the publish has it, else the publish is refused).
-- NULL: no scope, or staged before this version (its drops stay as staged_drops recorded them).
ALTER TABLE tableswap_swaps ADD COLUMN staged_scope TEXT;

-- The table's columns when the swap recorded its intent, as JSON text [[name, type], ...]: the columns the files
-- it points the table at carry (a rollback restoring them checks the table's columns of then read them). NULL:
-- recorded before this version.
ALTER TABLE tableswap_swaps ADD COLUMN table_columns TEXT;
