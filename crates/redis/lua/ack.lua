-- ack.lua: acknowledges up to N deliveries of one topic; each acked job is removed.
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1]  N
-- ARGV[2i], ARGV[2i+1]  id and lease token of delivery i
--
-- Returns: { status per delivery }: OK, or LEASE_LOST when the token is not the job's live
--          lease (expired, already acked, redelivered, deleted).
--
-- Invariants: a stale token changes nothing; a lease is live while now < deadline.

local now = clock()
local out = {}
for i = 1, tonumber(ARGV[1]) do
  local id, token = ARGV[2 * i], tonumber(ARGV[2 * i + 1])
  if leased(id, token, now) then
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', K_JOBS, id)
    out[i] = OK
  else
    out[i] = LEASE_LOST
  end
end
return out
