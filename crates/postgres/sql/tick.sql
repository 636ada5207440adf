-- tick.sql: delayq.tick applies what time has made due in every topic: leases that ran out
-- fail ("lease expired": retried or dead, counted) and waiting jobs whose expiry passed go
-- dead or are dropped, at most `budget` of each per topic. Every engine process runs it at
-- the earliest deadline it knows of (sweeper.rs), so a lease runs out on time whether or
-- not anyone reserves from its topic, and whichever process gets there first applies it
-- (rows another transaction holds are skipped: SKIP LOCKED).
--
-- delayq.tick(budget) -> (next, now_ms)
--   next    the earliest lease deadline or expiry still ahead in any topic (NULL: none), ms
--   now_ms  now on the database's clock
--
-- Invariants: writes only what any reserve of the topic would have written (lib.sql's
-- expire_leases and expire_jobs, which signal the retried jobs' due times).

CREATE OR REPLACE FUNCTION delayq.tick(budget integer, OUT next bigint, OUT now_ms bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  tp record;
BEGIN
  now_ms := delayq.now_ms();
  FOR tp IN SELECT t.tid, t.name FROM delayq.topics t LOOP
    PERFORM delayq.expire_leases(tp.tid, tp.name, now_ms, budget);
    PERFORM delayq.expire_jobs(tp.tid, now_ms, budget);
    next := least(next,
      (SELECT min(j.deadline) FROM delayq.jobs j WHERE j.tid = tp.tid AND j.state = 3),
      (SELECT min(j.expires_at) FROM delayq.jobs j
         WHERE j.tid = tp.tid AND j.state = 1 AND j.expires_at > 0));
  END LOOP;
END $$;
