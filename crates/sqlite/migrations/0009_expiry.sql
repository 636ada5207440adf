-- Schema version 9: a job may carry an expiry (issue 14, delayq_core::Expiry).
--
-- jobs.expires_at is the latest the job may be delivered, in ms on the engine's clock (0:
-- no expiry); jobs.on_expire what happens to a waiting job once it passes (0: dead with the
-- reason "expired", 1: deleted). topics.expired_jobs counts such jobs since the topic was
-- created or last purged (TopicStats::expired_jobs), as the Redis engine's counters hash.
--
-- jobs_expiring (tid, expires_at) holds only waiting jobs with an expiry, so it costs
-- nothing to jobs without one; the writer's timer and reserve read the expired ones from it.
ALTER TABLE jobs ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN on_expire INTEGER NOT NULL DEFAULT 0;
ALTER TABLE topics ADD COLUMN expired_jobs INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_expiring ON jobs (tid, expires_at) WHERE state = 1 AND expires_at > 0;
