-- touch.lua: extends a live lease to now + ttr.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] lease token   ARGV[3] ttr ms, or -1 for the job's own ttr
--
-- Returns: { OK, new deadline ms } | a refusal:
--   refusal: { LEASE_LOST, 0 } (the lease existed and is gone) | { NOT_FOUND, 0 } (no such
--   job) | { WRONG_STATE, public state } (not reserved, no delivery since it was pushed,
--   released or kicked); see lib.lua's refusal
--
-- Invariants: a stale or expired lease is not revived; the token stays the same; only the
-- lease's deadline (its score in leases) changes, never the record.

local now = clock()
local id, token, ttr = ARGV[1], ARGV[2], tonumber(ARGV[3])
if not live_lease(id, token, now) then return { refusal(id, now) } end
if ttr < 0 then
  local j = load(id)
  if not j then return { NOT_FOUND, 0 } end
  ttr = j[F_TTR]
end
local deadline = now + ttr
redis.call('ZADD', K_LEASES, 'XX', deadline, id)
return { OK, deadline }
