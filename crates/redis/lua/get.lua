-- get.lua: reads one job, after applying what is due (so its state is the one time gives
-- it, as in the embedded engine whose timers fire on time).
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] the most expired leases and due jobs to move first
--
-- Returns: {} when there is no such job, else the 17 values of emit.
--
-- Invariants: writes only what any reserve would have written (tick).

local now = clock()
tick(now, tonumber(ARGV[2]))
local id = ARGV[1]
local j = load(id)
local out = {}
if j then emit(out, id, j, public_state(id, j)) end
return out
