-- bury_waiting.lua: sends a delayed or ready job to dead now, without a lease (an
-- operator's "move to dead"), with a reason; its attempts stay as they are.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] reason ('' for none)
--
-- Returns: { OK } | { NOT_FOUND } | { WRONG_STATE, public state }
--
-- Invariants: only a delayed or ready job moves (a reserved one is buried by its holder with
-- its lease, bury.lua; a dead or done one is refused), checked before any write; unplace
-- takes it out of delayed or ready and out of expiring, so a dead job is never swept by
-- expire_due; the record's state is DEAD iff the job is in dead.

local now = clock()
local id, reason = ARGV[1], ARGV[2]

local j = load(id)
if not j then return { NOT_FOUND } end
local state = public_state(id, j, now)
if state ~= P_DELAYED and state ~= P_READY then return { WRONG_STATE, state } end

unplace(id, j)
j[F_STATE] = DEAD
j[F_ERR] = reason
redis.call('ZADD', K_DEAD, now, id)
store(id, j)
return { OK }
