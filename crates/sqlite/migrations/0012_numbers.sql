-- Schema version 12: numbers claimed from one engine-wide sequence (Engine::claim_numbers),
-- the ids the beanstalkd protocol gives jobs, and the topic each range was claimed for
-- (Engine::number_topic).
--
-- meta 'numbers' is the last number claimed (0: none yet); a claim of `count` takes the
-- `count` numbers after it and records them in `number_ranges`, in the same transaction.
-- number_ranges has one row per claim: its first and last number and the topic's name (a
-- name, not a topic id: a topic needs no row of its own to claim numbers). Ranges never
-- overlap and grow with `first`, the table's rowid, so the range holding n is one seek
-- (`first <= n ORDER BY first DESC LIMIT 1`, then `n <= last`). Nothing deletes a range:
-- purges, deletes and retention leave them, so a number never changes topic.
CREATE TABLE number_ranges (
    first INTEGER PRIMARY KEY,
    last  INTEGER NOT NULL,
    topic TEXT    NOT NULL
);
INSERT INTO meta (key, value) VALUES ('numbers', 0);
