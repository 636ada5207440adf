-- Schema version 14: a schedule's jobs may carry an expiry (issue 36), as a push's:
-- max_lateness_ms (after each job's due time) or expires_at_ms (one time for all), at most
-- one of them set (NULL: none), and on_expire, 0 dead (the default, and what every schedule
-- stored before this version gets) or 1 drop. Columns of delayq_core::ScheduleParts.
ALTER TABLE schedules ADD COLUMN max_lateness_ms INTEGER;
ALTER TABLE schedules ADD COLUMN expires_at_ms INTEGER;
ALTER TABLE schedules ADD COLUMN on_expire INTEGER NOT NULL DEFAULT 0;
