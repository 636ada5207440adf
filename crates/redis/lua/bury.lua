-- bury.lua: sends a reserved job to dead at once, whatever attempts it has left.
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token   ARGV[3] reason ('' for none)
--
-- Returns: { OK } | { LEASE_LOST }
--
-- Invariants: a stale token changes nothing; a dead job stays until kicked, deleted or purged.

local now = clock()
local id, token = ARGV[1], tonumber(ARGV[2])
local j = leased(id, token, now)
if not j then return { LEASE_LOST } end

redis.call('ZREM', K_LEASES, id)
j[F_STATE] = DEAD
j[F_TOKEN] = 0
j[F_DEADLINE] = now
j[F_ERR] = ARGV[3]
redis.call('ZADD', K_DEAD, now, id)
store(id, j)
return { OK }
