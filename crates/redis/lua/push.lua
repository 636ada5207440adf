-- push.lua: creates up to N jobs of one topic, idempotent on id.
--
-- KEYS: the eight topic keys of lib.lua.
-- ARGV[1]  N, the number of jobs
-- then 11 values per job i (base = 1 + (i-1)*11):
--   +1 id   +2 body   +3 schedule kind (0 = delay ms, 1 = absolute ms)   +4 schedule value
--   +5 priority   +6 ttr ms   +7 max attempts
--   +8 backoff base ms   +9 backoff factor   +10 backoff max ms   +11 backoff jitter permille
--
-- Returns: { OK, then per job: created (1|0), public state, due time ms }
--          { INVALID_DELAY, index of the first job whose absolute time is over 10 years ahead }
--
-- Invariants: a live id is never created twice (an existing job, in any state, is left
-- untouched and reported with created = 0); a duplicate later in the same batch sees the
-- first one; every absolute time is checked before the first write; the due time is
-- max(requested, now) on the Redis clock. Everything else was validated by delayq-core.

local now = clock()
local n = tonumber(ARGV[1])

for i = 1, n do
  local b = 1 + (i - 1) * 11
  if ARGV[b + 3] == '1' and tonumber(ARGV[b + 4]) > now + MAX_DELAY_MS then
    return { INVALID_DELAY, i }
  end
end

local out = { OK }
for i = 1, n do
  local b = 1 + (i - 1) * 11
  local id = ARGV[b + 1]
  local j = load(id)
  if j then
    out[#out + 1] = 0
    out[#out + 1] = public_state(id, j)
    out[#out + 1] = j[F_READY_AT]
  else
    local value = tonumber(ARGV[b + 4])
    local ready_at
    if ARGV[b + 3] == '1' then ready_at = math.max(value, now) else ready_at = now + value end
    j = {
      WAITING, tonumber(ARGV[b + 5]), ready_at, redis.call('INCR', K_SEQ),
      tonumber(ARGV[b + 6]), tonumber(ARGV[b + 7]), 0,
      tonumber(ARGV[b + 8]), tonumber(ARGV[b + 9]), tonumber(ARGV[b + 10]), tonumber(ARGV[b + 11]),
      now, 0, 0, '', ARGV[b + 2],
    }
    place(id, j, now)
    store(id, j)
    out[#out + 1] = 1
    out[#out + 1] = public_state(id, j)
    out[#out + 1] = ready_at
  end
end
return out
