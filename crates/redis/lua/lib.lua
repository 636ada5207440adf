-- lib.lua: helpers shared by every delayq function. library.rs assembles the Redis Functions
-- library at build time: this file first (it runs once per FUNCTION LOAD, so the helpers are
-- created once per load, not per call), then each lua/<op>.lua as the body of the function
-- delayq_<version>_<op>, whose parameters are KEYS and ARGV and which first calls
-- bind(KEYS). Everything here is local (Redis forbids globals). library.rs also gives each
-- function its flags: the ones that create no job are `allow-oom`, so that a Redis at
-- maxmemory still serves reads and lets a queue drain; push and the settings answer OOM.
--
-- KEYS (the same ten for every function; all carry the topic's hash tag, so one call
-- touches exactly one cluster slot):
--   KEYS[1] jobs     HASH  id -> record (cmsgpack, see the F_ fields below; codec.rs decodes
--                          it too, so a change of fields is a change of both), and for each
--                          leased job " <id>" (a space, then the id) -> its lease token
--   KEYS[2] delayed  ZSET  id scored by due time (ms)
--   KEYS[3] ready    ZSET  "<due:13 digits><seq:16 digits><id>" scored by priority
--   KEYS[4] leases   ZSET  id scored by lease deadline (ms)
--   KEYS[5] dead     ZSET  id scored by time of death (ms)
--   KEYS[6] seq      STRING counter: push order and lease tokens, never behind the clock
--                          in µs when it gives tokens (fresh_tokens)
--   KEYS[7] wake     ZSET  one member "w" scored by the earliest time a waiter should look
--   KEYS[8] counters HASH  "expired" -> leases that ran out since creation or purge
--   KEYS[9] config   HASH  the topic's settings (CONFIG_FIELDS below), kept by purge;
--                          "purges" -> how many times the topic was purged (push answers
--                          it, so that every process puts the topic back in the registry
--                          after a purge)
--   KEYS[10] done    ZSET  id scored by the time of its ack (ms): the done jobs the topic's
--                          retention keeps, whose records stay in jobs as they were
--   KEYS[11] expiring ZSET id scored by its expiry (ms), for each waiting (delayed or
--                          ready, not leased) job that has one: what expire_due sweeps
--
-- The lease (token, deadline) is not in the record: it is the job's token field in jobs and
-- its entry in leases, so settling checks two small fields instead of decoding the record,
-- and a reserve writes no record. The token lives in jobs rather than in a hash of its own:
-- an ack then deletes the record and the token with one HDEL, and the tokens never sit in a
-- small hash, which Redis keeps as a listpack (up to hash-max-listpack-entries, 512 on Redis
-- 8) where every lookup and insert scans the whole list. The record counts the attempts
-- that have ended; a leased job's current attempt is its lease, so its public attempts are
-- the record's plus one.
--
-- Invariants kept by every function:
--   * a job id is in the jobs hash iff it is in exactly one of delayed, ready, leases, dead,
--     done;
--   * a job id has a token field in jobs iff it is in leases, so HLEN jobs counts the jobs
--     plus the leased ones;
--   * the record's state is DEAD iff the job is in dead, else WAITING (delayed, ready, leased
--     or done: the sets say which; a done job's record is the one it was leased with, so
--     its public attempts are the record's plus one, as a leased job's);
--   * done holds at most the retention's max_jobs ids, and none without a retention;
--   * a job id is in expiring iff its record has an expiry and it is in delayed or ready;
--     a job whose expiry has passed is never leased (expire_due and the reserve's check);
--   * a lease token is greater than every token the topic handed out before, even after a
--     failover or restart that lost writes (fresh_tokens);
--   * time comes only from redis.call('TIME'); no argument carries "now"; a due time asked
--     as a delay is now rounded up to the millisecond plus the delay (due_in): never early;
--   * every check that can refuse the call runs before the first write.

-- The keys of the current call, set by bind. Redis runs one function at a time, so these
-- shared upvalues always hold the running call's keys.
local K_JOBS, K_DELAYED, K_READY, K_LEASES, K_DEAD, K_SEQ, K_WAKE, K_COUNTERS, K_CONFIG, K_DONE
local K_EXPIRING

-- Binds the helpers to a call's KEYS; every function calls it first.
local function bind(keys)
  K_JOBS, K_DELAYED, K_READY, K_LEASES, K_DEAD, K_SEQ, K_WAKE, K_COUNTERS, K_CONFIG, K_DONE =
    keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8], keys[9], keys[10]
  K_EXPIRING = keys[11]
end

-- The field of jobs that holds a leased job's token: a space, then the id. A space is not
-- in the id alphabet, so it never names a record. delayq-redis builds the same names for
-- the acks it sends (ops::lease::token_field).
local function token_field(id)
  return ' ' .. id
end

-- Status codes, mirrored by `Status` in codec.rs.
local OK, NOT_FOUND, LEASE_LOST, WRONG_STATE, INVALID_DELAY, BODY_TOO_LARGE = 0, 1, 2, 3, 4, 5
local INVALID_EXPIRY, PARTITIONS_IN_USE, WRONG_PARTITIONS = 6, 7, 8

-- The topic's settings: fields of the config hash, in the order configure.lua takes them and
-- config.lua answers them (mirrored by ops::config), at the C_ positions. A missing field is
-- unset: the built-in default (or the engine's body limit) applies. The four back-off fields
-- are set together or not at all.
-- The retention's two fields are set together or not at all too. 'partitions' is the topic's
-- partition count (unset: 1), which changes only while the topic holds no job; every
-- partition holds a copy of the settings, and while a change of the count to n is under way
-- the partitions hold -n (ops/config.rs), which every push refuses.
local CONFIG_FIELDS = { 'ttr', 'max_attempts', 'bo_base', 'bo_factor', 'bo_max', 'bo_jitter',
  'max_body', 'done_max', 'done_age', 'partitions' }
local C_TTR, C_MAX, C_BO_BASE, C_BO_FACTOR, C_BO_MAX, C_BO_JITTER, C_MAX_BODY = 1, 2, 3, 4, 5, 6, 7
local C_DONE_MAX, C_DONE_AGE, C_PARTITIONS = 8, 9, 10

-- The topic's settings (numbers at the C_ positions, nil when unset) and its purge count,
-- with one HMGET of the config hash.
local function settings()
  local v = redis.call('HMGET', K_CONFIG, 'purges', unpack(CONFIG_FIELDS))
  local c = {}
  for i = 1, #CONFIG_FIELDS do c[i] = tonumber(v[i + 1]) end
  return c, tonumber(v[1]) or 0
end

-- Stored states: WAITING (delayed, ready or leased) and DEAD. Promotion, reserve and release
-- then move only sorted-set members and never rewrite a record.
local WAITING, DEAD = 1, 4
-- Public states, mirrored by codec.rs: 1 delayed, 2 ready, 3 reserved, 4 dead, 5 done.
local P_DELAYED, P_READY, P_RESERVED, P_DEAD, P_DONE = 1, 2, 3, 4, 5

-- Record fields (positions in the cmsgpack sequence). F_ATTEMPTS counts ended attempts.
-- F_EXPIRES is the job's expiry in ms (0: none), F_ON_EXPIRE what it does then (0: dead with
-- the reason "expired", 1: dropped); they come after the body, so records written before
-- they existed (14 fields) still read: load and load_many fill them with 0.
local F_STATE, F_PRIO, F_READY_AT, F_SEQ, F_TTR, F_MAX, F_ATTEMPTS = 1, 2, 3, 4, 5, 6, 7
local F_BO_BASE, F_BO_FACTOR, F_BO_MAX, F_BO_JITTER = 8, 9, 10, 11
local F_CREATED, F_ERR, F_BODY, F_EXPIRES, F_ON_EXPIRE = 12, 13, 14, 15, 16

-- The reason of a job that went dead because its expiry passed (delayq-core's EXPIRED).
local EXPIRED_REASON = 'expired'
-- The counter (in counters) of jobs whose expiry passed before a delivery.
local EXPIRED_JOBS = 'expired_jobs'

-- A decoded record with the fields a 14-field record lacks.
local function complete(j)
  if j[F_EXPIRES] == nil then j[F_EXPIRES], j[F_ON_EXPIRE] = 0, 0 end
  return j
end

-- 10 years of 365.25 days, as core's MAX_DELAY.
local MAX_DELAY_MS = 315576000000

-- "Never" (2^53 - 1 ms), as core's Timestamp::NEVER: the end of a pause until resumed.
local NEVER = 9007199254740991

-- The end of the topic's pause when it is paused at `now` (pause.lua), else nil.
local function paused_until(now)
  local untl = tonumber(redis.call('HGET', K_CONFIG, 'paused_until'))
  if untl and untl > now then return untl end
  return nil
end

-- The µs past the current call's now in ms (set by clock), for due_in.
local NOW_SUB_MS = 0

-- Returns now in ms and in µs, from the Redis clock.
local function clock()
  local t = redis.call('TIME')
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  NOW_SUB_MS = usec % 1000
  return sec * 1000 + math.floor(usec / 1000), sec * 1000000 + usec
end

-- The due time of a job asked for `delay` ms after `now` (the call's clock, in ms): now
-- rounded up to the millisecond, plus the delay, so that it is never before now + the delay
-- at µs resolution; a delay of 0 (or less) is due at now. Mirrors delayq-core's due_after.
local function due_in(now, delay)
  if delay <= 0 then return now end
  if NOW_SUB_MS > 0 then return now + 1 + delay end
  return now + delay
end

-- Takes n fresh values of the topic's counter (seq) for lease tokens; answers the base: the
-- values are base+1 .. base+n. The counter is first raised to the Redis clock in µs when it
-- is behind it, so a token is never below the clock of the call that made it. The counter
-- only grows one by one far slower than the clock (a topic hands out well under a million
-- tokens a second), so a token is at most the clock of its call plus the tokens of a few
-- calls. A failover or restart that lost writes can leave the counter behind tokens that
-- were handed out; those were below the old node's clock when it stopped, and the node that
-- goes on does so after a failover's or restart's length on its own clock, so its tokens are
-- greater (clocks kept in step within that length, as NTP keeps them). Two commands (GET,
-- SET) where one INCRBY did not fence: push order still takes INCRBY (push.lua); it needs
-- no fence, and it only raises the counter.
local function fresh_tokens(n, now_us)
  local base = tonumber(redis.call('GET', K_SEQ) or 0)
  if base < now_us then base = now_us end
  redis.call('SET', K_SEQ, base + n)
  return base
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
    out[i] = rec and complete({ cmsgpack.unpack(rec) }) or false
  end
  return out
end

-- A stored record's ttr, decoding only the fields up to it (never the body): a reserve
-- needs nothing else from the records it hands out. unpack_limit answers the offset first.
local function ttr_of(rec)
  return (select(F_TTR + 1, cmsgpack.unpack_limit(rec, F_TTR)))
end

local function pack(j)
  return cmsgpack.pack(unpack(j, 1, F_ON_EXPIRE))
end

local function load(id)
  local rec = redis.call('HGET', K_JOBS, id)
  if not rec then return nil end
  return complete({ cmsgpack.unpack(rec) })
end

local function store(id, j)
  redis.call('HSET', K_JOBS, id, pack(j))
end

-- A job's member in ready: its due time and push order as fixed-width digits, then its id,
-- so that members of one priority sort by due time, then push order.
local function member_of(id, ready_at, seq)
  return string.format('%013d%016d%s', ready_at, seq, id)
end

local function ready_member(id, j)
  return member_of(id, j[F_READY_AT], j[F_SEQ])
end

local function id_of_member(m)
  return string.sub(m, 30)
end

local function head_score(key)
  local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if h[2] then return tonumber(h[2]) end
  return nil
end

-- The earliest timed event of the topic: the first delayed due time, lease deadline or
-- expiry of a waiting job.
local function timer_head()
  local a, b, c = head_score(K_DELAYED), head_score(K_LEASES), head_score(K_EXPIRING)
  local h = a
  if b and (h == nil or b < h) then h = b end
  if c and (h == nil or c < h) then h = c end
  return h
end

-- Tells one blocked waiter (any process) to look at time `at`. ZADD LT keeps the earliest.
local function signal(at)
  redis.call('ZADD', K_WAKE, 'LT', at, 'w')
end

-- Puts a WAITING job into ready (due) or delayed (not yet due), and into expiring when it
-- has an expiry, signalling a waiter when this makes the topic's next event earlier. The
-- caller stores the record.
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
  if j[F_EXPIRES] > 0 then
    local head = head_score(K_EXPIRING)
    redis.call('ZADD', K_EXPIRING, j[F_EXPIRES], id)
    if head == nil or j[F_EXPIRES] < head then signal(j[F_EXPIRES]) end
  end
end

-- Ends a job's lease: out of leases, its token field gone. The caller rewrites, places or
-- deletes it.
local function drop_lease(id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_JOBS, token_field(id))
end

-- Removes a job from whichever set holds it (and from expiring). The caller deletes or
-- rewrites the record.
local function unplace(id, j)
  if j[F_EXPIRES] > 0 then redis.call('ZREM', K_EXPIRING, id) end
  if j[F_STATE] == DEAD then
    redis.call('ZREM', K_DEAD, id)
  elseif redis.call('ZREM', K_DELAYED, id) == 0
    and redis.call('ZREM', K_READY, ready_member(id, j)) == 0
    and redis.call('ZREM', K_DONE, id) == 0 then
    drop_lease(id)
  end
end

-- A waiting job whose expiry passed, already out of delayed, ready and expiring: dead with
-- the reason "expired" at `now` (its attempts as they were), or deleted when it says drop.
-- The caller counts it (count_expired).
local function expire(id, j, now)
  if j[F_ON_EXPIRE] == 1 then
    redis.call('HDEL', K_JOBS, id)
    return
  end
  j[F_STATE] = DEAD
  j[F_ERR] = EXPIRED_REASON
  redis.call('ZADD', K_DEAD, now, id)
  store(id, j)
end

local function count_expired(n)
  if n > 0 then redis.call('HINCRBY', K_COUNTERS, EXPIRED_JOBS, n) end
end

-- Expires at most `limit` waiting jobs whose expiry is at or before `now` (the earliest
-- first). Answers whether the limit left some behind. One ZRANGE of a missing key is all a
-- topic without expiring jobs pays.
local function expire_due(now, limit)
  local ids = redis.call('ZRANGE', K_EXPIRING, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  if #ids == 0 then return false end
  -- They are exactly the first #ids ranks.
  redis.call('ZREMRANGEBYRANK', K_EXPIRING, 0, #ids - 1)
  local js = load_many(ids)
  for i, id in ipairs(ids) do
    local j = js[i]
    if j then
      if redis.call('ZREM', K_DELAYED, id) == 0 then
        redis.call('ZREM', K_READY, ready_member(id, j))
      end
      expire(id, j, now)
    end
  end
  count_expired(#ids)
  return #ids == limit
end

-- The topic's retention of done jobs: the most kept and for how long (ms), or nil when it
-- keeps none. One HMGET: what an ack pays when the topic keeps none.
local function retention()
  local v = redis.call('HMGET', K_CONFIG, 'done_max', 'done_age')
  if not v[1] then return nil end
  return { tonumber(v[1]), tonumber(v[2]) }
end

-- The most done jobs that outlived their age an ack removes: a done job is never shown
-- once it has (reads check its age), so its removal only has to keep pace with the acks.
local DONE_TRIM = 1000

-- True when a job done at `at` is still kept at `now` under retention `keep` (nil: none).
local function still_kept(at, now, keep)
  return keep ~= nil and at > now - keep[2]
end

-- Removes done jobs beyond retention `keep` at `now` (nil: every one): at most `limit` that
-- outlived its age (oldest first), then as many of the oldest as are over its count (at most
-- the ids acked since the last trim, or a configure's lowering). Records and done entries go
-- together.
local function trim_done(now, keep, limit)
  local gone = {}
  if keep == nil then
    gone = redis.call('ZRANGE', K_DONE, 0, -1)
  else
    local old = redis.call('ZRANGEBYSCORE', K_DONE, '-inf', now - keep[2], 'LIMIT', 0, limit)
    local over = redis.call('ZCARD', K_DONE) - #old - keep[1]
    if over > 0 then
      gone = redis.call('ZRANGE', K_DONE, 0, #old + over - 1)
    else
      gone = old
    end
  end
  if #gone == 0 then return end
  -- The oldest are exactly the first #gone ranks.
  redis.call('ZREMRANGEBYRANK', K_DONE, 0, #gone - 1)
  call_many('HDEL', K_JOBS, gone, 1)
end

-- The public state at `now` of a job in delayed: ready once its due time has passed (a tick
-- may not have moved it yet), as in the embedded engine, where time alone makes a job due.
local function waiting_state(id, now)
  local due = redis.call('ZSCORE', K_DELAYED, id)
  if not due then return nil end
  if tonumber(due) <= now then return P_READY end
  return P_DELAYED
end

-- The public state of a stored job at `now`, and its deadline: the lease's while reserved,
-- the time of death while dead, the time of its ack while done, else 0.
local function describe(id, j, now)
  if j[F_STATE] == DEAD then
    return P_DEAD, tonumber(redis.call('ZSCORE', K_DEAD, id) or '0')
  end
  local deadline = redis.call('ZSCORE', K_LEASES, id)
  if deadline then return P_RESERVED, tonumber(deadline) end
  local waiting = waiting_state(id, now)
  if waiting then return waiting, 0 end
  local done = redis.call('ZSCORE', K_DONE, id)
  if done then return P_DONE, tonumber(done) end
  return P_READY, 0
end

local function public_state(id, j, now)
  return (describe(id, j, now))
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
  j[F_READY_AT] = due_in(now, delay or backoff(j, j[F_ATTEMPTS]))
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
      local fields = {}
      for i = 1, #expired do fields[i] = token_field(expired[i]) end
      call_many('HDEL', K_JOBS, fields, 1)
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
      local recs, pairs_, k = raw_many(due), {}, 0
      for i = 1, #due do
        local rec = recs[i]
        if rec then
          -- Only the fields up to the push order are decoded, never the body.
          local _, _, prio, ready_at, seq = cmsgpack.unpack_limit(rec, F_SEQ)
          pairs_[k + 1] = prio
          pairs_[k + 2] = member_of(due[i], ready_at, seq)
          k = k + 2
        end
      end
      call_many('ZADD', K_READY, pairs_, 2)
    end
  end
  local more = #expired == limit or #due == limit
  if #expired == 0 and #due == 0 then return more, true, delayed_head, lease_head end
  return more, false
end

-- True when a stored token (a string from a token field, or false) is the token a caller gave (an
-- ARGV string). Both are Lua strings, interned, so the usual case is one pointer compare;
-- the numeric compare covers a stored form that differs from the caller's decimal digits.
local function same_token(stored, given)
  return stored and (stored == given or tonumber(stored) == tonumber(given))
end

-- Why a lease of `id` that is not live was refused, as a status and a value: NOT_FOUND (no
-- such job), LEASE_LOST (the job is leased under another token or past its deadline, it is
-- done (acked), or it has been delivered since it was pushed, released or kicked: the
-- caller's lease existed and is gone) or WRONG_STATE with the job's public state (it has no
-- delivery to settle; its state at `now`). Only refusals come here, so reading and decoding
-- the record costs nothing on the hot path.
local function refusal(id, now)
  local rec = redis.call('HGET', K_JOBS, id)
  if not rec then return NOT_FOUND, 0 end
  if redis.call('ZSCORE', K_LEASES, id) then return LEASE_LOST, 0 end
  if redis.call('ZSCORE', K_DONE, id) then return LEASE_LOST, 0 end
  local _, state, _, _, _, _, _, attempts = cmsgpack.unpack_limit(rec, F_ATTEMPTS)
  if attempts > 0 then return LEASE_LOST, 0 end
  if state == DEAD then return WRONG_STATE, P_DEAD end
  return WRONG_STATE, waiting_state(id, now) or P_READY
end

-- A refusal as one reply value: the status, or for WRONG_STATE the pair { WRONG_STATE,
-- public state } (codec.rs `settle_status` reads both forms).
local function refusal_value(id, now)
  local status, pstate = refusal(id, now)
  if status == WRONG_STATE then return { status, pstate } end
  return status
end

-- True when (id, token) is a live lease at `now`: the token is the job's token field and the
-- deadline in leases is later than now. Reads two small fields, never the record.
local function live_lease(id, token, now)
  if not same_token(redis.call('HGET', K_JOBS, token_field(id)), token) then return false end
  local deadline = redis.call('ZSCORE', K_LEASES, id)
  return deadline ~= false and tonumber(deadline) > now
end

-- Settlement kinds other than ack, mirrored by `ops::reserve::settle_kind`.
local S_NACK, S_BURY, S_RELEASE = 2, 3, 4

-- Checks `count` acks at `now`. They come as three runs of argv: ids argv[at+1 .. at+count],
-- their token fields argv[at+count+1 .. at+2*count] (token_field of each id, built by the
-- caller), tokens argv[at+2*count+1 .. at+3*count]; so everything goes to Redis as an
-- unpack of ARGV, with no table or string built per ack. Writes a status per ack into
-- out[m+1 .. m+count] (OK, or when (id, token) is not a live lease the refusal_value of the
-- id: LEASE_LOST, NOT_FOUND or { WRONG_STATE, state }) and answers m + count and the acked
-- ids: false when every
-- ack is live (they are the ids in argv), else a list. Changes nothing: drop_acked removes
-- them, once the caller's other writes are done.
--
-- The tokens come from one HMGET of jobs; the deadlines from the head of leases when it is
-- later than now (then every lease is live), else from one ZMSCORE. The caller never names
-- one job twice in a call (delayq-redis sends such settlements one call each, in order), so
-- no table of settled ids is kept here.
local function check_acks(argv, at, count, now, out, m)
  if count == 0 then return m, false end
  local tokens = redis.call('HMGET', K_JOBS, unpack(argv, at + count + 1, at + 2 * count))
  local head = head_score(K_LEASES)
  local deadlines = false
  if head and head <= now then
    deadlines = redis.call('ZMSCORE', K_LEASES, unpack(argv, at + 1, at + count))
  end
  local acked, n = false, 0
  for i = 1, count do
    local live = same_token(tokens[i], argv[at + 2 * count + i])
      and (not deadlines or (deadlines[i] and tonumber(deadlines[i]) > now))
    if live then
      out[m + i] = OK
      if acked then
        n = n + 1
        acked[n] = argv[at + i]
      end
    else
      out[m + i] = refusal_value(argv[at + i], now)
      if not acked then
        acked, n = {}, i - 1
        for k = 1, n do acked[k] = argv[at + k] end
      end
    end
  end
  return m + count, acked
end

-- Removes the jobs of acks that check_acks found live (the same argv, at, count and its
-- answer): out of leases (one ZREM), record and token field out of jobs (one HDEL). When the
-- topic keeps done jobs (one HMGET of its retention: all a topic without one pays), only the
-- token fields leave jobs: the jobs go into done at `now`, and done is trimmed to the
-- retention (at most DONE_TRIM jobs that outlived its age, and those over its count).
local function drop_acked(argv, at, count, acked, now)
  if count == 0 then return end
  local keep = retention()
  if keep then
    local ids = acked or { unpack(argv, at + 1, at + count) }
    local fields, done = {}, {}
    for i = 1, #ids do
      fields[i] = token_field(ids[i])
      done[2 * i - 1], done[2 * i] = now, ids[i]
    end
    call_many('ZREM', K_LEASES, ids, 1)
    call_many('HDEL', K_JOBS, fields, 1)
    call_many('ZADD', K_DONE, done, 2)
    trim_done(now, keep, DONE_TRIM)
    return
  end
  if acked then
    local fields = {}
    for i = 1, #acked do
      fields[2 * i - 1] = acked[i]
      fields[2 * i] = token_field(acked[i])
    end
    call_many('ZREM', K_LEASES, acked, 1)
    call_many('HDEL', K_JOBS, fields, 2)
  else
    -- At most 1000 acks a call (delayq-core's limit), so 2000 fields: one call each.
    redis.call('ZREM', K_LEASES, unpack(argv, at + 1, at + count))
    redis.call('HDEL', K_JOBS, unpack(argv, at + 1, at + 2 * count))
  end
end

-- Settles one delivery other than an ack at `now`: nack (the attempt ends: retry after
-- `delay` ms, or the back-off when delay < 0, or dead when attempts are used up), bury (the
-- attempt ends: dead now with `reason`) or release (ready again at its due time, the
-- attempt not counted, the record untouched). `token` is the caller's string. Returns the
-- status and a value: OK and, for a nack, the new due time or -1 when the job went dead
-- (else 0); or, when (id, token) is not a live lease, its refusal (LEASE_LOST, NOT_FOUND,
-- or WRONG_STATE and the job's public state).
--
-- The one place these settlements are written (nack.lua, bury.lua, release.lua and
-- reserve's settlements all come here). `prio` (optional, -1 or nil for none) is a bury's or
-- a release's new priority; a release's `delay` (-1 for none, 0 keeps its place) makes it
-- due that many ms from now.
local function settle(kind, id, token, delay, reason, now, prio)
  if not live_lease(id, token, now) then return refusal(id, now) end
  local j = load(id)
  if not j then return NOT_FOUND, 0 end
  drop_lease(id)
  local reprioritise = prio ~= nil and prio >= 0
  if kind == S_NACK then
    if delay < 0 then delay = nil end
    return OK, fail(id, j, now, delay, reason) or -1
  elseif kind == S_BURY then
    j[F_ATTEMPTS] = j[F_ATTEMPTS] + 1
    j[F_STATE] = DEAD
    j[F_ERR] = reason
    if reprioritise then j[F_PRIO] = prio end
    redis.call('ZADD', K_DEAD, now, id)
    store(id, j)
  elseif delay > 0 or reprioritise then
    -- Release with a delay or a new priority: due then, or with that priority; the
    -- attempt does not count (the record counts ended attempts only).
    if delay > 0 then j[F_READY_AT] = due_in(now, delay) end
    if reprioritise then j[F_PRIO] = prio end
    place(id, j, now)
    store(id, j)
  else
    -- Release: the attempt does not count and the due time is the original one, so the
    -- record is unchanged: the job only goes back to its place in ready.
    place(id, j, now)
  end
  return OK, 0
end

-- Writes a job into a reply at out[m+1 .. m+5]: 5 values (id, public state, lease token,
-- deadline, the stored record as it is), decoded by codec.rs `decode_job`, which decodes the
-- record's msgpack: Lua never decodes a record only to re-encode it as a reply. The deadline
-- is the lease's while reserved, the time of death while dead, else 0. Never nil: Redis
-- would cut the reply at the first nil. Answers m + 5 (callers keep the position, as `#out`
-- costs a search of the table each time).
local function emit(out, m, id, rec, pstate, token, deadline)
  out[m + 1] = id
  out[m + 2] = pstate
  out[m + 3] = token
  out[m + 4] = deadline
  out[m + 5] = rec
  return m + 5
end
