-- 0003_lease_tokens.sql: lease tokens that never go back, even after lost commits (issue 37).
--
-- Tokens were blocks of 1024 from delayq.seq. A failover to an asynchronous standby, or a
-- restore of an older backup, loses the last commits and the sequence's last values with
-- them: the same block came out again, for the same job. Now each topic's tokens follow its
-- row here: the next one is after `last` and never below the database's clock in µs
-- (lib.sql's next_token), so a token lost with a commit, which was below the old server's
-- clock then, stays below every token handed out after it.
--
-- delayq.tokens: one row per topic that has leased a job (none: no token yet)
--   tid   the topic (delayq.topics; no foreign key, whose check would lock the topic's
--         row under the reserve lock, and a topic's row is never deleted)
--   last  the largest lease token the topic has handed out
-- Invariants: written only by a holder of the topic's reserve lock (lib.sql reserve_lock),
-- so a topic's tokens grow in the order its jobs are handed out; `last` only grows.

CREATE TABLE delayq.tokens (
    tid  integer PRIMARY KEY,
    last bigint  NOT NULL
);

-- Every token the old blocks handed out is at most the sequence's last value * 1024 + 1023.
INSERT INTO delayq.tokens (tid, last)
    SELECT tp.tid, s.last_value * 1024 + 1023 FROM delayq.topics tp, delayq.seq s;

DROP FUNCTION IF EXISTS delayq.token_block();
