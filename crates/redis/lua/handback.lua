-- handback.lua: gives a topic's next event back to Redis, so that a waiter elsewhere (or the
-- next one here) learns of it. A process calls it when the last of its waiters on the topic
-- leaves while it knew of an event, or when it pops a signal for a topic no one there waits
-- on any more.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1]  the event's time in ms on the Redis clock
--
-- Returns: 1 when the event was signalled, 0 when the topic holds no job.
--
-- Invariants: the wake time only ever gets earlier (ZADD LT); a topic with no job (emptied
-- or purged) gets no wake key back, so nothing is left behind.

if redis.call('EXISTS', K_JOBS) == 0 then return 0 end
signal(tonumber(ARGV[1]))
return 1
