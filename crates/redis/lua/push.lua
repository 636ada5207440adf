-- push.lua: creates up to N jobs of one topic, idempotent on id, filling what a job leaves
-- unset from the topic's settings (config), else from the built-in defaults.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1]  N, the number of jobs
-- ARGV[2 .. 7]  the built-in defaults: ttr ms, max attempts, back-off base ms, factor, max ms,
--               jitter permille (delayq-core's, sent so that they live in one place)
-- ARGV[8]  T, the number of distinct per-job settings in this call (0 when every job leaves
--          them to the topic and keeps an existing job), then 10 values per settings t
--          (base = 8 + (t-1)*10): +1 ttr ms  +2 max attempts  +3 back-off base ms  +4 factor
--          +5 max ms  +6 jitter permille ('' for ttr, max attempts or the back-off's four:
--          unset, the topic's default applies)  +7 on conflict: 0 keep, 1 replace, 2 debounce
--          +8 the debounce's max wait ms ('' = none)  +9 expiry: '' none, a max lateness in
--          ms when >= 0 (counted from the due time), else the absolute expiry -1 - value ms
--          +10 on expire: 0 dead, 1 drop
-- then 5 values per job i (base = 8 + 10T + (i-1)*5):
--   +1 id   +2 body   +3 when: a delay in ms when >= 0, else the absolute due time -1 - when ms
--   +4 priority   +5 settings: t (1..T), or 0 for none
--   (so a job costs five arguments: most batches share one set of settings, sent once)
-- ARGV[#ARGV]  the partition count the caller routed these jobs by (its jobs all hash to
--              this partition under that count: delayq-core's partition_of)
--
-- Returns: { OK, the partition's purge count (config "purges"), then per job: created (1),
--            kept (0) or replaced (2), public state, due time ms }
--          { WRONG_PARTITIONS, the partition count this partition holds } when it is not the
--            count the caller routed by (negative: a change to that many is under way,
--            ops/config.rs); nothing was written, the caller routes again
--          { INVALID_DELAY, index of the first job whose absolute time is over 10 years ahead }
--          { BODY_TOO_LARGE, index of the first job whose body is over the topic's limit,
--            that limit }
--          { INVALID_EXPIRY, index of the first job whose absolute expiry is not after the
--            due time this push would give it (it could never run) }
--
-- Invariants: a job is stored only in a partition that holds the count its caller routed it
-- by, and such a partition is one of the topic's current partitions (ops/config.rs: every
-- change of the count writes every partition of the old count and of the new one); a
-- live id is never created twice (an existing job, in any state but done, is
-- left untouched and reported with created = 0, unless its push says replace or debounce and
-- the job is waiting, delayed or ready: then its record is rewritten with the push's body,
-- due time and options, its attempts, creation time and last error kept, and it is placed
-- anew (replaced = 2); a reserved or dead job is never touched; a done job holds no id: a
-- push of its id replaces its record with the new job's and takes it out of done); a
-- debounced job is due at most its max wait after its creation; a duplicate later in the same batch sees the
-- first one; every absolute time and every body (against the topic's max_body) is checked
-- before the first write (an absolute expiry against the due time too); a job with an
-- expiry is in expiring while it waits; the due time is max(requested, now) on the Redis clock
-- for an absolute time, and now rounded up to the ms plus the delay for a delay (due_in); a job's
-- own settings win over the topic's, which are read in this call (one HMGET), so every
-- process applies the same. Everything else was validated by delayq-core (the engine's own
-- body limit too). The purge count lets the caller put the topic back in the registry (a
-- key of no topic's slot, which no function writes) when it was purged since the caller last
-- registered it.

local now = clock()
local n = tonumber(ARGV[1])
local t = tonumber(ARGV[8])
local jobs_at = 8 + 10 * t
local config, purges = settings()
local max_body = config[C_MAX_BODY]
local holds = config[C_PARTITIONS] or 1
if holds ~= tonumber(ARGV[#ARGV]) then
  return { WRONG_PARTITIONS, holds }
end

-- The due time of job i's `when` argument (a delay, or an absolute time encoded below -1),
-- and whether it was absolute.
local whens = {}
for i = 1, n do
  local b = jobs_at + (i - 1) * 5
  local when = tonumber(ARGV[b + 3])
  if when < 0 and -1 - when > now + MAX_DELAY_MS then
    return { INVALID_DELAY, i }
  end
  if max_body and #ARGV[b + 2] > max_body then
    return { BODY_TOO_LARGE, i, max_body }
  end
  local k = tonumber(ARGV[b + 5])
  local expiry = k > 0 and tonumber(ARGV[8 + (k - 1) * 10 + 9])
  if expiry and expiry < 0 then
    local due = due_in(now, when)
    if when < 0 then due = math.max(-1 - when, now) end
    if -1 - expiry <= due then return { INVALID_EXPIRY, i } end
  end
  whens[i] = when
end

-- What a job that leaves a setting unset gets: the topic's, else the built-in default.
local ttr = config[C_TTR] or tonumber(ARGV[2])
local max_attempts = config[C_MAX] or tonumber(ARGV[3])
local backoff = { tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]) }
if config[C_BO_BASE] then
  backoff = { config[C_BO_BASE], config[C_BO_FACTOR], config[C_BO_MAX], config[C_BO_JITTER] }
end
-- The call's distinct per-job settings, resolved once: { ttr, max attempts, back-off, on
-- conflict, max wait, expiry (nil: none), on expire }.
local own = {}
for k = 1, t do
  local b = 8 + (k - 1) * 10
  local bo = backoff
  if ARGV[b + 3] ~= '' then
    bo = { tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]),
      tonumber(ARGV[b + 6]) }
  end
  own[k] = { tonumber(ARGV[b + 1]) or ttr, tonumber(ARGV[b + 2]) or max_attempts, bo,
    tonumber(ARGV[b + 7]), tonumber(ARGV[b + 8]), tonumber(ARGV[b + 9]),
    tonumber(ARGV[b + 10]) }
end
local plain = { ttr, max_attempts, backoff, 0, nil, nil, 0 }
local function settings_of(i)
  return own[tonumber(ARGV[jobs_at + (i - 1) * 5 + 5])] or plain
end

local ids = {}
for i = 1, n do ids[i] = ARGV[jobs_at + 1 + (i - 1) * 5] end
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
  if not new_ids[ids[i]] then
    local j = existing[i]
    -- A new job, or one its push may replace (if it turns out leased, its number is unused).
    if not j or (settings_of(i)[4] ~= 0 and j[F_STATE] == WAITING) then fresh = fresh + 1 end
    new_ids[ids[i]] = true
  end
end
local seq = 0
if fresh > 0 then seq = redis.call('INCRBY', K_SEQ, fresh) - fresh end
-- Signals a waiter when `at` is earlier than the topic's next timed event so far.
local function earlier(at)
  if head == nil or at < head then
    signal(at)
    head = at
  end
end
local records, delayed, ready, expiring, seen = {}, {}, {}, {}, {}
local r, d, w, x = 0, 0, 0, 0
-- The public state of a job created by this call.
local function new_state(j)
  if j[F_READY_AT] <= now then return P_READY end
  return P_DELAYED
end
local out, m = { OK, purges }, 2
for i = 1, n do
  local b = jobs_at + (i - 1) * 5
  local id = ids[i]
  local j = seen[id] or existing[i]
  local s = settings_of(i)
  -- Replace or debounce a waiting job: out of delayed or ready first (neither holds a
  -- leased job, which then stays as it is).
  local replace = j and not seen[id] and s[4] ~= 0 and j[F_STATE] == WAITING
    and (redis.call('ZREM', K_DELAYED, id) == 1
      or redis.call('ZREM', K_READY, ready_member(id, j)) == 1)
  if replace and j[F_EXPIRES] > 0 then redis.call('ZREM', K_EXPIRING, id) end
  if j and not replace then
    out[m + 1] = 0
    if seen[id] then
      out[m + 2] = new_state(j)
    else
      out[m + 2] = public_state(id, j, now)
    end
    out[m + 3] = j[F_READY_AT]
  else
    local when = whens[i]
    local ready_at
    if when < 0 then ready_at = math.max(-1 - when, now) else ready_at = due_in(now, when) end
    if replace and s[4] == 2 and s[5] then
      ready_at = math.max(math.min(ready_at, j[F_CREATED] + s[5]), now)
    end
    local bo = s[3]
    seq = seq + 1
    local attempts, created, err = 0, now, ''
    if replace then attempts, created, err = j[F_ATTEMPTS], j[F_CREATED], j[F_ERR] end
    local expires = 0
    if s[6] then
      if s[6] >= 0 then expires = ready_at + s[6] else expires = -1 - s[6] end
    end
    j = {
      WAITING, tonumber(ARGV[b + 4]), ready_at, seq,
      s[1], s[2], attempts,
      bo[1], bo[2], bo[3], bo[4],
      created, err, ARGV[b + 2], expires, s[7],
    }
    if expires > 0 then
      earlier(expires)
      expiring[x + 1] = expires
      expiring[x + 2] = id
      x = x + 2
    end
    seen[id] = j
    if ready_at <= now then
      if ready_empty then
        signal(now)
        ready_empty = false
      end
      ready[r + 1] = j[F_PRIO]
      ready[r + 2] = ready_member(id, j)
      r = r + 2
    else
      earlier(ready_at)
      delayed[d + 1] = ready_at
      delayed[d + 2] = id
      d = d + 2
    end
    records[w + 1] = id
    records[w + 2] = pack(j)
    w = w + 2
    out[m + 1] = replace and 2 or 1
    out[m + 2] = new_state(j)
    out[m + 3] = ready_at
  end
  m = m + 3
end
call_many('ZREM', K_DONE, revived, 1)
call_many('ZADD', K_READY, ready, 2)
call_many('ZADD', K_DELAYED, delayed, 2)
call_many('ZADD', K_EXPIRING, expiring, 2)
call_many('HSET', K_JOBS, records, 2)
return out
