-- admin.sql: operations on jobs by id and on whole topics: delete, reschedule, kick, kick
-- many, bury without a lease, reserve by id, list, stats and purge.
--
-- The functions on one job by id answer (status, pstate) as lib.sql's conventions: 0 OK,
-- 1 NOT_FOUND (no such topic or job), 3 WRONG_STATE (then pstate is the job's public state).
-- Each reads the job's row FOR UPDATE before it decides, so a concurrent reserve, settlement
-- or delete either comes first (and this one sees its result) or waits for this one; every
-- refusal comes before the first write and changes nothing.
--
-- A done job is one row in state 5 whatever its age; its topic's retention
-- (cfg_done_age_ms) decides whether it is still kept (deadline, the ack's time, later than
-- now - age): reads, delete and reserve_job count one no longer kept as missing; kick,
-- reschedule and bury_waiting refuse any done job as WRONG_STATE done, as the other engines
-- do.

-- delayq.delete_job(p_topic, job_id) -> boolean
--   Deletes the job in any state (a reserved job's lease is lost); false when there is none,
--   or when it is a done job its topic's retention no longer keeps (it is removed anyway).
CREATE OR REPLACE FUNCTION delayq.delete_job(p_topic text, job_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  t integer;
  age bigint;
  st smallint;
  at bigint;
BEGIN
  SELECT tp.tid, tp.cfg_done_age_ms INTO t, age FROM delayq.topics tp WHERE tp.name = p_topic;
  IF t IS NULL THEN
    RETURN false;
  END IF;
  DELETE FROM delayq.jobs j WHERE j.tid = t AND j.id = job_id RETURNING j.state, j.deadline
    INTO st, at;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  RETURN st <> 5 OR (age IS NOT NULL AND at > v_now - age);
END $$;

-- delayq.reschedule(p_topic, p_id, p_when, p_max_delay) -> (status, pstate, due)
--   Moves a waiting (delayed or ready) job to a new due time: p_when ms from now (rounded
--   up to the ms: delayq.due_after_us) when >= 0, else the absolute time -1 - p_when ms (at
--   least now). Its id, push order (seq),
--   attempts, priority and expiry stay. due: the new due time.
--   Raises DQ004 (detail "<now ms>") before anything, when an absolute time is more than
--   p_max_delay ms (delayq-core's longest delay) ahead of now.
--   Invariants: a reserved, dead or done job is refused (nack, kick or push instead); a due
--   time earlier than the old one, or due now, is signalled.
CREATE OR REPLACE FUNCTION delayq.reschedule(p_topic text, p_id text, p_when bigint,
  p_max_delay bigint, OUT status smallint, OUT pstate smallint, OUT due bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now_us bigint := delayq.now_us();
  v_now bigint := v_now_us / 1000;
  t integer;
  old record;
BEGIN
  status := 0; pstate := 0; due := 0;
  IF p_when < 0 AND -1 - p_when > v_now + p_max_delay THEN
    RAISE EXCEPTION 'absolute due time too far' USING ERRCODE = 'DQ004',
      DETAIL = v_now::text;
  END IF;
  SELECT * INTO old FROM delayq.job_in_state(p_topic, p_id, 1::smallint, v_now);
  status := old.status; pstate := old.pstate; t := old.t;
  IF status <> 0 THEN
    RETURN;
  END IF;
  due := CASE WHEN p_when >= 0 THEN delayq.due_after_us(v_now_us, p_when)
    ELSE greatest(-1 - p_when, v_now) END;
  UPDATE delayq.jobs j SET ready_at = due WHERE j.tid = t AND j.id = p_id;
  IF due < old.ready_at OR due <= v_now THEN
    PERFORM delayq.signal(p_topic, due);
  END IF;
END $$;

-- delayq.kick(p_topic, p_id) -> (status, pstate)
--   Makes a dead job ready now: attempts 0, no lease, its priority, push order and last
--   error kept; an expiry that has passed is cleared (a kick is an order to run the job),
--   one still ahead kept. Invariants: only a dead job moves; the job, due now, is signalled.
CREATE OR REPLACE FUNCTION delayq.kick(p_topic text, p_id text,
  OUT status smallint, OUT pstate smallint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  t integer;
  old record;
BEGIN
  status := 0; pstate := 0;
  SELECT * INTO old FROM delayq.job_in_state(p_topic, p_id, 4::smallint, v_now);
  status := old.status; pstate := old.pstate; t := old.t;
  IF status <> 0 THEN
    RETURN;
  END IF;
  UPDATE delayq.jobs j SET state = 1, attempts = 0, ready_at = v_now, token = 0,
      deadline = 0,
      expires_at = CASE WHEN j.expires_at > v_now THEN j.expires_at ELSE 0 END
    WHERE j.tid = t AND j.id = p_id;
  PERFORM delayq.signal(p_topic, v_now);
END $$;

-- delayq.kick_dead(p_topic, p_max) -> bigint
--   Kicks, as delayq.kick does, up to p_max dead jobs of the topic, those that died first
--   first, and answers how many. The caller repeats while a call kicks p_max, a bounded
--   number of times (jobs may die meanwhile).
--   Invariants: dead rows another transaction holds are skipped (it is deleting, kicking or
--   leasing them); when any job was kicked, now is signalled once.
CREATE OR REPLACE FUNCTION delayq.kick_dead(p_topic text, p_max integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  t integer;
  kicked bigint;
BEGIN
  SELECT tp.tid INTO t FROM delayq.topics tp WHERE tp.name = p_topic;
  IF t IS NULL THEN
    RETURN 0;
  END IF;
  WITH k AS (
    SELECT d.id FROM delayq.jobs d
      WHERE d.tid = t AND d.state = 4
      ORDER BY d.deadline, d.id
      LIMIT p_max
      FOR UPDATE SKIP LOCKED
  )
  UPDATE delayq.jobs j SET state = 1, attempts = 0, ready_at = v_now, token = 0,
      deadline = 0,
      expires_at = CASE WHEN j.expires_at > v_now THEN j.expires_at ELSE 0 END
    FROM k WHERE j.tid = t AND j.id = k.id;
  GET DIAGNOSTICS kicked = ROW_COUNT;
  IF kicked > 0 THEN
    PERFORM delayq.signal(p_topic, v_now);
  END IF;
  RETURN kicked;
END $$;

-- delayq.count_dead(p_topic) -> bigint
--   How many dead jobs the topic has (0 for a topic that does not exist).
CREATE OR REPLACE FUNCTION delayq.count_dead(p_topic text) RETURNS bigint
LANGUAGE sql STABLE
AS $$
  SELECT count(*) FROM delayq.topics tp JOIN delayq.jobs j ON j.tid = tp.tid
    WHERE tp.name = p_topic AND j.state = 4
$$;

-- delayq.bury_waiting(p_topic, p_id, p_reason) -> (status, pstate)
--   Sends a delayed or ready job to dead now without a lease (an operator's "move to
--   dead"): deadline = now (its time of death), p_reason ('' for none) as its last error,
--   its attempts, priority and expiry as they were (a dead job does not expire; a kick
--   clears an expiry that has passed). Invariants: a reserved job is refused (its holder
--   buries it with its lease), a dead or done one too.
CREATE OR REPLACE FUNCTION delayq.bury_waiting(p_topic text, p_id text, p_reason text,
  OUT status smallint, OUT pstate smallint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  t integer;
  old record;
BEGIN
  status := 0; pstate := 0;
  SELECT * INTO old FROM delayq.job_in_state(p_topic, p_id, 1::smallint, v_now);
  status := old.status; pstate := old.pstate; t := old.t;
  IF status <> 0 THEN
    RETURN;
  END IF;
  UPDATE delayq.jobs j SET state = 4, token = 0, deadline = v_now, last_error = p_reason
    WHERE j.tid = t AND j.id = p_id;
END $$;

-- delayq.reserve_job(p_topic, p_id) -> one row: (status, pstate, token, now_us, the job's
--   columns as row.rs's JOB_COLS after the lease; NULL unless status is 0)
--   Leases one job by its id, now, whatever its due time (beanstalkd's reserve-job), also
--   while its topic is paused: a delayed, ready or dead job becomes reserved with attempts
--   + 1 (a dead job keeps its attempts and last error, so they count on), the topic's next
--   token (lib.sql's next_token, under the topic's reserve lock, as a reserve takes it) and
--   deadline now + its ttr; an expiry that has passed is cleared (an
--   order to run the job, as a kick). A reserved job is WRONG_STATE reserved, a done one
--   WRONG_STATE done while its topic's retention keeps it, else NOT_FOUND.
--   Invariants: a lease of this job that ran out is failed first ("lease expired": retried
--   or dead, counted in topics.expired), as a reserve would, so the job is then leased;
--   the job's row is locked from the read that decides to the lease; the new deadline is
--   signalled, so that a waiter sleeping past it looks again when the lease may run out.
CREATE OR REPLACE FUNCTION delayq.reserve_job(p_topic text, p_id text)
RETURNS TABLE (status smallint, pstate smallint, token bigint, now_us bigint, id text,
  priority bigint, ready_at bigint, seq bigint, ttr_ms bigint, max_attempts bigint,
  attempts bigint, bo_base_ms bigint, bo_factor bigint, bo_max_ms bigint, bo_jitter bigint,
  created_at bigint, deadline bigint, last_error text, body bytea, expires_at bigint,
  on_expire smallint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now_us bigint := delayq.now_us();
  v_now bigint := v_now_us / 1000;
  t integer;
  age bigint;
  old record;
BEGIN
  status := 0; pstate := 0;
  SELECT tp.tid, tp.cfg_done_age_ms INTO t, age FROM delayq.topics tp WHERE tp.name = p_topic;
  IF t IS NULL THEN
    status := 1;
    RETURN NEXT;
    RETURN;
  END IF;
  SELECT j.state, j.ready_at, j.deadline, j.attempts, j.max_attempts, j.bo_base_ms,
      j.bo_factor, j.bo_max_ms, j.bo_jitter
    INTO old FROM delayq.jobs j WHERE j.tid = t AND j.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    status := 1;
    RETURN NEXT;
    RETURN;
  END IF;
  IF old.state = 3 AND old.deadline <= v_now THEN
    PERFORM delayq.fail(t, p_topic, p_id, old.attempts, old.max_attempts, old.bo_base_ms,
      old.bo_factor, old.bo_max_ms, old.bo_jitter, v_now, NULL, 'lease expired');
    UPDATE delayq.topics tp SET expired = tp.expired + 1 WHERE tp.tid = t;
    old.state := CASE WHEN old.attempts >= old.max_attempts THEN 4 ELSE 1 END;
  END IF;
  IF old.state = 3 THEN
    status := 3; pstate := 3;
    RETURN NEXT;
    RETURN;
  END IF;
  IF old.state = 5 THEN
    IF age IS NOT NULL AND old.deadline > v_now - age THEN
      status := 3; pstate := 5;
    ELSE
      status := 1;
    END IF;
    RETURN NEXT;
    RETURN;
  END IF;
  -- As a reserve: the topic's reserves take turns, and this token follows theirs.
  PERFORM pg_advisory_xact_lock(delayq.reserve_lock(), t);
  token := delayq.next_token(t, v_now_us);
  PERFORM delayq.tokens_used(t, token);
  UPDATE delayq.jobs j SET state = 3, attempts = j.attempts + 1,
      token = reserve_job.token, deadline = v_now + j.ttr_ms,
      expires_at = CASE WHEN j.expires_at > v_now THEN j.expires_at ELSE 0 END
    WHERE j.tid = t AND j.id = p_id
    RETURNING j.token, j.id, j.priority, j.ready_at, j.seq, j.ttr_ms, j.max_attempts,
      j.attempts, j.bo_base_ms, j.bo_factor, j.bo_max_ms, j.bo_jitter, j.created_at,
      j.deadline, j.last_error, j.body, j.expires_at, j.on_expire
    INTO token, id, priority, ready_at, seq, ttr_ms, max_attempts, attempts, bo_base_ms,
      bo_factor, bo_max_ms, bo_jitter, created_at, deadline, last_error, body, expires_at,
      on_expire;
  now_us := v_now_us;
  PERFORM delayq.signal(p_topic, deadline);
  RETURN NEXT;
END $$;

-- The listings. Each answers up to p_fetch jobs of one state, after a position (the sort key
-- of the last job of the previous page, exclusive), in the state's order; the caller asks
-- one more than a page to learn whether another follows. Ids compare bytewise (COLLATE
-- "C"), as the other engines compare them. Each is STABLE: its statements share one
-- snapshot, so a page is one committed state.

-- delayq.list_delayed(p_topic, p_at, p_id, p_fetch) -> SETOF delayq.jobs
--   Waiting jobs not yet due, by (due time, id), after (p_at, p_id). jobs_waiting holds them
--   by (priority, due time): each priority band gives its first p_fetch after the position
--   (the bands found by one probe each), and those are merged.
CREATE OR REPLACE FUNCTION delayq.list_delayed(p_topic text, p_at bigint, p_id text,
  p_fetch integer) RETURNS SETOF delayq.jobs
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  t integer;
  v_at bigint := p_at;
  v_id text := p_id;
BEGIN
  SELECT tp.tid INTO t FROM delayq.topics tp WHERE tp.name = p_topic;
  IF t IS NULL THEN
    RETURN;
  END IF;
  -- Delayed means not yet due: start after now as well as after the position ((ready_at,
  -- id) > (now + 1, '') is ready_at > now, ids being non-empty).
  IF v_at <= v_now THEN
    v_at := v_now + 1; v_id := '';
  END IF;
  RETURN QUERY
  WITH RECURSIVE bands (p) AS (
    (SELECT b.priority FROM delayq.jobs b WHERE b.tid = t AND b.state = 1
       ORDER BY b.priority LIMIT 1)
    UNION ALL
    SELECT (SELECT b.priority FROM delayq.jobs b
              WHERE b.tid = t AND b.state = 1 AND b.priority > bands.p
              ORDER BY b.priority LIMIT 1)
      FROM bands WHERE bands.p IS NOT NULL
  )
  SELECT x.* FROM bands CROSS JOIN LATERAL (
    SELECT j.* FROM delayq.jobs j
      WHERE j.tid = t AND j.state = 1 AND j.priority = bands.p AND j.ready_at >= v_at
        AND (j.ready_at > v_at OR j.id COLLATE "C" > v_id)
      ORDER BY j.ready_at, j.id COLLATE "C" LIMIT p_fetch) x
  ORDER BY x.ready_at, x.id COLLATE "C" LIMIT p_fetch;
END $$;

-- delayq.list_ready(p_topic, p_priority, p_at, p_seq, p_fetch) -> SETOF delayq.jobs
--   Due waiting jobs in reserve order (priority, due time, push order), after (p_priority,
--   p_at, p_seq): the rest of the position's band, then the due range of each band after
--   it, one probe per band, until p_fetch are found. Rows come in that order.
CREATE OR REPLACE FUNCTION delayq.list_ready(p_topic text, p_priority bigint, p_at bigint,
  p_seq bigint, p_fetch integer) RETURNS SETOF delayq.jobs
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  t integer;
  want integer := p_fetch;
  got integer;
  after bigint := p_priority;
BEGIN
  SELECT tp.tid INTO t FROM delayq.topics tp WHERE tp.name = p_topic;
  IF t IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT j.* FROM delayq.jobs j
      WHERE j.tid = t AND j.state = 1 AND j.priority = p_priority AND j.ready_at <= v_now
        AND (j.ready_at, j.seq) > (p_at, p_seq)
      ORDER BY j.ready_at, j.seq LIMIT want;
  GET DIAGNOSTICS got = ROW_COUNT;
  want := want - got;
  LOOP
    EXIT WHEN want <= 0;
    SELECT b.priority INTO after FROM delayq.jobs b
      WHERE b.tid = t AND b.state = 1 AND b.priority > after
      ORDER BY b.priority LIMIT 1;
    EXIT WHEN NOT FOUND;
    RETURN QUERY
      SELECT j.* FROM delayq.jobs j
        WHERE j.tid = t AND j.state = 1 AND j.priority = after AND j.ready_at <= v_now
        ORDER BY j.ready_at, j.seq LIMIT want;
    GET DIAGNOSTICS got = ROW_COUNT;
    want := want - got;
  END LOOP;
END $$;

-- delayq.list_timed(p_topic, p_state, p_at, p_id, p_fetch) -> SETOF delayq.jobs
--   Jobs of stored state p_state (3 reserved, 4 dead, 5 done) by (deadline, id) after (p_at,
--   p_id): reserved by lease deadline, dead by time of death, done by time of the ack (only
--   those the topic's retention keeps; none without one). Each state is its own statement,
--   the state a literal, so its partial index (tid, deadline[, id]) serves the order.
CREATE OR REPLACE FUNCTION delayq.list_timed(p_topic text, p_state smallint, p_at bigint,
  p_id text, p_fetch integer) RETURNS SETOF delayq.jobs
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  t integer;
  age bigint;
BEGIN
  SELECT tp.tid, tp.cfg_done_age_ms INTO t, age FROM delayq.topics tp WHERE tp.name = p_topic;
  IF t IS NULL THEN
    RETURN;
  END IF;
  IF p_state = 3 THEN
    RETURN QUERY
      SELECT j.* FROM delayq.jobs j
        WHERE j.tid = t AND j.state = 3 AND j.deadline >= p_at
          AND (j.deadline > p_at OR j.id COLLATE "C" > p_id)
        ORDER BY j.deadline, j.id COLLATE "C" LIMIT p_fetch;
  ELSIF p_state = 4 THEN
    RETURN QUERY
      SELECT j.* FROM delayq.jobs j
        WHERE j.tid = t AND j.state = 4 AND j.deadline >= p_at
          AND (j.deadline > p_at OR j.id COLLATE "C" > p_id)
        ORDER BY j.deadline, j.id COLLATE "C" LIMIT p_fetch;
  ELSIF p_state = 5 AND age IS NOT NULL THEN
    RETURN QUERY
      SELECT j.* FROM delayq.jobs j
        WHERE j.tid = t AND j.state = 5 AND j.deadline > v_now - age AND j.deadline >= p_at
          AND (j.deadline > p_at OR j.id COLLATE "C" > p_id)
        ORDER BY j.deadline, j.id COLLATE "C" LIMIT p_fetch;
  END IF;
END $$;

-- delayq.stats(p_topic) -> (delayed, ready, reserved, dead, done, oldest_due, next_due,
--   expired, expired_jobs, paused_until, now_ms)
--   The topic's counts per public state at now (done: those its retention keeps, 0 without
--   one); oldest_due the earliest due time among its waiting jobs when that has passed
--   (NULL: none due); next_due the earliest due time after now (NULL: none); the expired
--   leases and expired jobs counted since it was created or purged; paused_until the end of
--   its pause while paused (NULL: not paused; i64::MAX: until resumed); now_ms now. A topic
--   that does not exist answers zeros and NULLs.
--   Invariants: STABLE, so every count is of one snapshot; the waiting jobs are counted in
--   one pass of jobs_waiting, each other state through its own partial index.
CREATE OR REPLACE FUNCTION delayq.stats(p_topic text,
  OUT delayed bigint, OUT ready bigint, OUT reserved bigint, OUT dead bigint, OUT done bigint,
  OUT oldest_due bigint, OUT next_due bigint, OUT expired bigint, OUT expired_jobs bigint,
  OUT paused_until bigint, OUT now_ms bigint)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  tp record;
BEGIN
  now_ms := v_now;
  delayed := 0; ready := 0; reserved := 0; dead := 0; done := 0;
  expired := 0; expired_jobs := 0;
  SELECT t.tid, t.expired AS n_expired, t.expired_jobs AS n_expired_jobs,
      t.paused_until AS pause_end, t.cfg_done_age_ms AS age
    INTO tp FROM delayq.topics t WHERE t.name = p_topic;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT count(*) FILTER (WHERE j.ready_at > v_now), count(*) FILTER (WHERE j.ready_at <= v_now),
      min(j.ready_at), min(j.ready_at) FILTER (WHERE j.ready_at > v_now)
    INTO delayed, ready, oldest_due, next_due
    FROM delayq.jobs j WHERE j.tid = tp.tid AND j.state = 1;
  IF oldest_due > v_now THEN
    oldest_due := NULL;
  END IF;
  SELECT count(*) INTO reserved FROM delayq.jobs j WHERE j.tid = tp.tid AND j.state = 3;
  SELECT count(*) INTO dead FROM delayq.jobs j WHERE j.tid = tp.tid AND j.state = 4;
  IF tp.age IS NOT NULL THEN
    SELECT count(*) INTO done FROM delayq.jobs j
      WHERE j.tid = tp.tid AND j.state = 5 AND j.deadline > v_now - tp.age;
  END IF;
  expired := tp.n_expired;
  expired_jobs := tp.n_expired_jobs;
  IF tp.pause_end > v_now THEN
    paused_until := tp.pause_end;
  END IF;
END $$;

-- delayq.purge(p_topic) -> bigint
--   Removes every job of the topic in every state (done ones too) and answers how many; the
--   topic leaves the topic list (listed = false; its next push puts it back) and its
--   expired-lease and expired-job counters restart from 0. Its row stays, with its settings
--   and pause. A topic that does not exist answers 0 and is not created.
--   Invariants: the topic's row is locked first, so purges of one topic queue, then the
--   topic's advisory lock alone, which every push holds shared until it commits; lease tokens
--   follow the topic's row in delayq.tokens, which a purge leaves, so a token from before
--   the purge never matches a later lease.
CREATE OR REPLACE FUNCTION delayq.purge(p_topic text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  t integer;
  n bigint;
BEGIN
  SELECT tp.tid INTO t FROM delayq.topics tp WHERE tp.name = p_topic FOR UPDATE;
  IF t IS NULL THEN
    RETURN 0;
  END IF;
  -- Alone on the topic's advisory lock: pushes in flight commit first, later ones wait
  -- (push.sql), so none lands in the emptied topic unlisted.
  PERFORM pg_advisory_xact_lock(delayq.topic_lock(), t);
  DELETE FROM delayq.jobs j WHERE j.tid = t;
  GET DIAGNOSTICS n = ROW_COUNT;
  UPDATE delayq.topics tp SET listed = false, expired = 0, expired_jobs = 0 WHERE tp.tid = t;
  RETURN n;
END $$;
