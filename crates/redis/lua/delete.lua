-- delete.lua: removes a job in any state. A reserved job's lease is lost with it.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id
--
-- Returns: 1 when a job was deleted, 0 when there was none (a done job that its topic's
--          retention no longer keeps is none, as get.lua says: its record goes all the same).
--
-- Invariants: the job leaves its set and the jobs hash together.

local id = ARGV[1]
local j = load(id)
if not j then return 0 end
local done = redis.call('ZSCORE', K_DONE, id)
local forgotten = done and not still_kept(tonumber(done), clock(), retention())
unplace(id, j)
redis.call('HDEL', K_JOBS, id)
if forgotten then return 0 end
return 1
