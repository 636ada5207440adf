-- ack.lua: acknowledges up to N deliveries of one topic; each acked job is removed, or kept
-- in done when the topic has a retention (config done_max and done_age).
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1]  N (1..1000)
-- ARGV[2 .. N+1]  the ids of the deliveries; ARGV[N+2 .. 2N+1]  their token fields (lib.lua's
--                 token_field); ARGV[2N+2 .. 3N+1]  their lease tokens, in the same order
--
-- Returns: { status per delivery }: OK, or when the token is not the job's live lease
--          LEASE_LOST (expired, already acked (done), redelivered), NOT_FOUND (no such job) or
--          { WRONG_STATE, public state } (never delivered since push, release or kick).
--
-- Invariants: a stale token changes nothing; a lease is live while now < deadline. The
-- caller never names one job twice in a call (delayq-redis sends such a batch as one call
-- per ack, in order), so the acks cannot depend on each other's order. The work is lib.lua's check_acks and drop_acked: no record is read,
-- the tokens come from one HMGET of jobs, the deadlines from the head of leases (or one
-- ZMSCORE when some lease has run out); the acked jobs leave leases with one ZREM, their
-- records and token fields leave jobs with one HDEL. With a retention (one HMGET of the
-- config tells), the records stay, the jobs go into done at now with one ZADD, and done is
-- trimmed to the retention's bounds.

local now = clock()
local n = tonumber(ARGV[1])
local out = {}
local _, acked = check_acks(ARGV, 1, n, now, out, 0)
drop_acked(ARGV, 1, n, acked, now)
return out
