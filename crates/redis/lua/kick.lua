-- kick.lua: makes dead jobs ready now with attempts reset to 0: one by id, or a bounded
-- batch of the oldest.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id, or '' to kick the oldest dead jobs   ARGV[2] the most to kick when ARGV[1] is ''
--
-- Returns: by id: { OK } | { NOT_FOUND } | { WRONG_STATE, public state }
--          batch: { OK, kicked, dead jobs left }
--
-- Invariants: only dead jobs move; the last error is kept for the record; an expiry that
-- has passed is cleared (the kicked job runs), one still ahead is kept.

local now = clock()

local function kick(id, j)
  redis.call('ZREM', K_DEAD, id)
  j[F_ATTEMPTS] = 0
  j[F_READY_AT] = now
  -- A kick is an order to run the job: an expiry that has passed no longer holds.
  if j[F_EXPIRES] > 0 and j[F_EXPIRES] <= now then j[F_EXPIRES] = 0 end
  place(id, j, now)
  store(id, j)
end

if ARGV[1] ~= '' then
  local id = ARGV[1]
  local j = load(id)
  if not j then return { NOT_FOUND } end
  if j[F_STATE] ~= DEAD then return { WRONG_STATE, public_state(id, j, now) } end
  kick(id, j)
  return { OK }
end

local ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
  local j = load(id)
  if j then kick(id, j) else redis.call('ZREM', K_DEAD, id) end
end
return { OK, #ids, redis.call('ZCARD', K_DEAD) }
