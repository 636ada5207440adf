-- release.lua: gives a delivery back without counting it: the job is ready again at once,
-- at its original due time, with attempts lowered by one (graceful shutdown uses this).
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token
--
-- Returns: { OK, 0 } | { LEASE_LOST, 0 }
--
-- Invariants: a stale token changes nothing; the job keeps its place in the ready order.
-- The work is lib.lua's settle.

local now = clock()
local status = settle(S_RELEASE, ARGV[1], tonumber(ARGV[2]), -1, '', now)
return { status, 0 }
