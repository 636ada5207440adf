-- configure.lua: replaces the topic's settings whole.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1 .. 10] one value per field of lib.lua's CONFIG_FIELDS, in order: ttr ms, max
--               attempts, back-off base ms, factor, max ms, jitter permille, max body bytes,
--               the most done jobs kept, how long they are kept (ms), partitions ('' = unset)
--
-- Returns: OK, or { PARTITIONS_IN_USE, the topic's partition count } when the call would
-- change the partition count of a topic that holds jobs (then nothing was changed).
--
-- Invariants: the purge count stays, and so do the jobs that are not done (each keeps the
-- settings it was pushed with); the done jobs are trimmed to the new retention at once (all
-- of them go when it is unset), at most the old retention's max_jobs (100,000) of work.
-- The values were validated by delayq-core, the back-off's four and the retention's two
-- set together or not at all, so only a change of the partition count can be refused: the
-- topic's jobs (any state, done ones included: all are in `jobs`) were placed by it.

local now = clock()
local had = tonumber(redis.call('HGET', K_CONFIG, 'partitions')) or 1
if had ~= (tonumber(ARGV[C_PARTITIONS]) or 1) and redis.call('EXISTS', K_JOBS) == 1 then
  return { PARTITIONS_IN_USE, had }
end

redis.call('HDEL', K_CONFIG, unpack(CONFIG_FIELDS))
local set, k = {}, 0
for i = 1, #CONFIG_FIELDS do
  if ARGV[i] ~= '' then
    set[k + 1], set[k + 2] = CONFIG_FIELDS[i], ARGV[i]
    k = k + 2
  end
end
if k > 0 then redis.call('HSET', K_CONFIG, unpack(set)) end
local keep = nil
if ARGV[C_DONE_MAX] ~= '' then keep = { tonumber(ARGV[C_DONE_MAX]), tonumber(ARGV[C_DONE_AGE]) } end
trim_done(now, keep, -1)
return OK
