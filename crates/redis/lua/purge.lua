-- purge.lua: removes every job of the topic in every state.
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV: none
--
-- Returns: the number of jobs removed.
--
-- Invariants: the counters restart from zero; the seq counter is kept, so lease tokens stay fresh after a purge (a token
-- from before the purge can never match a later lease). UNLINK frees memory off the main
-- thread, so a purge of millions of jobs does not stall Redis.

-- jobs holds a record per job and a token field per leased job.
local n = redis.call('HLEN', K_JOBS) - redis.call('ZCARD', K_LEASES)
redis.call('UNLINK', K_JOBS, K_DELAYED, K_READY, K_LEASES, K_DEAD, K_WAKE, K_COUNTERS)
return n
