-- schedule_delete.lua: deletes a schedule (issue 14) and answers what it was.
--
-- KEYS[1]  the schedules hash (see schedule_put.lua)
-- ARGV[1]  the schedule's name
--
-- Returns: { definition, revision, through ms or false } of the deleted schedule, or an
--          empty array when there was none.
--
-- Invariants: the three fields of the name go together; the jobs it pushed stay.

local name = ARGV[1]
local v = redis.call('HMGET', KEYS[1], 'd:' .. name, 'r:' .. name, 't:' .. name)
if not v[1] then return {} end
redis.call('HDEL', KEYS[1], 'd:' .. name, 'r:' .. name, 't:' .. name)
return { v[1], v[2], v[3] }
