-- tableswap journal, version 6 (additive): the post-commit hooks run after each commit (tableswap.hooks),
-- one row per hook and run, failed or not; `tableswap history` shows them. Portable.
CREATE TABLE IF NOT EXISTS tableswap_hook_runs (
    swap_id VARCHAR(64)  NOT NULL,
    hook    VARCHAR(256) NOT NULL,
    ok      INTEGER      NOT NULL,  -- 1 succeeded, 0 failed
    seconds REAL         NOT NULL,
    error   TEXT,
    ran_at  VARCHAR(40)  NOT NULL
);
CREATE INDEX IF NOT EXISTS tableswap_hook_runs_by_swap ON tableswap_hook_runs (swap_id);
