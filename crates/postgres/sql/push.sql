-- push.sql: delayq.push creates up to N jobs of one topic, idempotent on (topic, id),
-- filling what a job leaves unset from the topic's settings, else the built-in defaults.
--
-- Arguments (arrays of N values, one per job, in push order):
--   p_topic     the topic (created, and put back on the topic list, by a push)
--   ids, bodies, priorities
--   whens       a delay in ms when >= 0, else the absolute due time -1 - when ms
--   ttrs, maxes, bo_bases, bo_factors, bo_maxes, bo_jitters
--               the job's own settings, NULL when unset (the topic's apply, else the
--               defaults); the four back-off values are NULL together or not at all
--   conflicts   0 keep, 1 replace, 2 debounce (delayq-core's OnConflict)
--   max_waits   a debounce's max wait in ms from the job's creation, NULL for none
--   expiries    NULL none; a max lateness in ms from the due time when >= 0; else the
--               absolute expiry -1 - value ms
--   on_expires  0 dead, 1 drop
--   defaults    the built-in ttr ms, max attempts, back-off base ms, factor, max ms, jitter
--               permille, and the longest delay ms (delayq-core's, sent so they live in one
--               place)
--   max_body    the engine's largest body; the topic's own limit may be lower
--
-- Returns one row per job, in order: code (1 created, 0 kept, 2 replaced), the job's public
-- state, its due time in ms.
--
-- Raises, before any write (so a refusal changes nothing):
--   DQ004 (detail "<index> <now ms>") an absolute due time over the longest delay ahead;
--   DQ005 (detail "<index> <limit>") a body over the topic's limit;
--   DQ006 (detail "<index> <now ms>") an absolute expiry not after the job's due time; for
--         a delay, now rounded up to the ms as the due time counts it, so that the engine's
--         check (NewJob::check_expiry) at that time finds the same due time.
--
-- Invariants: a live id is never created twice (ON CONFLICT on the primary key; a
-- concurrent push of the same id waits for the other to commit, then sees its job); an
-- existing job in any state but done is left untouched and answered kept, unless its push
-- says replace or debounce and the job is waiting (delayed or ready) and was not pushed
-- earlier in this call: then its body, due time (a debounce's at most its max wait after
-- the job's creation) and options are rewritten, its attempts, creation time and last error
-- kept; a done job holds no id: the push replaces it; the due time is max(asked, now) on
-- the database's clock for an absolute time, and now rounded up to the millisecond plus the
-- delay for a delay (delayq.due_after_us: never early), the creation time and every due
-- time from one clock reading; one signal per call names the earliest due time it placed.

CREATE OR REPLACE FUNCTION delayq.push(p_topic text, ids text[], bodies bytea[],
  priorities bigint[], whens bigint[], ttrs bigint[], maxes bigint[], bo_bases bigint[],
  bo_factors bigint[], bo_maxes bigint[], bo_jitters bigint[], conflicts smallint[],
  max_waits bigint[], expiries bigint[], on_expires smallint[], defaults bigint[],
  max_body bigint)
RETURNS TABLE (code smallint, pstate smallint, due bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  -- One clock reading: the creation time and every delay's due time come from it.
  v_now_us bigint := delayq.now_us();
  v_now bigint := v_now_us / 1000;
  n integer := coalesce(array_length(ids, 1), 0);
  cfg record;
  v_limit bigint;
  t integer;
  i integer;
  v_due bigint;
  v_exp bigint;
  v_ttr bigint;
  v_max bigint;
  b_base bigint; b_factor bigint; b_max bigint; b_jitter bigint;
  old record;
  earliest bigint;
  here text[] := '{}';
BEGIN
  SELECT tp.tid, tp.cfg_ttr_ms, tp.cfg_max_attempts, tp.cfg_bo_base_ms, tp.cfg_bo_factor,
         tp.cfg_bo_max_ms, tp.cfg_bo_jitter, tp.cfg_max_body
    INTO cfg FROM delayq.topics tp WHERE tp.name = p_topic;
  v_limit := least(max_body, coalesce(cfg.cfg_max_body, max_body));
  FOR i IN 1 .. n LOOP
    IF whens[i] < 0 AND -1 - whens[i] > v_now + defaults[7] THEN
      RAISE EXCEPTION 'absolute due time too far' USING ERRCODE = 'DQ004',
        DETAIL = format('%s %s', i - 1, v_now);
    END IF;
    IF octet_length(bodies[i]) > v_limit THEN
      RAISE EXCEPTION 'body over the topic''s limit' USING ERRCODE = 'DQ005',
        DETAIL = format('%s %s', i - 1, v_limit);
    END IF;
    IF expiries[i] < 0 THEN
      v_due := CASE WHEN whens[i] >= 0 THEN delayq.due_after_us(v_now_us, whens[i])
        ELSE greatest(-1 - whens[i], v_now) END;
      IF -1 - expiries[i] <= v_due THEN
        RAISE EXCEPTION 'expiry not after the due time' USING ERRCODE = 'DQ006',
          DETAIL = format('%s %s', i - 1,
            CASE WHEN whens[i] > 0 THEN v_due - whens[i] ELSE v_now END);
      END IF;
    END IF;
  END LOOP;

  t := coalesce(cfg.tid, delayq.topic_id(p_topic, true));
  -- Pushes hold the topic's lock shared until they commit and a purge holds it alone
  -- (admin.sql), so no job lands in a topic a purge has just emptied and taken off the list.
  -- An advisory lock writes nothing, unlike a lock on the topic's row.
  PERFORM pg_advisory_xact_lock_shared(delayq.topic_lock(), t);
  UPDATE delayq.topics SET listed = true WHERE tid = t AND NOT listed;

  FOR i IN 1 .. n LOOP
    v_due := CASE WHEN whens[i] >= 0 THEN delayq.due_after_us(v_now_us, whens[i])
      ELSE greatest(-1 - whens[i], v_now) END;
    v_ttr := coalesce(ttrs[i], cfg.cfg_ttr_ms, defaults[1]);
    v_max := coalesce(maxes[i], cfg.cfg_max_attempts, defaults[2]);
    IF bo_bases[i] IS NOT NULL THEN
      b_base := bo_bases[i]; b_factor := bo_factors[i]; b_max := bo_maxes[i]; b_jitter := bo_jitters[i];
    ELSIF cfg.cfg_bo_base_ms IS NOT NULL THEN
      b_base := cfg.cfg_bo_base_ms; b_factor := cfg.cfg_bo_factor; b_max := cfg.cfg_bo_max_ms;
      b_jitter := cfg.cfg_bo_jitter;
    ELSE
      b_base := defaults[3]; b_factor := defaults[4]; b_max := defaults[5]; b_jitter := defaults[6];
    END IF;

    <<attempt>>
    LOOP
      v_exp := CASE WHEN expiries[i] IS NULL THEN 0
                    WHEN expiries[i] >= 0 THEN v_due + expiries[i]
                    ELSE -1 - expiries[i] END;
      INSERT INTO delayq.jobs (tid, state, on_expire, priority, ready_at, seq, ttr_ms,
          max_attempts, bo_base_ms, bo_factor, bo_max_ms, bo_jitter, created_at, expires_at, id,
          body)
        VALUES (t, 1, on_expires[i], priorities[i], v_due, nextval('delayq.seq'), v_ttr, v_max,
          b_base, b_factor, b_max, b_jitter, v_now, v_exp, ids[i], bodies[i])
        ON CONFLICT (tid, id) DO NOTHING;
      IF FOUND THEN
        here := here || ids[i];
        earliest := least(earliest, v_due);
        code := 1; pstate := delayq.public_state(1::smallint, v_due, v_now); due := v_due;
        RETURN NEXT;
        EXIT attempt;
      END IF;
      SELECT j.state, j.ready_at, j.created_at INTO old FROM delayq.jobs j
        WHERE j.tid = t AND j.id = ids[i] FOR UPDATE;
      IF NOT FOUND THEN
        -- Deleted since the insert saw it: insert again.
        CONTINUE attempt;
      END IF;
      IF old.state = 5 THEN
        -- A done job holds no id.
        DELETE FROM delayq.jobs j WHERE j.tid = t AND j.id = ids[i];
        CONTINUE attempt;
      END IF;
      IF conflicts[i] <> 0 AND old.state = 1 AND NOT (ids[i] = ANY (here)) THEN
        IF conflicts[i] = 2 AND max_waits[i] IS NOT NULL THEN
          v_due := greatest(least(v_due, old.created_at + max_waits[i]), v_now);
        END IF;
        v_exp := CASE WHEN expiries[i] IS NULL THEN 0
                      WHEN expiries[i] >= 0 THEN v_due + expiries[i]
                      ELSE -1 - expiries[i] END;
        UPDATE delayq.jobs j SET priority = priorities[i], ready_at = v_due,
            seq = nextval('delayq.seq'), ttr_ms = v_ttr, max_attempts = v_max,
            bo_base_ms = b_base, bo_factor = b_factor, bo_max_ms = b_max, bo_jitter = b_jitter,
            body = bodies[i], expires_at = v_exp, on_expire = on_expires[i]
          WHERE j.tid = t AND j.id = ids[i];
        here := here || ids[i];
        earliest := least(earliest, v_due);
        code := 2; pstate := delayq.public_state(1::smallint, v_due, v_now); due := v_due;
        RETURN NEXT;
        EXIT attempt;
      END IF;
      code := 0; pstate := delayq.public_state(old.state, old.ready_at, v_now); due := old.ready_at;
      RETURN NEXT;
      EXIT attempt;
    END LOOP;
  END LOOP;
  IF earliest IS NOT NULL THEN
    PERFORM delayq.signal(p_topic, earliest);
  END IF;
END $$;
