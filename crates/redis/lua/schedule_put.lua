-- schedule_put.lua: creates or replaces a schedule (issue 14) and answers its new revision.
--
-- KEYS[1]  the schedules hash (<prefix>:schedules; no topic's key)
-- ARGV[1]  the schedule's name
-- ARGV[2]  its definition, as delayq-redis encodes it (ops::schedules; opaque here)
--
-- Returns: the new revision (1 for a new schedule, + 1 for a replaced one).
--
-- Layout: fields 'd:<name>' (the definition), 'r:<name>' (its revision), 't:<name>' (the
-- latest fire time pushed through, in ms; absent until the first). Invariants: the three
-- fields of a name are written together by these functions only; a put clears 't:' (a
-- replaced schedule starts afresh); a revision only grows while the schedule exists.

local name = ARGV[1]
local rev = redis.call('HINCRBY', KEYS[1], 'r:' .. name, 1)
redis.call('HSET', KEYS[1], 'd:' .. name, ARGV[2])
redis.call('HDEL', KEYS[1], 't:' .. name)
return rev
