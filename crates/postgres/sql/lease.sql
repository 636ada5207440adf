-- lease.sql: the operations on a delivery: ack (many at once), nack, release, touch and
-- bury. Each is valid only while the job is reserved under the given token and now is before
-- its deadline; otherwise nothing changes and the answer says why (lib.sql's
-- delayq.refusal).
--
-- Every function answers (status, pstate, value): status and pstate as lib.sql's
-- conventions; value is the new due time for nack (-1: the job went dead), the new deadline
-- for touch, else 0.
--
-- A lease's row is found by the primary key (tid, id): the state is tested as `state + 0 = 3`,
-- which the partial index jobs_reserved (WHERE state = 3) does not match, so the planner
-- cannot walk every lease of the topic to filter one id out of them (tests/plans.rs).
--
-- Invariants: a settlement checks the lease in the statement that changes the row (state 3,
-- the token, deadline > now), so a lease that ran out or was replaced changes nothing; an
-- acked job is deleted, or kept in state done (deadline = the ack's time) when its topic has
-- a retention, whose bounds are then kept (delayq.trim_done).

-- Brings the done jobs of topic t within its retention at `now`: those acked before now -
-- age_ms go (at most 1000 per call: reads check the age themselves), then the oldest beyond
-- max_jobs.
CREATE OR REPLACE FUNCTION delayq.trim_done(t integer, now bigint, max_jobs bigint,
  age_ms bigint) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  DELETE FROM delayq.jobs j USING (
    SELECT d.id FROM delayq.jobs d
      WHERE d.tid = t AND d.state = 5 AND d.deadline <= now - age_ms
      ORDER BY d.deadline, d.id LIMIT 1000) old
    WHERE j.tid = t AND j.id = old.id;
  DELETE FROM delayq.jobs j USING (
    SELECT d.id FROM delayq.jobs d
      WHERE d.tid = t AND d.state = 5
      ORDER BY d.deadline DESC, d.id DESC OFFSET max_jobs) old
    WHERE j.tid = t AND j.id = old.id;
END $$;

-- Acks the leases (ids[i], tokens[i]) of topic p_topic; one row per lease, in order.
CREATE OR REPLACE FUNCTION delayq.ack(p_topic text, ids text[], tokens bigint[])
RETURNS TABLE (status smallint, pstate smallint, value bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  t integer;
  keep_max bigint;
  keep_age bigint;
  i integer;
  r record;
  kept integer := 0;
BEGIN
  SELECT tp.tid, tp.cfg_done_max, tp.cfg_done_age_ms INTO t, keep_max, keep_age
    FROM delayq.topics tp WHERE tp.name = p_topic;
  FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
    value := 0;
    IF t IS NULL THEN
      status := 1; pstate := 0;
      RETURN NEXT;
      CONTINUE;
    END IF;
    IF keep_max IS NULL THEN
      DELETE FROM delayq.jobs j
        WHERE j.tid = t AND j.id = ids[i] AND j.state + 0 = 3 AND j.token = tokens[i]
          AND j.deadline > v_now;
    ELSE
      UPDATE delayq.jobs j SET state = 5, token = 0, deadline = v_now
        WHERE j.tid = t AND j.id = ids[i] AND j.state + 0 = 3 AND j.token = tokens[i]
          AND j.deadline > v_now;
    END IF;
    IF FOUND THEN
      status := 0; pstate := 0;
      IF keep_max IS NOT NULL THEN kept := kept + 1; END IF;
    ELSE
      SELECT * INTO r FROM delayq.refusal(t, ids[i], v_now);
      status := r.status; pstate := r.pstate;
    END IF;
    RETURN NEXT;
  END LOOP;
  IF kept > 0 THEN
    PERFORM delayq.trim_done(t, v_now, keep_max, keep_age);
  END IF;
END $$;

-- The live lease (p_topic, job_id, tok) at now, locked: its row, or NULL with the refusal.
CREATE OR REPLACE FUNCTION delayq.leased(p_topic text, job_id text, tok bigint, now bigint,
  OUT t integer, OUT job delayq.jobs, OUT status smallint, OUT pstate smallint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  r record;
BEGIN
  status := 0; pstate := 0;
  SELECT tp.tid INTO t FROM delayq.topics tp WHERE tp.name = p_topic;
  IF t IS NULL THEN
    status := 1;
    RETURN;
  END IF;
  SELECT * INTO job FROM delayq.jobs j
    WHERE j.tid = t AND j.id = job_id AND j.state + 0 = 3 AND j.token = tok AND j.deadline > now
    FOR UPDATE;
  IF NOT FOUND THEN
    job := NULL;
    SELECT * INTO r FROM delayq.refusal(t, job_id, now);
    status := r.status; pstate := r.pstate;
  END IF;
END $$;

-- Fails a delivery: retried after delay_ms (NULL: the back-off), or dead when every attempt
-- is used; reason ('' for none) is kept as the last error. value: the new due time, or -1.
CREATE OR REPLACE FUNCTION delayq.nack(p_topic text, job_id text, tok bigint, delay_ms bigint,
  reason text, OUT status smallint, OUT pstate smallint, OUT value bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now_us bigint := delayq.now_us();
  l record;
BEGIN
  value := 0;
  SELECT * INTO l FROM delayq.leased(p_topic, job_id, tok, v_now_us / 1000);
  status := l.status; pstate := l.pstate;
  IF status <> 0 THEN RETURN; END IF;
  value := delayq.fail_us(l.t, p_topic, job_id, (l.job).attempts, (l.job).max_attempts,
    (l.job).bo_base_ms, (l.job).bo_factor, (l.job).bo_max_ms, (l.job).bo_jitter, v_now_us,
    delay_ms, reason);
END $$;

-- Gives a delivery back without counting it: attempts - 1, the lease cleared, waiting again
-- at its due time (its old place in the order), or delay_ms from now when given; with
-- new_priority as its priority from now on when given.
CREATE OR REPLACE FUNCTION delayq.release(p_topic text, job_id text, tok bigint,
  delay_ms bigint, new_priority bigint,
  OUT status smallint, OUT pstate smallint, OUT value bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now_us bigint := delayq.now_us();
  v_now bigint := v_now_us / 1000;
  l record;
  v_due bigint;
BEGIN
  value := 0;
  SELECT * INTO l FROM delayq.leased(p_topic, job_id, tok, v_now);
  status := l.status; pstate := l.pstate;
  IF status <> 0 THEN RETURN; END IF;
  v_due := CASE WHEN delay_ms IS NULL THEN (l.job).ready_at
    ELSE delayq.due_after_us(v_now_us, delay_ms) END;
  UPDATE delayq.jobs j SET state = 1, attempts = greatest(j.attempts - 1, 0), token = 0,
      deadline = 0, ready_at = v_due, priority = coalesce(new_priority, j.priority)
    WHERE j.tid = l.t AND j.id = job_id;
  PERFORM delayq.signal(p_topic, v_due);
END $$;

-- Extends the lease to now + ttr_ms (NULL: the job's ttr); the token stays. value: the new
-- deadline.
CREATE OR REPLACE FUNCTION delayq.touch(p_topic text, job_id text, tok bigint, ttr_ms bigint,
  OUT status smallint, OUT pstate smallint, OUT value bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  l record;
BEGIN
  value := 0;
  SELECT * INTO l FROM delayq.leased(p_topic, job_id, tok, v_now);
  status := l.status; pstate := l.pstate;
  IF status <> 0 THEN RETURN; END IF;
  value := v_now + coalesce(ttr_ms, (l.job).ttr_ms);
  UPDATE delayq.jobs j SET deadline = value WHERE j.tid = l.t AND j.id = job_id;
END $$;

-- Sends a reserved job to dead at once, with reason ('' for none) as its last error, and
-- new_priority as its priority from now on when given (a kick keeps it).
CREATE OR REPLACE FUNCTION delayq.bury(p_topic text, job_id text, tok bigint, reason text,
  new_priority bigint, OUT status smallint, OUT pstate smallint, OUT value bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  l record;
BEGIN
  value := 0;
  SELECT * INTO l FROM delayq.leased(p_topic, job_id, tok, v_now);
  status := l.status; pstate := l.pstate;
  IF status <> 0 THEN RETURN; END IF;
  UPDATE delayq.jobs j SET state = 4, token = 0, deadline = v_now, last_error = reason,
      priority = coalesce(new_priority, j.priority)
    WHERE j.tid = l.t AND j.id = job_id;
END $$;
