-- reschedule.lua: moves a delayed or ready job to a new due time, keeping its id, push
-- order and attempts.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] kind (0 = delay ms, 1 = absolute ms)   ARGV[3] value
--
-- Returns: { OK, new due time ms, public state } | { NOT_FOUND } | { WRONG_STATE, public state }
--          | { INVALID_DELAY }
--
-- Invariants: reserved and dead jobs are refused (use nack or kick); the absolute time is
-- checked against the Redis clock before any write; the due time is max(requested, now).

local now = clock()
local id, kind, value = ARGV[1], ARGV[2], tonumber(ARGV[3])
if kind == '1' and value > now + MAX_DELAY_MS then return { INVALID_DELAY } end

local j = load(id)
if not j then return { NOT_FOUND } end
local state = public_state(id, j, now)
if state ~= P_DELAYED and state ~= P_READY then return { WRONG_STATE, state } end

unplace(id, j)
if kind == '1' then j[F_READY_AT] = math.max(value, now) else j[F_READY_AT] = due_in(now, value) end
place(id, j, now)
store(id, j)
return { OK, j[F_READY_AT], public_state(id, j, now) }
