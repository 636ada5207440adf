-- lib.lua: helpers shared by every delayq function. library.rs assembles the Redis Functions
-- library at build time: this file first (it runs once per FUNCTION LOAD, so the helpers are
-- created once per load, not per call), then each lua/<op>.lua as the body of the function
-- delayq_<version>_<op>, whose parameters are KEYS and ARGV and which first calls
-- bind(KEYS). Everything here is local (Redis forbids globals).
--
-- KEYS (the same nine for every function; all carry the topic's hash tag, so one call
-- touches exactly one cluster slot):
--   KEYS[1] jobs     HASH  id -> record (cmsgpack, see the F_ fields below; codec.rs decodes
--                          it too, so a change of fields is a change of both)
--   KEYS[2] delayed  ZSET  id scored by due time (ms)
--   KEYS[3] ready    ZSET  "<due:13 digits><seq:16 digits><id>" scored by priority
--   KEYS[4] leases   ZSET  id scored by lease deadline (ms)
--   KEYS[5] dead     ZSET  id scored by time of death (ms)
--   KEYS[6] seq      STRING counter: push order and lease tokens
--   KEYS[7] wake     ZSET  one member "w" scored by the earliest time a waiter should look
--   KEYS[8] counters HASH  "expired" -> leases that ran out since creation or purge
--   KEYS[9] tokens   HASH  id -> lease token, for each leased job
--
-- The lease (token, deadline) is not in the record: it is the job's entries in tokens and
-- leases, so settling checks two small fields instead of decoding the record, and a reserve
-- writes no record. The record counts the attempts that have ended; a leased job's current
-- attempt is its lease, so its public attempts are the record's plus one.
--
-- Invariants kept by every function:
--   * a job id is in the jobs hash iff it is in exactly one of delayed, ready, leases, dead;
--   * a job id is in tokens iff it is in leases;
--   * the record's state is DEAD iff the job is in dead, else WAITING (delayed, ready or
--     leased: the sets say which);
--   * time comes only from redis.call('TIME'); no argument carries "now";
--   * every check that can refuse the call runs before the first write.

-- The keys of the current call, set by bind. Redis runs one function at a time, so these
-- shared upvalues always hold the running call's keys.
local K_JOBS, K_DELAYED, K_READY, K_LEASES, K_DEAD, K_SEQ, K_WAKE, K_COUNTERS, K_TOKENS

-- Binds the helpers to a call's KEYS; every function calls it first.
local function bind(keys)
  K_JOBS, K_DELAYED, K_READY, K_LEASES, K_DEAD, K_SEQ, K_WAKE, K_COUNTERS, K_TOKENS =
    keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8], keys[9]
end

-- Status codes, mirrored by `Status` in codec.rs.
local OK, NOT_FOUND, LEASE_LOST, WRONG_STATE, INVALID_DELAY = 0, 1, 2, 3, 4

-- Stored states: WAITING (delayed, ready or leased) and DEAD. Promotion, reserve and release
-- then move only sorted-set members and never rewrite a record.
local WAITING, DEAD = 1, 4
-- Public states, mirrored by codec.rs: 1 delayed, 2 ready, 3 reserved, 4 dead.
local P_DELAYED, P_READY, P_RESERVED, P_DEAD = 1, 2, 3, 4

-- Record fields (positions in the cmsgpack sequence). F_ATTEMPTS counts ended attempts.
local F_STATE, F_PRIO, F_READY_AT, F_SEQ, F_TTR, F_MAX, F_ATTEMPTS = 1, 2, 3, 4, 5, 6, 7
local F_BO_BASE, F_BO_FACTOR, F_BO_MAX, F_BO_JITTER = 8, 9, 10, 11
local F_CREATED, F_ERR, F_BODY = 12, 13, 14

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

-- The stored records of `ids` as they are (one HMGET per 1000 ids); a missing one is false.
local function raw_many(ids)
  local out = {}
  for i = 1, #ids, 1000 do
    local recs = redis.call('HMGET', K_JOBS, unpack(ids, i, math.min(i + 999, #ids)))
    for k = 1, #recs do out[i + k - 1] = recs[k] end
  end
  return out
end

-- The records of `ids` (one HMGET per 1000 ids), decoded; a missing record is false.
local function load_many(ids)
  local out = raw_many(ids)
  for i = 1, #ids do
    local rec = out[i]
    out[i] = rec and { cmsgpack.unpack(rec) } or false
  end
  return out
end

-- A stored record's ttr, decoding only the fields up to it (never the body): a reserve
-- needs nothing else from the records it hands out. unpack_limit answers the offset first.
local function ttr_of(rec)
  return (select(F_TTR + 1, cmsgpack.unpack_limit(rec, F_TTR)))
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

-- Ends a job's lease: out of leases and tokens. The caller rewrites, places or deletes it.
local function drop_lease(id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_TOKENS, id)
end

-- Removes a job from whichever set holds it. The caller deletes or rewrites the record.
local function unplace(id, j)
  if j[F_STATE] == DEAD then
    redis.call('ZREM', K_DEAD, id)
  elseif redis.call('ZREM', K_DELAYED, id) == 0
    and redis.call('ZREM', K_READY, ready_member(id, j)) == 0 then
    drop_lease(id)
  end
end

-- The public state of a stored job, and its deadline: the lease's while reserved, the time
-- of death while dead, else 0.
local function describe(id, j)
  if j[F_STATE] == DEAD then
    return P_DEAD, tonumber(redis.call('ZSCORE', K_DEAD, id) or '0')
  end
  local deadline = redis.call('ZSCORE', K_LEASES, id)
  if deadline then return P_RESERVED, tonumber(deadline) end
  if redis.call('ZSCORE', K_DELAYED, id) then return P_DELAYED, 0 end
  return P_READY, 0
end

local function public_state(id, j)
  return (describe(id, j))
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

-- A delivery failed (nack, or lease expired): the attempt ends; retry after `delay` (or the
-- back-off) or go dead when every attempt is used. `j` must already be out of every set.
-- Returns the new due time, or nil when the job went dead.
local function fail(id, j, now, delay, reason)
  j[F_ATTEMPTS] = j[F_ATTEMPTS] + 1
  j[F_ERR] = reason or ''
  if j[F_ATTEMPTS] >= j[F_MAX] then
    j[F_STATE] = DEAD
    redis.call('ZADD', K_DEAD, now, id)
    store(id, j)
    return nil
  end
  j[F_READY_AT] = now + (delay or backoff(j, j[F_ATTEMPTS]))
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
    if #expired > 0 then
      -- The expired leases are exactly the first #expired ranks: removed in one call.
      redis.call('ZREMRANGEBYRANK', K_LEASES, 0, #expired - 1)
      call_many('HDEL', K_TOKENS, expired, 1)
      local js = load_many(expired)
      for i, id in ipairs(expired) do
        if js[i] then fail(id, js[i], now, nil, 'lease expired') end
      end
      redis.call('HINCRBY', K_COUNTERS, 'expired', #expired)
    end
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

-- True when (id, token) is a live lease at `now`: the token is the job's in tokens and the
-- deadline in leases is later than now. Reads two small fields, never the record.
local function live_lease(id, token, now)
  local t = redis.call('HGET', K_TOKENS, id)
  if not t or tonumber(t) ~= token then return false end
  local deadline = redis.call('ZSCORE', K_LEASES, id)
  return deadline ~= false and tonumber(deadline) > now
end

-- Settlement kinds, mirrored by `codec::settle_kind`.
local S_ACK, S_NACK, S_BURY, S_RELEASE = 1, 2, 3, 4

-- Settles deliveries at `now`, in order. `items[i]` is { kind, id, token, delay, reason }:
-- ack (removed), nack (the attempt ends: retry after `delay` ms, or the back-off when delay
-- < 0, or dead when attempts are used up), bury (the attempt ends: dead now with `reason`)
-- or release (ready again at its due time, the attempt not counted, the record untouched).
-- Returns two lists: a status per item (OK, or LEASE_LOST when (id, token) is not a live
-- lease: expired, settled, redelivered, deleted, or settled earlier in this same call) and
-- a value per item (for a nack, the new due time or -1 when the job went dead; else 0).
--
-- The one place each settlement is written (ack, nack, bury, release and reserve's
-- settlements all come here). The leases are checked with one HMGET of tokens for the
-- whole list (and one ZMSCORE of leases, only when some lease has run out: the head of
-- leases says), never by decoding a record, and the acked jobs
-- leave leases, tokens and jobs with one call each at the end (they are removed, so no
-- later item or the reserve that follows can see them in between).
local function settle_many(items, now)
  local ids = {}
  for i, it in ipairs(items) do ids[i] = it[2] end
  local statuses, values = {}, {}
  if #ids == 0 then return statuses, values end
  local tokens = redis.call('HMGET', K_TOKENS, unpack(ids))
  -- When the earliest deadline is later than now, every lease in leases is live, so a
  -- matching token is enough: one ZRANGE of the head instead of a ZMSCORE of every id (whose
  -- scores Redis formats as text and Lua parses back).
  local head = head_score(K_LEASES)
  local deadlines = false
  if head and head <= now then deadlines = redis.call('ZMSCORE', K_LEASES, unpack(ids)) end
  local done, acked = {}, {}
  for i, it in ipairs(items) do
    local id, kind = ids[i], it[1]
    local status, value = LEASE_LOST, 0
    local live = not done[id] and tokens[i] and tonumber(tokens[i]) == it[3]
      and (not deadlines or (deadlines[i] and tonumber(deadlines[i]) > now))
    local j = live and kind ~= S_ACK and load(id)
    if live and kind == S_ACK then
      acked[#acked + 1] = id
      status = OK
    elseif j then
      drop_lease(id)
      status = OK
      if kind == S_NACK then
        local delay = it[4]
        if delay < 0 then delay = nil end
        value = fail(id, j, now, delay, it[5]) or -1
      elseif kind == S_BURY then
        j[F_ATTEMPTS] = j[F_ATTEMPTS] + 1
        j[F_STATE] = DEAD
        j[F_ERR] = it[5]
        redis.call('ZADD', K_DEAD, now, id)
        store(id, j)
      else
        -- Release: the attempt does not count and the due time is the original one, so the
        -- record is unchanged: the job only goes back to its place in ready.
        place(id, j, now)
      end
    end
    if status == OK then done[id] = true end
    statuses[i], values[i] = status, value
  end
  call_many('ZREM', K_LEASES, acked, 1)
  call_many('HDEL', K_TOKENS, acked, 1)
  call_many('HDEL', K_JOBS, acked, 1)
  return statuses, values
end

-- Settles one delivery (settle_many of one item); returns its status and value.
local function settle(kind, id, token, delay, reason, now)
  local statuses, values = settle_many({ { kind, id, token, delay, reason } }, now)
  return statuses[1], values[1]
end

-- Appends a job to a reply: 5 values (id, public state, lease token, deadline, the stored
-- record as it is), decoded by codec.rs `decode_job`, which decodes the record's msgpack:
-- Lua never decodes a record only to re-encode it as a reply. The deadline is the lease's
-- while reserved, the time of death while dead, else 0. Never nil: Redis would cut the
-- reply at the first nil.
local function emit(out, id, rec, pstate, token, deadline)
  local n = #out
  out[n + 1] = id
  out[n + 2] = pstate
  out[n + 3] = token
  out[n + 4] = deadline
  out[n + 5] = rec
end
