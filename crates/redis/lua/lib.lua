-- lib.lua: helpers shared by every delayq function. library.rs assembles the Redis Functions
-- library at build time: this file first (it runs once per FUNCTION LOAD, so the helpers are
-- created once per load, not per call), then each lua/<op>.lua as the body of the function
-- delayq_<version>_<op>, whose parameters are KEYS and ARGV and which first calls
-- bind(KEYS). Everything here is local (Redis forbids globals).
--
-- KEYS (the same eight for every function; all carry the topic's hash tag, so one call
-- touches exactly one cluster slot):
--   KEYS[1] jobs     HASH  id -> record (cmsgpack, see FIELDS below)
--   KEYS[2] delayed  ZSET  id scored by due time (ms)
--   KEYS[3] ready    ZSET  "<due:13 digits><seq:16 digits><id>" scored by priority
--   KEYS[4] leases   ZSET  id scored by lease deadline (ms)
--   KEYS[5] dead     ZSET  id scored by time of death (ms)
--   KEYS[6] seq      STRING counter: push order and lease tokens
--   KEYS[7] wake     ZSET  one member "w" scored by the earliest time a waiter should look
--   KEYS[8] counters HASH  "expired" -> leases that ran out since creation or purge
--
-- Invariants kept by every function:
--   * a job id is in the jobs hash iff it is in exactly one of delayed, ready, leases, dead;
--   * the record's state is WAITING iff the job is in delayed or ready, RESERVED iff in
--     leases (with record deadline = score and a non-zero token), DEAD iff in dead;
--   * time comes only from redis.call('TIME'); no argument carries "now";
--   * every check that can refuse the call runs before the first write.

-- The keys of the current call, set by bind. Redis runs one function at a time, so these
-- shared upvalues always hold the running call's keys.
local K_JOBS, K_DELAYED, K_READY, K_LEASES, K_DEAD, K_SEQ, K_WAKE, K_COUNTERS

-- Binds the helpers to a call's KEYS; every function calls it first.
local function bind(keys)
  K_JOBS, K_DELAYED, K_READY, K_LEASES, K_DEAD, K_SEQ, K_WAKE, K_COUNTERS =
    keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8]
end

-- Status codes, mirrored by `Status` in codec.rs.
local OK, NOT_FOUND, LEASE_LOST, WRONG_STATE, INVALID_DELAY = 0, 1, 2, 3, 4

-- Stored states. Delayed and ready share WAITING: promotion then moves only sorted-set
-- members and never rewrites a record.
local WAITING, RESERVED, DEAD = 1, 3, 4
-- Public states, mirrored by codec.rs: 1 delayed, 2 ready, 3 reserved, 4 dead.
local P_DELAYED, P_READY = 1, 2

-- Record fields (positions in the cmsgpack sequence).
local F_STATE, F_PRIO, F_READY_AT, F_SEQ, F_TTR, F_MAX, F_ATTEMPTS = 1, 2, 3, 4, 5, 6, 7
local F_BO_BASE, F_BO_FACTOR, F_BO_MAX, F_BO_JITTER = 8, 9, 10, 11
local F_CREATED, F_TOKEN, F_DEADLINE, F_ERR, F_BODY = 12, 13, 14, 15, 16

-- 10 years of 365.25 days, as core's MAX_DELAY.
local MAX_DELAY_MS = 315576000000

-- Returns now in ms and in µs, from the Redis clock.
local function clock()
  local t = redis.call('TIME')
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  return sec * 1000 + math.floor(usec / 1000), sec * 1000000 + usec
end

-- Runs `cmd key <args>` in calls of at most 1000 arguments each (unpack and the Lua C stack
-- bound the arguments of one call). `args` is a flat list of whole items; `step` is the
-- number of arguments per item (1 for members or fields, 2 for score-member pairs).
local function call_many(cmd, key, args, step)
  local per = 1000 - (1000 % step)
  for i = 1, #args, per do
    redis.call(cmd, key, unpack(args, i, math.min(i + per - 1, #args)))
  end
end

-- The records of `ids` (one HMGET per 1000 ids), decoded; a missing record is false.
local function load_many(ids)
  local out = {}
  for i = 1, #ids, 1000 do
    local recs = redis.call('HMGET', K_JOBS, unpack(ids, i, math.min(i + 999, #ids)))
    for k = 1, #recs do
      local rec = recs[k]
      out[i + k - 1] = rec and { cmsgpack.unpack(rec) } or false
    end
  end
  return out
end

local function pack(j)
  return cmsgpack.pack(unpack(j, 1, F_BODY))
end

local function load(id)
  local rec = redis.call('HGET', K_JOBS, id)
  if not rec then return nil end
  return { cmsgpack.unpack(rec) }
end

local function store(id, j)
  redis.call('HSET', K_JOBS, id, pack(j))
end

local function ready_member(id, j)
  return string.format('%013d%016d', j[F_READY_AT], j[F_SEQ]) .. id
end

local function id_of_member(m)
  return string.sub(m, 30)
end

local function head_score(key)
  local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if h[2] then return tonumber(h[2]) end
  return nil
end

-- The earliest timed event of the topic: the first delayed due time or lease deadline.
local function timer_head()
  local a, b = head_score(K_DELAYED), head_score(K_LEASES)
  if a and b then return math.min(a, b) end
  return a or b
end

-- Tells one blocked waiter (any process) to look at time `at`. ZADD LT keeps the earliest.
local function signal(at)
  redis.call('ZADD', K_WAKE, 'LT', at, 'w')
end

-- Puts a WAITING job into ready (due) or delayed (not yet due), signalling a waiter when
-- this makes the topic's next event earlier. The caller stores the record.
local function place(id, j, now)
  j[F_STATE] = WAITING
  if j[F_READY_AT] <= now then
    if redis.call('ZCARD', K_READY) == 0 then signal(now) end
    redis.call('ZADD', K_READY, j[F_PRIO], ready_member(id, j))
  else
    local head = timer_head()
    redis.call('ZADD', K_DELAYED, j[F_READY_AT], id)
    if head == nil or j[F_READY_AT] < head then signal(j[F_READY_AT]) end
  end
end

-- Removes a job from whichever set holds it. The caller deletes or rewrites the record.
local function unplace(id, j)
  local st = j[F_STATE]
  if st == WAITING then
    if redis.call('ZREM', K_DELAYED, id) == 0 then
      redis.call('ZREM', K_READY, ready_member(id, j))
    end
  elseif st == RESERVED then
    redis.call('ZREM', K_LEASES, id)
  else
    redis.call('ZREM', K_DEAD, id)
  end
end

local function public_state(id, j)
  local st = j[F_STATE]
  if st == WAITING then
    if redis.call('ZSCORE', K_DELAYED, id) then return P_DELAYED end
    return P_READY
  end
  return st
end

-- The retry delay after `n` failed attempts: min(max, base * factor^(n-1)), reduced by up
-- to jitter of itself. Mirrors Backoff::delay in delayq-core.
local function backoff(j, n)
  local ms, cap, factor = math.min(j[F_BO_BASE], j[F_BO_MAX]), j[F_BO_MAX], j[F_BO_FACTOR]
  local i = 1
  while i < n and ms < cap and factor > 1 do
    ms = math.min(ms * factor, cap)
    i = i + 1
  end
  local jitter = ms * (j[F_BO_JITTER] / 1000) * math.random()
  return ms - math.floor(jitter)
end

-- A delivery failed (nack, or lease expired): retry after `delay` (or the back-off) or go
-- dead when every attempt is used. `j` must already be out of every set. Returns the new
-- due time, or nil when the job went dead.
local function fail(id, j, now, delay, reason)
  j[F_TOKEN] = 0
  j[F_ERR] = reason or ''
  if j[F_ATTEMPTS] >= j[F_MAX] then
    j[F_STATE] = DEAD
    j[F_DEADLINE] = now
    redis.call('ZADD', K_DEAD, now, id)
    store(id, j)
    return nil
  end
  j[F_READY_AT] = now + (delay or backoff(j, j[F_ATTEMPTS]))
  j[F_DEADLINE] = 0
  place(id, j, now)
  store(id, j)
  return j[F_READY_AT]
end

-- Applies what time has made due: expired leases fail ("lease expired"), due delayed jobs
-- move to ready; at most `limit` of each. Returns whether more may be left, and, when it
-- moved nothing, the unchanged delayed and lease heads (so callers need not read them
-- again).
local function tick(now, limit)
  local lease_head, delayed_head = head_score(K_LEASES), head_score(K_DELAYED)
  local expired, due = {}, {}
  if lease_head and lease_head <= now then
    expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now, 'LIMIT', 0, limit)
    for _, id in ipairs(expired) do
      redis.call('ZREM', K_LEASES, id)
      local j = load(id)
      if j then fail(id, j, now, nil, 'lease expired') end
    end
    if #expired > 0 then redis.call('HINCRBY', K_COUNTERS, 'expired', #expired) end
  end
  -- Read again: expired leases may have gone back to delayed with no back-off.
  if #expired > 0 then delayed_head = head_score(K_DELAYED) end
  if delayed_head and delayed_head <= now then
    due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', now, 'LIMIT', 0, limit)
    if #due > 0 then
      -- The due jobs are exactly the first #due ranks: removed in one call.
      redis.call('ZREMRANGEBYRANK', K_DELAYED, 0, #due - 1)
      local js, pairs_ = load_many(due), {}
      for i, id in ipairs(due) do
        local j = js[i]
        if j then
          pairs_[#pairs_ + 1] = j[F_PRIO]
          pairs_[#pairs_ + 1] = ready_member(id, j)
        end
      end
      call_many('ZADD', K_READY, pairs_, 2)
    end
  end
  local more = #expired == limit or #due == limit
  if #expired == 0 and #due == 0 then return more, true, delayed_head, lease_head end
  return more, false
end

-- Checks that (id, token) is the job's live lease at `now`; returns the record or nil.
local function holds_lease(j, token, now)
  return j and j[F_STATE] == RESERVED and j[F_TOKEN] == token and j[F_DEADLINE] > now
end

local function leased(id, token, now)
  local j = load(id)
  if holds_lease(j, token, now) then return j end
  return nil
end

-- Settlement kinds, mirrored by `SettleKind` in codec.rs.
local S_ACK, S_NACK, S_BURY, S_RELEASE = 1, 2, 3, 4

-- Settles one delivery at `now`: ack (removed), nack (retry after `delay` ms or the back-off,
-- or dead when attempts are used up), bury (dead now with `reason`) or release (ready again
-- at its due time, the attempt not counted). Returns a status (OK or LEASE_LOST) and a value:
-- for a nack, the new due time or -1 when the job went dead; 0 otherwise. The one place each
-- settlement is written, used by ack, nack, bury, release and reserve's settlements.
local function settle(kind, id, token, delay, reason, now)
  local j = leased(id, token, now)
  if not j then return LEASE_LOST, 0 end
  redis.call('ZREM', K_LEASES, id)
  if kind == S_ACK then
    redis.call('HDEL', K_JOBS, id)
    return OK, 0
  elseif kind == S_NACK then
    if delay < 0 then delay = nil end
    return OK, fail(id, j, now, delay, reason) or -1
  elseif kind == S_BURY then
    j[F_STATE] = DEAD
    j[F_TOKEN] = 0
    j[F_DEADLINE] = now
    j[F_ERR] = reason
    redis.call('ZADD', K_DEAD, now, id)
    store(id, j)
    return OK, 0
  end
  j[F_ATTEMPTS] = math.max(j[F_ATTEMPTS] - 1, 0)
  j[F_TOKEN] = 0
  j[F_DEADLINE] = 0
  place(id, j, now)
  store(id, j)
  return OK, 0
end

-- Appends a job to a reply: 17 values (id, public state, record fields 2..16), decoded by
-- codec.rs `decode_job`. Never nil: Redis would cut the reply at the first nil.
local function emit(out, id, j, pstate)
  local n = #out
  out[n + 1] = id
  out[n + 2] = pstate
  for f = F_PRIO, F_BODY do out[n + f + 1] = j[f] end
end
