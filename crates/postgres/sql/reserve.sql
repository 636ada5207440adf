-- reserve.sql: delayq.reserve takes up to N due jobs of the given topics, the first topic
-- first: in each, the lowest priority number first, then the earliest due time, then push
-- order; delayq.next_wake says when a waiter should look again.
--
-- delayq.reserve(p_topics, n, at_most_once, budget)
--   p_topics      the topics, in the order to take from
--   n             the most jobs to take (1..1000)
--   at_most_once  false: lease each job (attempts + 1, a fresh token, deadline now + ttr);
--                 true: delete each job as it is handed out
--   budget        the most expired leases and expired jobs of a topic to fail first
-- Returns one row per job taken: the topic's position in p_topics (1-based), the job's
-- columns after the lease (token 0 at most once), and now in µs. The rows come in no
-- particular order: the caller sorts them by (topic position, priority, ready_at, seq).
--
-- Invariants: each due job is handed out once: it is claimed with FOR UPDATE SKIP LOCKED
-- (a row another reserver holds is skipped, never waited for) and leased or deleted in the
-- same statement; a paused topic hands out nothing; a job whose expiry has passed is never
-- handed out (expire_jobs fails it first; one the budget left is skipped); leases that ran
-- out are failed first ("lease expired"), each retried or dead, and counted; the leasing
-- reserves of a topic take turns (an advisory lock held to their commit) and number their
-- jobs from the topic's next token on (lib.sql's next_token: after its last one, never
-- below the clock in µs, so never below a token lost with a commit), in the contract's
-- order, recording the last one used (tokens_used), so a topic's tokens grow in the order
-- its jobs are handed out (a worker with two reserves on their way orders its buffer by
-- them).
--
-- The due jobs of one priority are one range of jobs_waiting (tid, priority, ready_at, seq)
-- WHERE state = 1, so the topic's bands are walked from the lowest priority: one probe finds
-- a band's earliest job, and when it is due a second claims the band's due jobs. The state
-- is a literal in every statement, so the partial index applies whatever the parameters.

CREATE OR REPLACE FUNCTION delayq.reserve(p_topics text[], n integer, at_most_once boolean,
  budget integer)
RETURNS TABLE (pos integer, id text, token bigint, priority bigint, ready_at bigint,
  seq bigint, ttr_ms bigint, max_attempts bigint, attempts bigint, bo_base_ms bigint,
  bo_factor bigint, bo_max_ms bigint, bo_jitter bigint, created_at bigint, deadline bigint,
  last_error text, body bytea, expires_at bigint, on_expire smallint, now_us bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now_us bigint := delayq.now_us();
  v_now bigint := v_now_us / 1000;
  want integer := n;
  k integer;
  t integer;
  paused bigint;
  after bigint;
  band record;
  got integer;
  -- The topic's first token for this call, and how many of its jobs this call leased.
  v_tokens bigint;
  taken integer;
BEGIN
  FOR k IN 1 .. coalesce(array_length(p_topics, 1), 0) LOOP
    EXIT WHEN want <= 0;
    SELECT tp.tid, tp.paused_until INTO t, paused FROM delayq.topics tp
      WHERE tp.name = p_topics[k];
    CONTINUE WHEN t IS NULL;
    PERFORM delayq.expire_leases(t, p_topics[k], v_now, greatest(budget, want));
    PERFORM delayq.expire_jobs(t, v_now, greatest(budget, want));
    CONTINUE WHEN paused IS NOT NULL AND paused > v_now;
    IF NOT at_most_once THEN
      -- Reserves of this topic take turns from here to their commit, and this one's tokens
      -- follow every earlier reserve's, in the order of the jobs (row_number), so tokens
      -- grow in the order jobs are handed out.
      PERFORM pg_advisory_xact_lock(delayq.reserve_lock(), t);
      v_tokens := delayq.next_token(t, v_now_us);
    END IF;
    taken := 0;
    after := -1;
    LOOP
      EXIT WHEN want <= 0;
      SELECT j.priority, j.ready_at INTO band FROM delayq.jobs j
        WHERE j.tid = t AND j.state = 1 AND j.priority > after
        ORDER BY j.priority, j.ready_at LIMIT 1;
      EXIT WHEN NOT FOUND;
      after := band.priority;
      CONTINUE WHEN band.ready_at > v_now;
      IF at_most_once THEN
        RETURN QUERY
        WITH c AS (
          SELECT j.id FROM delayq.jobs j
            WHERE j.tid = t AND j.state = 1 AND j.priority = after AND j.ready_at <= v_now
              AND NOT (j.expires_at > 0 AND j.expires_at <= v_now)
            ORDER BY j.ready_at, j.seq LIMIT want
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM delayq.jobs j USING c WHERE j.tid = t AND j.id = c.id
        RETURNING k, j.id, 0::bigint, j.priority, j.ready_at, j.seq, j.ttr_ms, j.max_attempts,
          j.attempts + 1, j.bo_base_ms, j.bo_factor, j.bo_max_ms, j.bo_jitter, j.created_at,
          0::bigint, j.last_error, j.body, j.expires_at, j.on_expire, v_now_us;
      ELSE
        RETURN QUERY
        WITH c AS (
          SELECT d.id, row_number() OVER (ORDER BY d.ready_at, d.seq) AS rn FROM (
            SELECT j.id, j.ready_at, j.seq FROM delayq.jobs j
              WHERE j.tid = t AND j.state = 1 AND j.priority = after AND j.ready_at <= v_now
                AND NOT (j.expires_at > 0 AND j.expires_at <= v_now)
              ORDER BY j.ready_at, j.seq LIMIT want
              FOR UPDATE SKIP LOCKED) d
        )
        UPDATE delayq.jobs j SET state = 3, attempts = j.attempts + 1,
            token = v_tokens + taken + c.rn - 1, deadline = v_now + j.ttr_ms
          FROM c WHERE j.tid = t AND j.id = c.id
        RETURNING k, j.id, j.token, j.priority, j.ready_at, j.seq, j.ttr_ms, j.max_attempts,
          j.attempts, j.bo_base_ms, j.bo_factor, j.bo_max_ms, j.bo_jitter, j.created_at,
          j.deadline, j.last_error, j.body, j.expires_at, j.on_expire, v_now_us;
      END IF;
      GET DIAGNOSTICS got = ROW_COUNT;
      want := want - got;
      taken := taken + got;
    END LOOP;
    IF NOT at_most_once AND taken > 0 THEN
      PERFORM delayq.tokens_used(t, v_tokens + taken - 1);
    END IF;
  END LOOP;
END $$;

-- The earliest due time among the waiting jobs of topic t (NULL: none), one probe per band.
CREATE OR REPLACE FUNCTION delayq.earliest_due(t integer) RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  after bigint := -1;
  band record;
  best bigint;
BEGIN
  LOOP
    SELECT j.priority, j.ready_at INTO band FROM delayq.jobs j
      WHERE j.tid = t AND j.state = 1 AND j.priority > after
      ORDER BY j.priority, j.ready_at LIMIT 1;
    EXIT WHEN NOT FOUND;
    after := band.priority;
    best := least(best, band.ready_at);
  END LOOP;
  RETURN best;
END $$;

-- When a waiter on p_topics should look again, in ms on the database's clock: the earliest
-- of each topic's next due time (now when a job is due), lease deadline, expiry, and the end
-- of its pause (a paused topic's jobs wait for it); NULL when nothing will happen without a
-- new write (which signals). Also returns now in ms.
CREATE OR REPLACE FUNCTION delayq.next_wake(p_topics text[], OUT wake bigint, OUT now_ms bigint)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  k integer;
  t integer;
  paused bigint;
  due bigint;
BEGIN
  now_ms := delayq.now_ms();
  FOR k IN 1 .. coalesce(array_length(p_topics, 1), 0) LOOP
    SELECT tp.tid, tp.paused_until INTO t, paused FROM delayq.topics tp
      WHERE tp.name = p_topics[k];
    CONTINUE WHEN t IS NULL;
    due := delayq.earliest_due(t);
    IF paused IS NOT NULL AND paused > now_ms AND due IS NOT NULL THEN
      due := greatest(due, paused);
    END IF;
    wake := least(wake, due,
      (SELECT min(j.deadline) FROM delayq.jobs j WHERE j.tid = t AND j.state = 3),
      (SELECT min(j.expires_at) FROM delayq.jobs j
         WHERE j.tid = t AND j.state = 1 AND j.expires_at > 0));
  END LOOP;
END $$;
