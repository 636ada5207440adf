-- release.lua: gives a delivery back without counting it: the job is ready again at once,
-- at its original due time, with attempts lowered by one (graceful shutdown uses this).
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token
--
-- Returns: { OK } | { LEASE_LOST }
--
-- Invariants: a stale token changes nothing; the job keeps its place in the ready order.

local now = clock()
local id, token = ARGV[1], tonumber(ARGV[2])
local j = leased(id, token, now)
if not j then return { LEASE_LOST } end

redis.call('ZREM', K_LEASES, id)
j[F_ATTEMPTS] = math.max(j[F_ATTEMPTS] - 1, 0)
j[F_TOKEN] = 0
j[F_DEADLINE] = 0
place(id, j, now)
store(id, j)
return { OK }
