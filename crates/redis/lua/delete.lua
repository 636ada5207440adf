-- delete.lua: removes a job in any state. A reserved job's lease is lost with it.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id
--
-- Returns: 1 when a job was deleted, 0 when there was none.
--
-- Invariants: the job leaves its set and the jobs hash together.

local id = ARGV[1]
local j = load(id)
if not j then return 0 end
unplace(id, j)
redis.call('HDEL', K_JOBS, id)
return 1
