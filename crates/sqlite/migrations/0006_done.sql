-- Schema version 6: done jobs, kept by a topic's retention (delayq_core::Retention).
--
-- States (jobs.state) from now on: 1 waiting, 3 reserved, 4 dead, 5 done. A done job is an
-- acked job its topic keeps: jobs.deadline is the time of its ack, its token 0, its attempts
-- the deliveries it had (the acked one included).
--
-- topics.cfg_done_max and topics.cfg_done_age_ms are the retention (both NULL: none; set
-- together), topics.done counts the topic's done jobs, so that an ack keeps the count bound
-- without counting rows.
--
-- Done jobs sit in their own partial index, in the order they are listed and trimmed:
--   jobs_done  (tid, deadline, id)  list done, the oldest to trim, the count by age
ALTER TABLE topics ADD COLUMN cfg_done_max INTEGER;
ALTER TABLE topics ADD COLUMN cfg_done_age_ms INTEGER;
ALTER TABLE topics ADD COLUMN done INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_done ON jobs (tid, deadline, id) WHERE state = 5;
