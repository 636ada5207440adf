-- nack.lua: reports a failed delivery. The job is retried after the given delay or its
-- back-off, or goes dead when it has used every attempt.
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token   ARGV[3] delay ms, or -1 for the job's back-off
-- ARGV[4] reason ('' for none)
--
-- Returns: { OK, next due time ms } | { OK, -1 } when the job went dead | { LEASE_LOST }
--
-- Invariants: a stale token changes nothing; attempts is not changed here (the reserve
-- counted this delivery), so max attempts bounds deliveries.

local now = clock()
local id, token, delay = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local j = leased(id, token, now)
if not j then return { LEASE_LOST } end

redis.call('ZREM', K_LEASES, id)
if delay < 0 then delay = nil end
local ready_at = fail(id, j, now, delay, ARGV[4])
return { OK, ready_at or -1 }
