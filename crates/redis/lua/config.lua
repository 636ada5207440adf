-- config.lua: reads the topic's settings, and the clock of the primary that holds them.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV: none
--
-- Returns: { one value per field of lib.lua's CONFIG_FIELDS, in order (nil when unset),
--            then this Redis's TIME: seconds, microseconds }
--
-- Invariants: writes nothing. The time is the clock the topic's push calls check due times
-- and expiries against, so a batch push checked with it before its calls (several slots'
-- primaries, each read apart) checks each topic's jobs against their own primary's clock.

local out = redis.call('HMGET', K_CONFIG, unpack(CONFIG_FIELDS))
local t = redis.call('TIME')
out[#CONFIG_FIELDS + 1] = t[1]
out[#CONFIG_FIELDS + 2] = t[2]
return out
