-- lib.sql: helpers shared by the engine's functions (installed first; library.rs installs
-- every sql/*.sql file as one library version, in one transaction).
--
-- Conventions of every function of the library:
--   * time comes only from delayq.now_ms() or delayq.now_us() (clock_timestamp(), the
--     database's clock, read when called, so a long transaction does not freeze it), read
--     once per call; no argument carries "now"; a due time asked as a delay is that reading
--     rounded up to the millisecond plus the delay (delayq.due_after_us): never early;
--   * every check that can refuse a call runs before its first write, so a refusal changes
--     nothing even inside a caller's own transaction;
--   * refusals of a whole call are raised with SQLSTATE DQ0xx and a DETAIL the engine reads
--     (status.rs); refusals of one lease among several are answered as status codes:
--     0 OK, 1 NOT_FOUND, 2 LEASE_LOST, 3 WRONG_STATE (then the job's public state);
--   * public states: 1 delayed, 2 ready, 3 reserved, 4 dead, 5 done; stored states: 1
--     waiting, 3 reserved, 4 dead, 5 done (0001_init.sql);
--   * a job that becomes due now, or whose due time may be earlier than what a waiter
--     sleeps until, is signalled (delayq.signal) on the channel `delayq`: the payload is
--     "<due ms> <topic>"; NOTIFY is delivered at commit, so a job pushed in a transaction
--     that rolls back wakes no one.

-- The first key of the advisory locks on topics (the second is the topic's id): pushes take
-- it shared, a purge alone.
CREATE OR REPLACE FUNCTION delayq.topic_lock() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 1684366433 $$;

-- The first key of the advisory lock a reserve holds on a topic while it claims (the second
-- is the topic's id): reserves of one topic take turns, so lease tokens grow in the order
-- the topic's jobs are handed out.
CREATE OR REPLACE FUNCTION delayq.reserve_lock() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 1684366434 $$;

-- The first of topic t's next lease tokens: after the last one it handed out, and never
-- below the database's clock in µs (`now_us`, the caller's one reading), so that tokens
-- lost with commits (a failover to an asynchronous standby, a restore of an older backup),
-- which were below the old server's clock, stay below it. Call it under the topic's
-- reserve lock, and record the last token used with delayq.tokens_used before the lock
-- goes (at commit). The tokens run ahead of the clock only by the tokens of one µs, and a
-- topic hands out far fewer than a million a second. Stays below 2^53 (µs since 1970 until
-- the year 2255), so JavaScript reads a token exactly.
CREATE OR REPLACE FUNCTION delayq.next_token(t integer, now_us bigint) RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
  SELECT greatest(coalesce((SELECT tk.last FROM delayq.tokens tk WHERE tk.tid = t), 0) + 1,
                  now_us)
$$;

-- Records that topic t handed out tokens up to `last` (from delayq.next_token, under the
-- same reserve lock).
CREATE OR REPLACE FUNCTION delayq.tokens_used(t integer, last bigint) RETURNS void
LANGUAGE sql VOLATILE
AS $$
  INSERT INTO delayq.tokens AS tk (tid, last) VALUES (t, last)
    ON CONFLICT (tid) DO UPDATE SET last = greatest(tk.last, excluded.last)
$$;

-- Now on the database's clock, in milliseconds.
CREATE OR REPLACE FUNCTION delayq.now_ms() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- Now on the database's clock, in microseconds.
CREATE OR REPLACE FUNCTION delayq.now_us() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;

-- The due time of a job asked for `delay` ms after `now_us` (µs, the calling function's one
-- clock reading): `now_us` rounded up to the millisecond plus the delay, so that it is never
-- before that time + the delay at µs resolution; a delay of 0 (or less) is due at `now_us`
-- rounded down. Mirrors delayq-core's due_after.
CREATE OR REPLACE FUNCTION delayq.due_after_us(now_us bigint, delay bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN delay <= 0 THEN now_us / 1000 ELSE (now_us + 999) / 1000 + delay END $$;

-- Tells the waiters of every engine process that topic `topic` has work due at `at` ms.
CREATE OR REPLACE FUNCTION delayq.signal(topic text, at bigint) RETURNS void
LANGUAGE sql VOLATILE
AS $$ SELECT pg_notify('delayq', at::text || ' ' || topic) $$;

-- The public state of a job stored in `state`, due at `ready_at`, at `now`.
CREATE OR REPLACE FUNCTION delayq.public_state(state smallint, ready_at bigint, now bigint)
RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN state = 1 AND ready_at > now THEN 1::smallint
                  WHEN state = 1 THEN 2::smallint
                  ELSE state END $$;

-- The id of topic `name`, created (listed) when missing and `create` is true; NULL when
-- missing and not created.
CREATE OR REPLACE FUNCTION delayq.topic_id(p_name text, create_it boolean) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  t integer;
BEGIN
  SELECT tp.tid INTO t FROM delayq.topics tp WHERE tp.name = p_name;
  IF t IS NOT NULL OR NOT create_it THEN
    RETURN t;
  END IF;
  INSERT INTO delayq.topics AS tp (name) VALUES (p_name)
    ON CONFLICT ON CONSTRAINT topics_name_key DO NOTHING RETURNING tp.tid INTO t;
  IF t IS NULL THEN
    SELECT tp.tid INTO t FROM delayq.topics tp WHERE tp.name = p_name;
  END IF;
  RETURN t;
END $$;

-- The back-off delay after `failed` failures (1 for the first), as delayq-core's
-- Backoff::delay: base * factor^(failed-1) capped at max, minus up to jitter permille of it.
CREATE OR REPLACE FUNCTION delayq.backoff_ms(base bigint, factor bigint, max_ms bigint,
  jitter bigint, failed bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  ms bigint := least(base, max_ms);
  i bigint := 1;
BEGIN
  WHILE i < greatest(failed, 1) LOOP
    EXIT WHEN ms >= max_ms OR factor <= 1;
    ms := least(ms::numeric * factor, max_ms)::bigint;
    i := i + 1;
  END LOOP;
  RETURN ms - floor(ms::double precision * (jitter::double precision / 1000.0) * random())::bigint;
END $$;

-- A delivery of job (tid, id) failed at `now_us` (µs, the calling function's one clock
-- reading: a nack's): it is retried after `delay_ms` (NULL: its back-off after its
-- attempts) counted from `now_us` rounded up to the millisecond (delayq.due_after_us: never
-- early), or goes dead when every attempt is used. `attempts` counts the job's deliveries,
-- this one included (a reserve counts its delivery when it leases the job; a release takes
-- it back). The lease is cleared and `reason` kept. Returns the new due time, or -1 when
-- the job went dead.
CREATE OR REPLACE FUNCTION delayq.fail_us(t integer, topic text, job_id text, attempts bigint,
  max_attempts bigint, bo_base bigint, bo_factor bigint, bo_max bigint, bo_jitter bigint,
  now_us bigint, delay_ms bigint, reason text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  due bigint;
BEGIN
  IF attempts >= max_attempts THEN
    UPDATE delayq.jobs SET state = 4, token = 0, deadline = now_us / 1000,
        last_error = reason
      WHERE tid = t AND id = job_id;
    RETURN -1;
  END IF;
  due := delayq.due_after_us(now_us, coalesce(delay_ms,
    delayq.backoff_ms(bo_base, bo_factor, bo_max, bo_jitter, attempts)));
  UPDATE delayq.jobs SET state = 1, ready_at = due, token = 0,
      deadline = 0, last_error = reason
    WHERE tid = t AND id = job_id;
  PERFORM delayq.signal(topic, due);
  RETURN due;
END $$;

-- A delivery of job (tid, id) failed at `now` ms (its lease ran out, found by a reading in
-- whole ms): delayq.fail_us at the start of that millisecond, so the back-off counts from
-- `now` exactly.
CREATE OR REPLACE FUNCTION delayq.fail(t integer, topic text, job_id text, attempts bigint,
  max_attempts bigint, bo_base bigint, bo_factor bigint, bo_max bigint, bo_jitter bigint,
  now bigint, delay_ms bigint, reason text) RETURNS bigint
LANGUAGE sql VOLATILE
AS $$ SELECT delayq.fail_us(t, topic, job_id, attempts, max_attempts, bo_base, bo_factor,
  bo_max, bo_jitter, now * 1000, delay_ms, reason) $$;

-- Fails the leases of topic (t, topic) that ran out by `now`, at most `budget` of them, each
-- as its lease expiring ("lease expired": retried or dead), and counts them. Rows another
-- transaction holds are skipped: that one is settling or failing them. Returns how many.
CREATE OR REPLACE FUNCTION delayq.expire_leases(t integer, topic text, now bigint,
  budget integer) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  j record;
  n integer := 0;
BEGIN
  FOR j IN
    SELECT id, attempts, max_attempts, bo_base_ms, bo_factor, bo_max_ms, bo_jitter
      FROM delayq.jobs
      WHERE tid = t AND state = 3 AND deadline <= now
      ORDER BY deadline
      LIMIT budget
      FOR UPDATE SKIP LOCKED
  LOOP
    PERFORM delayq.fail(t, topic, j.id, j.attempts, j.max_attempts, j.bo_base_ms,
      j.bo_factor, j.bo_max_ms, j.bo_jitter, now, NULL, 'lease expired');
    n := n + 1;
  END LOOP;
  IF n > 0 THEN
    UPDATE delayq.topics SET expired = expired + n WHERE tid = t;
  END IF;
  RETURN n;
END $$;

-- Expires the waiting jobs of topic t whose expiry passed by `now`, at most `budget`: each
-- goes dead with the reason 'expired' (on_expire 0) or is deleted (1), and is counted.
CREATE OR REPLACE FUNCTION delayq.expire_jobs(t integer, now bigint, budget integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  n integer;
BEGIN
  WITH gone AS (
    SELECT id, on_expire FROM delayq.jobs
      WHERE tid = t AND state = 1 AND expires_at > 0 AND expires_at <= now
      ORDER BY expires_at
      LIMIT budget
      FOR UPDATE SKIP LOCKED
  ), dropped AS (
    DELETE FROM delayq.jobs j USING gone
      WHERE j.tid = t AND j.id = gone.id AND gone.on_expire = 1
      RETURNING 1
  ), dead AS (
    UPDATE delayq.jobs j SET state = 4, deadline = now, last_error = 'expired', expires_at = 0
      FROM gone
      WHERE j.tid = t AND j.id = gone.id AND gone.on_expire = 0
      RETURNING 1
  )
  SELECT (SELECT count(*) FROM dropped) + (SELECT count(*) FROM dead) INTO n;
  IF n > 0 THEN
    UPDATE delayq.topics SET expired_jobs = expired_jobs + n WHERE tid = t;
  END IF;
  RETURN n;
END $$;

-- The job (p_topic, p_id) when it is in stored state p_state: its topic's id t, its due
-- time ready_at, status 0, and its row locked (FOR UPDATE) until the caller's transaction
-- ends, so the caller decides on what it read. Otherwise the refusal: status 1 (no such
-- job) or 3 with its public state at p_now.
CREATE OR REPLACE FUNCTION delayq.job_in_state(p_topic text, p_id text, p_state smallint,
  p_now bigint, OUT t integer, OUT ready_at bigint, OUT status smallint, OUT pstate smallint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_state smallint;
BEGIN
  status := 1; pstate := 0;
  SELECT tp.tid INTO t FROM delayq.topics tp WHERE tp.name = p_topic;
  IF t IS NULL THEN
    RETURN;
  END IF;
  SELECT j.state, j.ready_at INTO v_state, ready_at FROM delayq.jobs j
    WHERE j.tid = t AND j.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF v_state <> p_state THEN
    status := 3; pstate := delayq.public_state(v_state, ready_at, p_now);
    RETURN;
  END IF;
  status := 0;
END $$;

-- Why a lease (tid, id) that is not live is refused at `now`: (status, public state) as the
-- conventions above. A job that is missing is NOT_FOUND; one that is reserved (under another
-- token, or its lease ran out), done, or has had a delivery is LEASE_LOST; any other is
-- WRONG_STATE with its state.
CREATE OR REPLACE FUNCTION delayq.refusal(t integer, job_id text, now bigint,
  OUT status smallint, OUT pstate smallint)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  j record;
BEGIN
  SELECT state, attempts, ready_at INTO j FROM delayq.jobs WHERE tid = t AND id = job_id;
  IF NOT FOUND THEN
    status := 1; pstate := 0;
  ELSIF j.state IN (3, 5) OR j.attempts > 0 THEN
    status := 2; pstate := 0;
  ELSE
    status := 3; pstate := delayq.public_state(j.state, j.ready_at, now);
  END IF;
END $$;
