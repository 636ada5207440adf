-- 0001_init.sql: the first schema of the embedded engine (user_version 1).
--
-- Tables:
--   topics  one row per topic ever pushed to: its numeric id and its counter `seq`, which
--           orders pushes and issues lease tokens. Purge keeps the row, so tokens issued
--           after a purge are still larger than every token issued before it.
--   jobs    one row per live job (delayed, ready, reserved or dead). An acked, deleted,
--           purged or at-most-once delivered job has no row.
--
-- States (jobs.state): 1 delayed, 2 ready, 3 reserved, 4 dead.
-- jobs.deadline is the lease deadline while reserved, the time of death while dead, 0 otherwise.
-- jobs.token is the lease token while reserved, 0 otherwise.
-- Times are milliseconds since the Unix epoch on the engine's clock.
--
-- Each state has its own partial index, ordered the way the engine reads that state, so a
-- job sits in exactly one of them and every hot query is one index range:
--   jobs_delayed   (tid, ready_at, id)            next due time, promotion, list delayed
--   jobs_ready     (tid, priority, ready_at, seq) reserve order, list ready
--   jobs_reserved  (tid, deadline, id)            lease expiry, list reserved
--   jobs_dead      (tid, deadline, id)            list dead, kick_all

CREATE TABLE topics (
    tid  INTEGER PRIMARY KEY,
    name TEXT    NOT NULL UNIQUE,
    seq  INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE jobs (
    jid          INTEGER PRIMARY KEY,
    tid          INTEGER NOT NULL,
    id           TEXT    NOT NULL,
    state        INTEGER NOT NULL,
    priority     INTEGER NOT NULL,
    ready_at     INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    ttr_ms       INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    attempts     INTEGER NOT NULL,
    bo_base_ms   INTEGER NOT NULL,
    bo_factor    INTEGER NOT NULL,
    bo_max_ms    INTEGER NOT NULL,
    bo_jitter    INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    token        INTEGER NOT NULL,
    deadline     INTEGER NOT NULL,
    last_error   TEXT    NOT NULL,
    body         BLOB    NOT NULL
);

CREATE UNIQUE INDEX jobs_id ON jobs (tid, id);
CREATE INDEX jobs_delayed ON jobs (tid, ready_at, id) WHERE state = 1;
CREATE INDEX jobs_ready ON jobs (tid, priority, ready_at, seq) WHERE state = 2;
CREATE INDEX jobs_reserved ON jobs (tid, deadline, id) WHERE state = 3;
CREATE INDEX jobs_dead ON jobs (tid, deadline, id) WHERE state = 4;
