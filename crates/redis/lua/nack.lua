-- nack.lua: reports a failed delivery. The job is retried after the given delay or its
-- back-off, or goes dead when it has used every attempt.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token   ARGV[3] delay ms, or -1 for the job's back-off
-- ARGV[4] reason ('' for none)
--
-- Returns: { OK, next due time ms } | { OK, -1 } when the job went dead | a refusal:
--   refusal: { LEASE_LOST, 0 } (the lease existed and is gone) | { NOT_FOUND, 0 } (no such
--   job) | { WRONG_STATE, public state } (not reserved, no delivery since it was pushed,
--   released or kicked); see lib.lua's refusal
--
-- Invariants: a stale token changes nothing; the attempt ends here (the record's attempts
-- + 1), so max attempts bounds deliveries. The work is lib.lua's settle.

local now = clock()
local status, ready_at = settle(S_NACK, ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], now)
return { status, ready_at }
