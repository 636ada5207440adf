-- bury.lua: sends a reserved job to dead at once, whatever attempts it has left.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token   ARGV[3] reason ('' for none)
-- ARGV[4] priority (-1: unchanged; a kick makes it ready with this one)
--
-- Returns: { OK, 0 } | a refusal:
--   refusal: { LEASE_LOST, 0 } (the lease existed and is gone) | { NOT_FOUND, 0 } (no such
--   job) | { WRONG_STATE, public state } (not reserved, no delivery since it was pushed,
--   released or kicked); see lib.lua's refusal
--
-- Invariants: a stale token changes nothing; the attempt ends (attempts + 1); a dead job
-- stays until kicked, deleted or purged. The work is lib.lua's settle.

local now = clock()
local status, value = settle(S_BURY, ARGV[1], ARGV[2], -1, ARGV[3], now, tonumber(ARGV[4] or '-1'))
return { status, value }
