-- 0001_init.sql: the tables of the PostgreSQL engine, in the schema `delayq`.
--
-- Times are milliseconds since the Unix epoch on the database's clock (delayq.now_ms(),
-- clock_timestamp() read inside each statement), stored as bigint; 0 means "none" where a
-- column says so. Counters and tokens are bigint; every unsigned value of the contract fits.
--
-- Invariants:
--   * a job is one row of jobs, keyed by (tid, id); its state is 1 waiting (delayed before
--     ready_at, ready from it on: time, not a write, makes it due), 3 reserved (leased under
--     token until deadline), 4 dead (deadline = time of death), 5 done (acked and kept by
--     the topic's retention; deadline = time of the ack);
--   * token is 0 unless the job is reserved; a lease token comes from the sequence
--     delayq.seq, so each lease of a job has a larger token than every earlier one;
--   * seq orders pushes within a priority and due time (delayq.seq too);
--   * every partial index names its state as a literal, so the planner matches it whatever
--     the parameters (plans.rs checks the plans of the hot statements).

CREATE TABLE delayq.meta (
    key   text   PRIMARY KEY,
    value bigint NOT NULL
);

-- Push order and lease tokens.
CREATE SEQUENCE delayq.seq AS bigint;

CREATE TABLE delayq.topics (
    tid              integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text    NOT NULL UNIQUE,
    -- On the topic list (a purge takes a topic off; a push puts it back).
    listed           boolean NOT NULL DEFAULT true,
    -- Leases that ran out without an answer, and jobs whose expiry passed, since the topic
    -- was created or purged.
    expired          bigint  NOT NULL DEFAULT 0,
    expired_jobs     bigint  NOT NULL DEFAULT 0,
    -- The settings (NULL: unset, the built-in default applies). The four back-off columns
    -- are set together or not at all, and so are the retention's two.
    cfg_ttr_ms       bigint,
    cfg_max_attempts bigint,
    cfg_bo_base_ms   bigint,
    cfg_bo_factor    bigint,
    cfg_bo_max_ms    bigint,
    cfg_bo_jitter    bigint,
    cfg_max_body     bigint,
    cfg_done_max     bigint,
    cfg_done_age_ms  bigint,
    cfg_partitions   integer,
    -- While paused: when the pause ends (i64::MAX: until resumed).
    paused_until     bigint
);

CREATE TABLE delayq.jobs (
    tid          integer  NOT NULL,
    state        smallint NOT NULL,
    on_expire    smallint NOT NULL DEFAULT 0,
    priority     bigint   NOT NULL,
    ready_at     bigint   NOT NULL,
    seq          bigint   NOT NULL,
    ttr_ms       bigint   NOT NULL,
    max_attempts bigint   NOT NULL,
    -- Deliveries so far: a reserve counts its delivery as it leases the job (a reserved
    -- job's current attempt included), a release takes it back.
    attempts     bigint   NOT NULL DEFAULT 0,
    bo_base_ms   bigint   NOT NULL,
    bo_factor    bigint   NOT NULL,
    bo_max_ms    bigint   NOT NULL,
    bo_jitter    bigint   NOT NULL,
    created_at   bigint   NOT NULL,
    token        bigint   NOT NULL DEFAULT 0,
    deadline     bigint   NOT NULL DEFAULT 0,
    -- The expiry (0: none).
    expires_at   bigint   NOT NULL DEFAULT 0,
    id           text     NOT NULL,
    last_error   text     NOT NULL DEFAULT '',
    body         bytea    NOT NULL,
    PRIMARY KEY (tid, id)
);

-- Waiting jobs, one band per priority, each by due time then push order: a band's due
-- jobs are one index range (reserve walks the bands).
CREATE INDEX jobs_waiting ON delayq.jobs (tid, priority, ready_at, seq) WHERE state = 1;
CREATE INDEX jobs_reserved ON delayq.jobs (tid, deadline) WHERE state = 3;
CREATE INDEX jobs_dead ON delayq.jobs (tid, deadline, id) WHERE state = 4;
CREATE INDEX jobs_done ON delayq.jobs (tid, deadline, id) WHERE state = 5;
CREATE INDEX jobs_expiring ON delayq.jobs (tid, expires_at) WHERE state = 1 AND expires_at > 0;

CREATE TABLE delayq.schedules (
    name          text    PRIMARY KEY,
    revision      bigint  NOT NULL,
    through       bigint,
    cron          text    NOT NULL,
    time_zone     text    NOT NULL,
    topic         text    NOT NULL,
    body          bytea   NOT NULL,
    priority      bigint  NOT NULL,
    ttr_ms        bigint,
    max_attempts  bigint,
    bo_base_ms    bigint,
    bo_factor     bigint,
    bo_max_ms     bigint,
    bo_jitter     bigint,
    start_ms      bigint,
    end_ms        bigint,
    jitter_ms     bigint  NOT NULL,
    misfire       integer NOT NULL,
    misfire_limit bigint  NOT NULL
);

-- The engine-wide number sequence of the beanstalkd protocol: each claimed range and the
-- topic it names (meta 'numbers' is the last number claimed).
CREATE TABLE delayq.number_ranges (
    first bigint PRIMARY KEY,
    last  bigint NOT NULL,
    topic text   NOT NULL
);
INSERT INTO delayq.meta (key, value) VALUES ('numbers', 0);

CREATE TABLE delayq.destinations (
    topic text PRIMARY KEY,
    doc   text NOT NULL
);
