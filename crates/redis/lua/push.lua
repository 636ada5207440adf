-- push.lua: creates up to N jobs of one topic, idempotent on id, filling what a job leaves
-- unset from the topic's settings (config), else from the built-in defaults.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1]  N, the number of jobs
-- ARGV[2 .. 7]  the built-in defaults: ttr ms, max attempts, back-off base ms, factor, max ms,
--               jitter permille (delayq-core's, sent so that they live in one place)
-- then 11 values per job i (base = 7 + (i-1)*11):
--   +1 id   +2 body   +3 schedule kind (0 = delay ms, 1 = absolute ms)   +4 schedule value
--   +5 priority   +6 ttr ms   +7 max attempts
--   +8 backoff base ms   +9 backoff factor   +10 backoff max ms   +11 backoff jitter permille
--   ('' for ttr, max attempts or the back-off's four: unset, the topic's default applies)
--
-- Returns: { OK, the topic's purge count (config "purges"), then per job: created (1|0),
--            public state, due time ms }
--          { INVALID_DELAY, index of the first job whose absolute time is over 10 years ahead }
--          { BODY_TOO_LARGE, index of the first job whose body is over the topic's limit,
--            that limit }
--
-- Invariants: a live id is never created twice (an existing job, in any state but done, is
-- left untouched and reported with created = 0; a done job holds no id: a push of its id
-- replaces its record with the new job's and takes it out of done); a duplicate later in the same batch sees the
-- first one; every absolute time and every body (against the topic's max_body) is checked
-- before the first write; the due time is max(requested, now) on the Redis clock; a job's
-- own settings win over the topic's, which are read in this call (one HMGET), so every
-- process applies the same. Everything else was validated by delayq-core (the engine's own
-- body limit too). The purge count lets the caller put the topic back in the registry (a
-- key of no topic's slot, which no function writes) when it was purged since the caller last
-- registered it.

local now = clock()
local n = tonumber(ARGV[1])
local config, purges = settings()
local max_body = config[C_MAX_BODY]

for i = 1, n do
  local b = 7 + (i - 1) * 11
  if ARGV[b + 3] == '1' and tonumber(ARGV[b + 4]) > now + MAX_DELAY_MS then
    return { INVALID_DELAY, i }
  end
  if max_body and #ARGV[b + 2] > max_body then
    return { BODY_TOO_LARGE, i, max_body }
  end
end

-- What a job that leaves a setting unset gets: the topic's, else the built-in default.
local ttr = config[C_TTR] or tonumber(ARGV[2])
local max_attempts = config[C_MAX] or tonumber(ARGV[3])
local backoff = { tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]) }
if config[C_BO_BASE] then
  backoff = { config[C_BO_BASE], config[C_BO_FACTOR], config[C_BO_MAX], config[C_BO_JITTER] }
end

local ids = {}
for i = 1, n do ids[i] = ARGV[8 + (i - 1) * 11] end
local existing = load_many(ids)
-- A done job holds no id: the new job takes its place (only ids that exist are looked at).
local revived = {}
for i = 1, n do
  if existing[i] and redis.call('ZSCORE', K_DONE, ids[i]) then
    existing[i] = false
    revived[#revived + 1] = ids[i]
  end
end
-- The topic's timer head and whether ready was empty, read once and kept up to date here,
-- so that a new earliest event is signalled without reading the heads again per job.
local head, ready_empty = timer_head(), redis.call('ZCARD', K_READY) == 0
-- Push order: one INCRBY for the jobs this call creates (none: the counter is untouched).
local fresh, new_ids = 0, {}
for i = 1, n do
  if not existing[i] and not new_ids[ids[i]] then
    new_ids[ids[i]] = true
    fresh = fresh + 1
  end
end
local seq = 0
if fresh > 0 then seq = redis.call('INCRBY', K_SEQ, fresh) - fresh end
local records, delayed, ready, seen = {}, {}, {}, {}
-- The public state of a job created by this call.
local function new_state(j)
  if j[F_READY_AT] <= now then return P_READY end
  return P_DELAYED
end
local out = { OK, purges }
for i = 1, n do
  local b = 7 + (i - 1) * 11
  local id = ids[i]
  local j = seen[id] or existing[i]
  if j then
    out[#out + 1] = 0
    if seen[id] then
      out[#out + 1] = new_state(j)
    else
      out[#out + 1] = public_state(id, j)
    end
    out[#out + 1] = j[F_READY_AT]
  else
    local value = tonumber(ARGV[b + 4])
    local ready_at
    if ARGV[b + 3] == '1' then ready_at = math.max(value, now) else ready_at = now + value end
    local bo = backoff
    if ARGV[b + 8] ~= '' then
      bo = { tonumber(ARGV[b + 8]), tonumber(ARGV[b + 9]), tonumber(ARGV[b + 10]),
        tonumber(ARGV[b + 11]) }
    end
    j = {
      WAITING, tonumber(ARGV[b + 5]), ready_at, seq + 1,
      tonumber(ARGV[b + 6]) or ttr, tonumber(ARGV[b + 7]) or max_attempts, 0,
      bo[1], bo[2], bo[3], bo[4],
      now, '', ARGV[b + 2],
    }
    seq = seq + 1
    seen[id] = j
    if ready_at <= now then
      if ready_empty then
        signal(now)
        ready_empty = false
      end
      ready[#ready + 1] = j[F_PRIO]
      ready[#ready + 1] = ready_member(id, j)
    else
      if head == nil or ready_at < head then
        signal(ready_at)
        head = ready_at
      end
      delayed[#delayed + 1] = ready_at
      delayed[#delayed + 1] = id
    end
    records[#records + 1] = id
    records[#records + 1] = pack(j)
    out[#out + 1] = 1
    out[#out + 1] = new_state(j)
    out[#out + 1] = ready_at
  end
end
call_many('ZREM', K_DONE, revived, 1)
call_many('ZADD', K_READY, ready, 2)
call_many('ZADD', K_DELAYED, delayed, 2)
call_many('HSET', K_JOBS, records, 2)
return out
