-- stats.lua: counts per state and the age of the oldest overdue job, after applying what is due.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] the most expired leases, due jobs and jobs past their expiry to move first
--
-- Returns: { now ms, delayed, ready, reserved, dead, oldest due time among due jobs (-1 =
--            none), earliest due time among delayed jobs (-1 = none), expired leases, done
--            jobs the retention still keeps, the end of the topic's pause (-1 = not paused;
--            NEVER: until resumed), jobs whose expiry passed before a delivery }
--
-- Invariants: writes only what any reserve would have written (tick, expire_due). The oldest ready job
-- is the head of one priority band; at most 64 bands are looked at, so with more distinct
-- priorities among ready jobs the age may be under-reported.

local now = clock()
tick(now, tonumber(ARGV[1]))
expire_due(now, tonumber(ARGV[1]))

local oldest = nil
local head = redis.call('ZRANGE', K_READY, 0, 0, 'WITHSCORES')
local bands = 0
while head[1] and bands < 64 do
  local due = tonumber(string.sub(head[1], 1, 13))
  if oldest == nil or due < oldest then oldest = due end
  bands = bands + 1
  head = redis.call('ZRANGE', K_READY, '(' .. head[2], '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
end
local delayed_head = head_score(K_DELAYED)
if delayed_head and delayed_head <= now and (oldest == nil or delayed_head < oldest) then
  oldest = delayed_head
end

local keep, done = retention(), 0
if keep then done = redis.call('ZCOUNT', K_DONE, '(' .. (now - keep[2]), '+inf') end

return {
  now,
  redis.call('ZCARD', K_DELAYED), redis.call('ZCARD', K_READY),
  redis.call('ZCARD', K_LEASES), redis.call('ZCARD', K_DEAD),
  oldest or -1, delayed_head or -1,
  tonumber(redis.call('HGET', K_COUNTERS, 'expired') or '0'),
  done,
  paused_until(now) or -1,
  tonumber(redis.call('HGET', K_COUNTERS, EXPIRED_JOBS) or '0'),
}
