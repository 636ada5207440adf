-- reserve.lua: settles the given deliveries of the topic (a worker's finished leases), then
-- applies what is due (expired leases, due delayed jobs, waiting jobs whose expiry passed),
-- then takes up to N ready jobs: the
-- lowest priority number first, then the earliest due time, then push order. A worker's
-- cycle (settle what it finished, take the next jobs) is this one call.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1]  N, the most jobs to take (0..1000; 0 = settle only)
-- ARGV[2]  mode: 0 = at-least-once (lease each job), 1 = at-most-once (remove each job)
-- ARGV[3]  the most expired leases and due jobs to move first (bounded work per call)
-- ARGV[4]  A, the number of acks (0..1000), then their A ids, then the A token fields of
--          those ids (lib.lua's token_field), then their A lease tokens
-- ARGV[5+3A]  S, the number of other settlements (0..1000), then 5 values per settlement i
--   (base = 5 + 3A + (i-1)*5): +1 kind (S_NACK, S_BURY, S_RELEASE of lib.lua)  +2 id
--   +3 lease token  +4 nack delay ms (-1 = the job's back-off; -1 for other kinds)
--   +5 reason ('' = none)
--
-- Returns: { now µs, next wake ms (-1 = none), more (1|0), A, S, then a status per ack (OK
--            or lib.lua's refusal_value), then 2 values per other settlement (status, value
--            as lib.lua's settle), then 3 values per job taken (id, lease token (0 at most
--            once), the record as stored, whose attempts count ended attempts) }
--   A job taken from ready whose expiry has passed is expired instead (lib.lua's expire)
--   and not answered, so fewer than N jobs may come back while more are ready (more = 1).
--   Each job's state is reserved and its lease deadline is now (in ms: now µs / 1000,
--   rounded down) + its record's ttr, so neither is sent (codec.rs decode_deliveries).
--   next wake is when a waiter should call again: now if jobs are still ready, else the
--   earliest due time or lease deadline (-1 when N = 0: nothing was looked at). more = 1
--   when jobs are left ready (or due work was left by the bound), so the caller can wake
--   another local waiter.
--
-- Settlements: the caller puts the acks first (they carry no options, and go to Redis as
-- runs of ARGV) and never names one job twice in a call (delayq-redis sends such
-- settlements one call each, in order), so each settles its own job and their order cannot
-- matter. Each is checked as
-- its own function would (lib.lua's check_acks as ack.lua; lib.lua's settle as nack.lua,
-- bury.lua, release.lua): a lease that is not live answers its refusal (LEASE_LOST,
-- NOT_FOUND, WRONG_STATE) and changes nothing, and never stops the others or the reserve. They refuse nothing as a whole (their arguments were
-- validated by delayq-core), so there is no check to run first. The acked jobs are removed
-- (or moved into done, as ack.lua does) after the reserve's writes, so that a worker's steady cycle (ack a batch, lease the next)
-- keeps the topic's leases and tokens near one size instead of emptying and refilling
-- them (which costs Redis a re-encoding and rehashing of both at every call).
--
-- Invariants: each ready job is handed out once: it leaves ready in the same call that
-- leases (or removes) it; a lease token is fresh (lib.lua fresh_tokens: above every token
-- before, even after a failover that lost writes) and the
-- deadline is now + ttr on the Redis clock. A lease is an entry in leases and a token field:
-- the record is read but never rewritten nor decoded beyond its ttr (the reply carries it
-- as stored; codec.rs decodes it and counts this delivery in its attempts). When it delivers,
-- the call passes the baton: it signals the next wake time, so that some blocked waiter
-- (in any process) learns of the next event even if this caller stops reserving.

local now, now_us = clock()
local n, at_most_once, budget = tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3])
local a = tonumber(ARGV[4])
local s_at = 5 + 3 * a
local s = tonumber(ARGV[s_at])

local out = { now_us, -1, 0, a, s }
local m, acked = check_acks(ARGV, 4, a, now, out, 5)
for i = 1, s do
  local b = s_at + (i - 1) * 5
  out[m + 1], out[m + 2] = settle(tonumber(ARGV[b + 1]), ARGV[b + 2], ARGV[b + 3],
    tonumber(ARGV[b + 4]), ARGV[b + 5], now)
  m = m + 2
end

-- A topic with no job at all (the idle case): nothing to do, nothing to wait for. (Jobs
-- acked by this call are still there, so a call that acks never stops here.)
if n == 0 or redis.call('EXISTS', K_JOBS) == 0 then
  drop_acked(ARGV, 4, a, acked, now)
  return out
end

local left_behind, unchanged, delayed_head, lease_head = tick(now, math.max(budget, n))
-- Jobs with an expiry are rare: one EXISTS tells whether the topic has any waiting.
local has_expiring = redis.call('EXISTS', K_EXPIRING) == 1
if has_expiring and expire_due(now, math.max(budget, n)) then left_behind = true end

-- A paused topic hands out nothing (its jobs still fell due above); the next look is when
-- the pause ends (pause.lua signals an earlier end).
local pause_end = paused_until(now)
if pause_end then
  drop_acked(ARGV, 4, a, acked, now)
  if pause_end ~= NEVER then out[2] = pause_end end
  return out
end

-- The first n members in the ready order (score = priority, then the member's due time,
-- push order and id), taken with ZRANGE and removed by rank: ZPOPMIN would also send each
-- member's score, which nothing here reads.
local members = redis.call('ZRANGE', K_READY, 0, n - 1)
local taken = #members
if taken > 0 then
  redis.call('ZREMRANGEBYRANK', K_READY, 0, taken - 1)
  local ids = {}
  for i = 1, taken do ids[i] = id_of_member(members[i]) end
  local recs = raw_many(ids)
  -- The expiries of the jobs taken (only when the topic has jobs with one): each leaves
  -- expiring, and one whose expiry passed (expire_due's limit left it) is expired here.
  local expiries = false
  if has_expiring then
    expiries = redis.call('ZMSCORE', K_EXPIRING, unpack(ids))
    local listed, l = {}, 0
    for i = 1, taken do
      if expiries[i] then
        l = l + 1
        listed[l] = ids[i]
      end
    end
    call_many('ZREM', K_EXPIRING, listed, 1)
  end
  -- Fresh lease tokens base+1 .. base+taken, taken once for the whole batch.
  local base = 0
  if not at_most_once then base = fresh_tokens(taken, now_us) end
  local gone, leases, tokens, g, k, late = {}, {}, {}, 0, 0, 0
  for i = 1, taken do
    local id, rec = ids[i], recs[i]
    if rec and expiries and expiries[i] and tonumber(expiries[i]) <= now then
      expire(id, complete({ cmsgpack.unpack(rec) }), now)
      late = late + 1
      left_behind = true
    elseif rec then
      if at_most_once then
        g = g + 1
        gone[g] = id
        out[m + 1], out[m + 2], out[m + 3] = id, 0, rec
        m = m + 3
      else
        local deadline = now + ttr_of(rec)
        leases[k + 1], leases[k + 2] = deadline, id
        tokens[k + 1], tokens[k + 2] = token_field(id), base + i
        k = k + 2
        out[m + 1], out[m + 2], out[m + 3] = id, base + i, rec
        m = m + 3
      end
    end
  end
  call_many('HDEL', K_JOBS, gone, 1)
  call_many('ZADD', K_LEASES, leases, 2)
  call_many('HSET', K_JOBS, tokens, 2)
  count_expired(late)
end
drop_acked(ARGV, 4, a, acked, now)
-- Fewer than n taken means ready is now empty. The heads tick read are stale when acks
-- left leases since.
local wake
if left_behind or (taken == n and redis.call('ZCARD', K_READY) > 0) then
  wake = now
elseif unchanged and taken == 0 and a == 0 then
  wake = delayed_head or -1
  if lease_head and (wake < 0 or lease_head < wake) then wake = lease_head end
else
  wake = timer_head() or -1
end
local expiry_head = has_expiring and head_score(K_EXPIRING)
if expiry_head and (wake < 0 or expiry_head < wake) then wake = expiry_head end
out[2] = wake
if wake == now then out[3] = 1 end
if (taken > 0 or left_behind) and wake >= 0 then signal(wake) end
return out
