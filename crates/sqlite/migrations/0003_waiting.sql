-- Schema version 3: delayed and ready jobs become one stored state, waiting (1). Whether a
-- waiting job is delayed or ready is a function of time (ready_at <= now: ready), so a job
-- falling due is no longer a write: reserve takes waiting jobs whose due time has passed.
-- Before, the timer rewrote every job at its due time (state 1 -> 2, one index entry moved),
-- a commit's worth of page writes per due job that queued behind pushes under load.
--
-- States (jobs.state) from now on: 1 waiting, 3 reserved, 4 dead. Code 2 is no longer written.
--
-- Waiting jobs sit in one partial index (reserved and dead ones are unchanged):
--   jobs_waiting  (tid, priority, ready_at, seq)  reserve order, list ready and delayed,
--                                                 next due time, counts: per priority, the
--                                                 jobs due by some time are one index range
-- A second index ordered by due time alone (the old jobs_delayed) would cost a page write
-- per pushed job: jobs pushed with random due times land on random pages of it.

UPDATE jobs SET state = 1 WHERE state = 2;
DROP INDEX jobs_delayed;
DROP INDEX jobs_ready;
CREATE INDEX jobs_waiting ON jobs (tid, priority, ready_at, seq) WHERE state = 1;
