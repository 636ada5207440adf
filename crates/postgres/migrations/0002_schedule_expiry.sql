-- 0002_schedule_expiry.sql: a schedule's jobs may carry an expiry (issue 36), as a push's:
-- max_lateness_ms (after each job's due time) or expires_at_ms (one time for all), at most
-- one of them set (NULL: none), and on_expire, 0 dead (the default, and what every schedule
-- stored before this migration gets) or 1 drop. Columns of delayq_core::ScheduleParts.
--
-- delayq.put_schedule takes them as three more arguments (sql/store.sql); its old form,
-- without them, is dropped here so that no caller reaches it.

ALTER TABLE delayq.schedules
    ADD COLUMN max_lateness_ms bigint,
    ADD COLUMN expires_at_ms   bigint,
    ADD COLUMN on_expire       integer NOT NULL DEFAULT 0;

DROP FUNCTION IF EXISTS delayq.put_schedule(text, text, text, text, bytea, bigint, bigint,
    bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint, integer, bigint);
