-- ack.lua: acknowledges up to N deliveries of one topic; each acked job is removed.
--
-- KEYS: the nine topic keys of lib.lua.
-- ARGV[1]  N (1..1000)
-- ARGV[2i], ARGV[2i+1]  id and lease token of delivery i
--
-- Returns: { status per delivery }: OK, or LEASE_LOST when the token is not the job's live
--          lease (expired, already acked, redelivered, deleted).
--
-- Invariants: a stale token changes nothing; a lease is live while now < deadline; a
-- delivery listed twice in one call is acked once (the second answers LEASE_LOST). The work
-- is lib.lua's settle_many: no record is read, the tokens come from one HMGET of tokens,
-- the deadlines from the head of leases (or one ZMSCORE when some lease has run out); the
-- acked jobs leave leases, tokens and jobs with one call each.

local now = clock()
local n = tonumber(ARGV[1])
local items = {}
for i = 1, n do items[i] = { S_ACK, ARGV[2 * i], tonumber(ARGV[2 * i + 1]) } end
local statuses = settle_many(items, now)
return statuses
