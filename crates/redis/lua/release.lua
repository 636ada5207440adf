-- release.lua: gives a delivery back without counting it: the job is ready again at once,
-- at its original due time, the attempt not counted (graceful shutdown uses this); or, with
-- a delay, due that long from now; with a priority, it keeps that priority from now on
-- (beanstalkd's `release <id> <pri> <delay>`).
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token   ARGV[3] delay ms (-1 or 0: its original due time)
-- ARGV[4] priority (-1: unchanged)
--
-- Returns: { OK, 0 } | a refusal:
--   refusal: { LEASE_LOST, 0 } (the lease existed and is gone) | { NOT_FOUND, 0 } (no such
--   job) | { WRONG_STATE, public state } (not reserved, no delivery since it was pushed,
--   released or kicked); see lib.lua's refusal
--
-- Invariants: a stale token changes nothing; the attempt is not counted; without a delay or a
-- priority the job keeps its place in the ready order and the record is not rewritten (only
-- the lease ended). The work is lib.lua's settle.

local now = clock()
local status, value = settle(S_RELEASE, ARGV[1], ARGV[2], tonumber(ARGV[3] or '-1'), '', now,
  tonumber(ARGV[4] or '-1'))
return { status, value }
