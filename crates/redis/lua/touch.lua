-- touch.lua: extends a live lease to now + ttr.
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token   ARGV[3] ttr ms, or -1 for the job's own ttr
--
-- Returns: { OK, new deadline ms } | { LEASE_LOST }
--
-- Invariants: a stale or expired lease is not revived; the token stays the same.

local now = clock()
local id, token, ttr = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local j = leased(id, token, now)
if not j then return { LEASE_LOST } end

if ttr < 0 then ttr = j[F_TTR] end
j[F_DEADLINE] = now + ttr
redis.call('ZADD', K_LEASES, 'XX', j[F_DEADLINE], id)
store(id, j)
return { OK, j[F_DEADLINE] }
