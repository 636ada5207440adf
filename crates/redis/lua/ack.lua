-- ack.lua: acknowledges up to N deliveries of one topic; each acked job is removed.
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1]  N
-- ARGV[2i], ARGV[2i+1]  id and lease token of delivery i
--
-- Returns: { status per delivery }: OK, or LEASE_LOST when the token is not the job's live
--          lease (expired, already acked, redelivered, deleted).
--
-- Invariants: a stale token changes nothing; a lease is live while now < deadline; a
-- delivery listed twice in one call is acked once (the second answers LEASE_LOST). The
-- records are read with one HMGET and removed with one ZREM and one HDEL per 1000 ids.

local now = clock()
local n = tonumber(ARGV[1])
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i] end
local js, out, done, acked = load_many(ids), {}, {}, {}
for i = 1, n do
  local id = ids[i]
  -- The same delivery twice in one call: the second finds it already acked.
  if not done[id] and holds_lease(js[i], tonumber(ARGV[2 * i + 1]), now) then
    done[id] = true
    acked[#acked + 1] = id
    out[i] = OK
  else
    out[i] = LEASE_LOST
  end
end
call_many('ZREM', K_LEASES, acked, 1)
call_many('HDEL', K_JOBS, acked, 1)
return out
