-- tableswap journal, version 18: what a swap group's publish checks of each member, from any process. Portable
-- between SQLite and PostgreSQL.
-- catalog: the catalog the member was staged in ('hive-metastore', or 'glue://REGION'): a group's tables are all
-- in one catalog, and a publish or discard through another catalog is refused before anything is written. NULL:
-- added before this version (not checked).
ALTER TABLE tableswap_group_members ADD COLUMN catalog VARCHAR(256);
-- state_token: the member's if_unchanged_since (a state token, tableswap.table_state), given when it was staged and
-- checked under the table's lock at the group's publish, whichever process publishes it. NULL: none.
ALTER TABLE tableswap_group_members ADD COLUMN state_token TEXT;
