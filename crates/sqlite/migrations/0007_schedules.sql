-- Schema version 7: schedules (issue 14, delayq_core::JobSchedule), one row each.
--
-- schedules.revision is 1 at the first put and grows by one at each later put; through is
-- the latest fire time whose job was pushed (ms; NULL until the first, and again after each
-- put). The other columns are delayq_core::ScheduleParts: times and durations in ms, the
-- back-off's four parts (all NULL: none), misfire 0 skip, 1 once, 2 each (misfire_limit
-- for each). Nothing else refers to this table: the jobs a schedule pushes are ordinary
-- jobs, and stay when it is deleted.
CREATE TABLE schedules (
    name          TEXT    PRIMARY KEY,
    revision      INTEGER NOT NULL,
    through       INTEGER,
    cron          TEXT    NOT NULL,
    time_zone     TEXT    NOT NULL,
    topic         TEXT    NOT NULL,
    body          BLOB    NOT NULL,
    priority      INTEGER NOT NULL,
    ttr_ms        INTEGER,
    max_attempts  INTEGER,
    bo_base_ms    INTEGER,
    bo_factor     INTEGER,
    bo_max_ms     INTEGER,
    bo_jitter     INTEGER,
    start_ms      INTEGER,
    end_ms        INTEGER,
    jitter_ms     INTEGER NOT NULL,
    misfire       INTEGER NOT NULL,
    misfire_limit INTEGER NOT NULL
) WITHOUT ROWID;
