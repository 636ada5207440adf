-- configure.lua: replaces the topic's settings whole.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1 .. 7]  one value per field of lib.lua's CONFIG_FIELDS, in order: ttr ms, max
--               attempts, back-off base ms, factor, max ms, jitter permille, max body bytes
--               ('' = unset)
--
-- Returns: OK
--
-- Invariants: only the settings change: the purge count stays, and so do the jobs (each
-- keeps the settings it was pushed with). The values were validated by delayq-core, the
-- back-off's four set together or not at all, so there is nothing to refuse.

redis.call('HDEL', K_CONFIG, unpack(CONFIG_FIELDS))
local set, k = {}, 0
for i = 1, #CONFIG_FIELDS do
  if ARGV[i] ~= '' then
    set[k + 1], set[k + 2] = CONFIG_FIELDS[i], ARGV[i]
    k = k + 2
  end
end
if k > 0 then redis.call('HSET', K_CONFIG, unpack(set)) end
return OK
