-- schedule_pushed.lua: records that a schedule's fires up to a time were pushed (issue 14),
-- when the schedule is still at the revision the caller planned from and the time is later
-- than what it records.
--
-- KEYS[1]  the schedules hash (see schedule_put.lua)
-- ARGV[1]  the schedule's name
-- ARGV[2]  the revision the caller planned from
-- ARGV[3]  the fire time pushed through, ms
--
-- Returns: 1 when recorded, 0 when not (no such schedule, another revision, or a time not
--          later than the recorded one: another scheduler got there first).
--
-- Invariants: 't:<name>' only moves forward within one revision, and only for a schedule
-- that exists ('r:<name>' set).

local name = ARGV[1]
local rev = redis.call('HGET', KEYS[1], 'r:' .. name)
if not rev or rev ~= ARGV[2] then return 0 end
local through = tonumber(ARGV[3])
local cur = redis.call('HGET', KEYS[1], 't:' .. name)
if cur and tonumber(cur) >= through then return 0 end
redis.call('HSET', KEYS[1], 't:' .. name, ARGV[3])
return 1
