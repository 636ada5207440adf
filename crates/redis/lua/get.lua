-- get.lua: reads one job, after applying what is due (so its state is the one time gives
-- it, as in the embedded engine whose timers fire on time).
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] the most expired leases and due jobs to move first
--
-- Returns: {} when there is no such job (a done job that its topic's retention no longer
--          keeps is none), else the 5 values of emit (lease token 0: a read never reveals
--          a lease).
--
-- Invariants: writes only what any reserve would have written (tick).

local now = clock()
tick(now, tonumber(ARGV[2]))
local id = ARGV[1]
local rec = redis.call('HGET', K_JOBS, id)
local out = {}
if rec then
  local state, deadline = describe(id, { cmsgpack.unpack(rec) }, now)
  if state ~= P_DONE or still_kept(deadline, now, retention()) then
    emit(out, #out, id, rec, state, 0, deadline)
  end
end
return out
