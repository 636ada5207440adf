-- purge.lua: removes every job of the topic in every state.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV: none
--
-- Returns: the number of jobs removed (done ones included).
--
-- Invariants: the counters restart from zero; the seq counter is kept, so lease tokens stay
-- fresh after a purge (a token from before the purge can never match a later lease); the
-- config is kept, and its purge count goes up by one, so that every process's next push
-- answers a count it has not registered the topic under (push.lua) and puts the topic back
-- in the registry. UNLINK frees memory off the main thread, so a purge of millions of jobs
-- does not stall Redis.

-- jobs holds a record per job (done ones too) and a token field per leased job.
local n = redis.call('HLEN', K_JOBS) - redis.call('ZCARD', K_LEASES)
redis.call('UNLINK', K_JOBS, K_DELAYED, K_READY, K_LEASES, K_DEAD, K_WAKE, K_COUNTERS, K_DONE,
  K_EXPIRING)
redis.call('HINCRBY', K_CONFIG, 'purges', 1)
return n
