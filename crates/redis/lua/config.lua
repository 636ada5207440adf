-- config.lua: reads the topic's settings.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV: none
--
-- Returns: { one value per field of lib.lua's CONFIG_FIELDS, in order (nil when unset) }
--
-- Invariants: writes nothing.

return redis.call('HMGET', K_CONFIG, unpack(CONFIG_FIELDS))
