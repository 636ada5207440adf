-- store.sql: schedules, push destinations and the engine-wide number sequence.
--
-- The reads, the deletes and the destination writes are single plain statements in
-- ops/schedules.rs, ops/destinations.rs and ops/numbers.rs; the writes whose correctness
-- between processes is the point are here.
--
-- delayq.claim_numbers(p_topic, p_count) -> bigint
--   Claims the next p_count (1 to 1,000,000, checked by the caller) numbers of the sequence
--   every process shares (meta 'numbers' = the last number claimed, 0 at first) for topic
--   p_topic, records the range (first, last, topic) in number_ranges, and answers its first
--   number; NULL, changing nothing, when the sequence is used up (past i64::MAX).
--   Invariants: the UPDATE locks meta 'numbers' until the caller's transaction ends, so
--   concurrent claims queue on it and each one reads the value the one before it wrote:
--   ranges never overlap, numbers start at 1, and a range is recorded in the same
--   transaction that claims it. Nothing deletes a range (purge and retention leave them).
--
-- delayq.put_schedule(p_name, p_cron, ..., p_misfire_limit, p_max_lateness_ms,
--     p_expires_at_ms, p_on_expire) -> bigint
--   Creates or replaces the schedule p_name (the columns of delayq.schedules, as
--   delayq_core::ScheduleParts; the four back-off columns all NULL or all set, at most one
--   of max_lateness_ms and expires_at_ms set) and answers
--   its new revision. Invariants: a new schedule is at revision 1, and each put of an
--   existing one adds 1; every put clears through (a replaced schedule starts afresh).
--   One INSERT ... ON CONFLICT: concurrent puts of one name each get their own revision.
--
-- delayq.schedule_pushed(p_name, p_revision, p_through) -> boolean
--   Records that the fires of schedule p_name up to p_through (ms) were pushed, when it is
--   still at p_revision and p_through is later than what it records; answers whether it
--   did. Invariants: through only moves forward within one revision; a compare-and-set on
--   the row (an UPDATE that re-checks its condition on the row's latest version), so of two
--   schedulers racing on one revision and time, one records and the other does not.

CREATE OR REPLACE FUNCTION delayq.claim_numbers(p_topic text, p_count bigint) RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
  WITH claimed AS (
    UPDATE delayq.meta SET value = value + p_count
      WHERE key = 'numbers' AND value <= 9223372036854775807 - p_count
      RETURNING value
  )
  INSERT INTO delayq.number_ranges AS r (first, last, topic)
    SELECT claimed.value - p_count + 1, claimed.value, p_topic FROM claimed
    RETURNING r.first
$$;

CREATE OR REPLACE FUNCTION delayq.put_schedule(p_name text, p_cron text, p_time_zone text,
  p_topic text, p_body bytea, p_priority bigint, p_ttr_ms bigint, p_max_attempts bigint,
  p_bo_base_ms bigint, p_bo_factor bigint, p_bo_max_ms bigint, p_bo_jitter bigint,
  p_start_ms bigint, p_end_ms bigint, p_jitter_ms bigint, p_misfire integer,
  p_misfire_limit bigint, p_max_lateness_ms bigint, p_expires_at_ms bigint,
  p_on_expire integer) RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
  INSERT INTO delayq.schedules AS s (name, revision, through, cron, time_zone, topic, body,
      priority, ttr_ms, max_attempts, bo_base_ms, bo_factor, bo_max_ms, bo_jitter, start_ms,
      end_ms, jitter_ms, misfire, misfire_limit, max_lateness_ms, expires_at_ms, on_expire)
    VALUES (p_name, 1, NULL, p_cron, p_time_zone, p_topic, p_body, p_priority, p_ttr_ms,
      p_max_attempts, p_bo_base_ms, p_bo_factor, p_bo_max_ms, p_bo_jitter, p_start_ms,
      p_end_ms, p_jitter_ms, p_misfire, p_misfire_limit, p_max_lateness_ms, p_expires_at_ms,
      p_on_expire)
    ON CONFLICT (name) DO UPDATE SET revision = s.revision + 1, through = NULL,
      cron = excluded.cron, time_zone = excluded.time_zone, topic = excluded.topic,
      body = excluded.body, priority = excluded.priority, ttr_ms = excluded.ttr_ms,
      max_attempts = excluded.max_attempts, bo_base_ms = excluded.bo_base_ms,
      bo_factor = excluded.bo_factor, bo_max_ms = excluded.bo_max_ms,
      bo_jitter = excluded.bo_jitter, start_ms = excluded.start_ms, end_ms = excluded.end_ms,
      jitter_ms = excluded.jitter_ms, misfire = excluded.misfire,
      misfire_limit = excluded.misfire_limit, max_lateness_ms = excluded.max_lateness_ms,
      expires_at_ms = excluded.expires_at_ms, on_expire = excluded.on_expire
    RETURNING s.revision
$$;

CREATE OR REPLACE FUNCTION delayq.schedule_pushed(p_name text, p_revision bigint,
  p_through bigint) RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
  WITH recorded AS (
    UPDATE delayq.schedules s SET through = p_through
      WHERE s.name = p_name AND s.revision = p_revision
        AND (s.through IS NULL OR s.through < p_through)
      RETURNING 1
  )
  SELECT EXISTS (SELECT 1 FROM recorded)
$$;
