-- topics.sql: a topic's settings and its pause. Both live in the topic's row of
-- delayq.topics (0001_init.sql): the cfg_* columns (NULL: unset) and paused_until (NULL: not
-- paused; i64::MAX: until resumed). push.sql and lease.sql read the settings, reserve.sql
-- the pause, each on every call, so a change is seen by every process at once.
--
-- A topic these functions create is created off the topic list (listed = false): settings
-- and pauses do not list a topic; its next push does.

-- The id of topic p_name, locked (FOR UPDATE) until the end of the caller's transaction;
-- created off the topic list when missing.
--   Invariants: a concurrent creation of the same name waits on the unique key, then this
--   one reads and locks the row the other made; so callers that decide a write by what
--   they read of the row queue behind each other.
CREATE OR REPLACE FUNCTION delayq.lock_topic_unlisted(p_name text) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_tid integer;
BEGIN
  LOOP
    SELECT tp.tid INTO v_tid FROM delayq.topics tp WHERE tp.name = p_name FOR UPDATE;
    IF v_tid IS NOT NULL THEN
      RETURN v_tid;
    END IF;
    INSERT INTO delayq.topics AS tp (name, listed) VALUES (p_name, false)
      ON CONFLICT ON CONSTRAINT topics_name_key DO NOTHING;
  END LOOP;
END $$;

-- delayq.set_topic_config(p_topic, p_ttr_ms, p_max_attempts, p_bo_base_ms, p_bo_factor,
--   p_bo_max_ms, p_bo_jitter, p_max_body, p_done_max, p_done_age_ms, p_partitions) -> void
--   Replaces the settings of topic p_topic whole: each argument is the value of its cfg_*
--   column, NULL when unset (the built-in default applies). The topic is created off the
--   topic list when missing. The done jobs are brought within the new retention at once
--   (delayq.trim_done), or all removed when p_done_max is NULL.
--   The values were validated by delayq-core (TopicConfig::validate): the four back-off
--   values are NULL together or not at all, and so are the retention's two.
--   Raises, before any write (so a refusal changes nothing):
--     DQ007 (detail "<count now> <count asked>") the partition count (NULL: 1) would change
--     while the topic holds a job, in any state (a done job too).
--   Invariants: the topic's row is locked before it is read, so settings changes of one
--   topic queue, and each decides on the count the previous one left; a change of the count
--   holds the topic's advisory lock alone, so no push is in flight while it checks. The count does not
--   place jobs on this engine (a topic's jobs are kept together whatever it is): it is
--   kept and answered, and guarded as the other engines guard it.
CREATE OR REPLACE FUNCTION delayq.set_topic_config(p_topic text, p_ttr_ms bigint,
  p_max_attempts bigint, p_bo_base_ms bigint, p_bo_factor bigint, p_bo_max_ms bigint,
  p_bo_jitter bigint, p_max_body bigint, p_done_max bigint, p_done_age_ms bigint,
  p_partitions integer) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  v_tid integer;
  v_cur record;
BEGIN
  SELECT tp.tid, tp.cfg_partitions, tp.cfg_done_age_ms INTO v_cur
    FROM delayq.topics tp WHERE tp.name = p_topic FOR UPDATE;
  IF FOUND THEN
    v_tid := v_cur.tid;
    IF coalesce(v_cur.cfg_partitions, 1) <> coalesce(p_partitions, 1) THEN
      -- Alone on the topic's advisory lock, which pushes hold shared until they commit
      -- (push.sql): no push lands under the old count once the check below has passed.
      PERFORM pg_advisory_xact_lock(delayq.topic_lock(), v_tid);
    END IF;
    IF coalesce(v_cur.cfg_partitions, 1) <> coalesce(p_partitions, 1) AND EXISTS (
        SELECT 1 FROM delayq.jobs j WHERE j.tid = v_tid) THEN
      RAISE EXCEPTION 'the partition count cannot change while the topic holds jobs'
        USING ERRCODE = 'DQ007',
        DETAIL = format('%s %s', coalesce(v_cur.cfg_partitions, 1), coalesce(p_partitions, 1));
    END IF;
  ELSE
    -- No row, so no job: nothing to refuse.
    v_tid := delayq.lock_topic_unlisted(p_topic);
  END IF;

  UPDATE delayq.topics tp SET cfg_ttr_ms = p_ttr_ms, cfg_max_attempts = p_max_attempts,
      cfg_bo_base_ms = p_bo_base_ms, cfg_bo_factor = p_bo_factor, cfg_bo_max_ms = p_bo_max_ms,
      cfg_bo_jitter = p_bo_jitter, cfg_max_body = p_max_body, cfg_done_max = p_done_max,
      cfg_done_age_ms = p_done_age_ms, cfg_partitions = p_partitions
    WHERE tp.tid = v_tid;
  IF p_done_max IS NULL THEN
    DELETE FROM delayq.jobs j WHERE j.tid = v_tid AND j.state = 5;
  ELSE
    PERFORM delayq.trim_done(v_tid, v_now, p_done_max, p_done_age_ms);
  END IF;
END $$;

-- delayq.pause(p_topic, p_until, p_max_delay_ms) -> void
--   Pauses topic p_topic until p_until ms on the database's clock (i64::MAX: until
--   resumed), replacing the end of a pause in force; a p_until not after now ends the
--   pause (a resume). A pause creates the topic off the topic list when missing; ending
--   one of a topic that does not exist does nothing. p_max_delay_ms is delayq-core's
--   longest delay (MAX_DELAY, sent so it lives in one place).
--   Raises, before any write (so a refusal changes nothing):
--     DQ004 (detail "<now ms>") p_until is more than p_max_delay_ms ahead and not i64::MAX.
--   Invariants: the topic's row is locked before its pause is read, so pauses of one topic
--   queue; ending or shortening a pause signals the topic (delayq.signal at now) so that
--   waiting reservers of every process look again at the commit; a longer pause signals
--   nothing (a waiter finds it at its next look, and delayq.next_wake sleeps to its end).
CREATE OR REPLACE FUNCTION delayq.pause(p_topic text, p_until bigint, p_max_delay_ms bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  v_now bigint := delayq.now_ms();
  v_tid integer;
  v_old bigint;
BEGIN
  IF p_until <> 9223372036854775807 AND p_until > v_now + p_max_delay_ms THEN
    RAISE EXCEPTION 'the pause would end more than the longest delay ahead'
      USING ERRCODE = 'DQ004', DETAIL = format('%s', v_now);
  END IF;
  SELECT tp.tid, tp.paused_until INTO v_tid, v_old
    FROM delayq.topics tp WHERE tp.name = p_topic FOR UPDATE;
  IF p_until <= v_now THEN
    IF v_old IS NOT NULL THEN
      UPDATE delayq.topics tp SET paused_until = NULL WHERE tp.tid = v_tid;
      PERFORM delayq.signal(p_topic, v_now);
    END IF;
    RETURN;
  END IF;
  IF v_tid IS NULL THEN
    v_tid := delayq.lock_topic_unlisted(p_topic);
  END IF;
  UPDATE delayq.topics tp SET paused_until = p_until WHERE tp.tid = v_tid;
  IF v_old > v_now AND p_until < v_old THEN
    PERFORM delayq.signal(p_topic, v_now);
  END IF;
END $$;
