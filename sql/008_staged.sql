-- tableswap journal, version 8: staged swaps (write, audit, publish). Portable between SQLite and PostgreSQL.
-- A staged swap is in state 'staged' (state is VARCHAR(16): no change needed) between its stage and its
-- publish or discard; these columns keep what a publish from another process needs and what history shows.

-- When the swap was staged; kept after its publish (history: "published") or discard ("discarded").
ALTER TABLE tableswap_swaps ADD COLUMN staged_at VARCHAR(40);
-- The partitions its replace_where scope drops (a JSON list of partition names), planned at stage time
-- and re-checked under the lock at publish time; NULL: none.
ALTER TABLE tableswap_swaps ADD COLUMN staged_drops TEXT;
