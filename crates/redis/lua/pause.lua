-- pause.lua: pauses a topic until a time, or ends its pause (issue 14).
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1]  the end of the pause, ms on the Redis clock (lib.lua's NEVER: until resumed); a
--          time not after now ends the pause
--
-- Returns: { OK, the end now in force (0 = not paused) }
--          { INVALID_DELAY } when the end is more than 10 years ahead but not NEVER
--
-- Invariants: the pause lives in the config hash ('paused_until', ms), which a configure
-- keeps and a purge keeps, like the purge count; reserve.lua reads it. Ending or shortening
-- a pause signals the topic's waiters (they wake and look again); a longer pause signals
-- nothing (they find it at their next look).

local now = clock()
local untl = tonumber(ARGV[1])
if untl ~= NEVER and untl > now + MAX_DELAY_MS then return { INVALID_DELAY } end
local old = tonumber(redis.call('HGET', K_CONFIG, 'paused_until'))
if untl <= now then
  redis.call('HDEL', K_CONFIG, 'paused_until')
  if old then signal(now) end
  return { OK, 0 }
end
redis.call('HSET', K_CONFIG, 'paused_until', untl)
if old and untl < old then signal(now) end
return { OK, untl }
