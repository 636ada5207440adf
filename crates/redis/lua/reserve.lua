-- reserve.lua: settles the given deliveries of the topic (a worker's finished leases), then
-- applies what is due (expired leases, due delayed jobs), then takes up to N ready jobs: the
-- lowest priority number first, then the earliest due time, then push order. A worker's
-- cycle (settle what it finished, take the next jobs) is this one call.
--
-- KEYS: the nine topic keys of lib.lua.
-- ARGV[1]  N, the most jobs to take (0..1000; 0 = settle only)
-- ARGV[2]  mode: 0 = at-least-once (lease each job), 1 = at-most-once (remove each job)
-- ARGV[3]  the most expired leases and due jobs to move first (bounded work per call)
-- ARGV[4]  S, the number of settlements (0..1000)
-- then 5 values per settlement i (base = 4 + (i-1)*5):
--   +1 kind (S_ACK, S_NACK, S_BURY, S_RELEASE of lib.lua)   +2 id   +3 lease token
--   +4 nack delay ms (-1 = the job's back-off; -1 for other kinds)   +5 reason ('' = none)
--
-- Returns: { now µs, next wake ms (-1 = none), more (1|0), S, then 2 values per settlement
--            (status OK | LEASE_LOST, value as lib.lua's settle_many), then 5 values per job
--            (emit: id, state reserved, lease token (0 at-most-once), deadline (0
--            at-most-once), the record as stored, whose attempts count ended attempts) }
--   next wake is when a waiter should call again: now if jobs are still ready, else the
--   earliest due time or lease deadline (-1 when N = 0: nothing was looked at). more = 1
--   when jobs are left ready (or due work was left by the bound), so the caller can wake
--   another local waiter.
--
-- Settlements apply in order, before anything is reserved, each exactly as its own function
-- would (lib.lua's settle_many, as ack.lua, nack.lua, bury.lua, release.lua): a stale token answers LEASE_LOST and
-- changes nothing, and never stops the others or the reserve. They refuse nothing as a whole
-- (their arguments were validated by delayq-core), so there is no check to run first.
--
-- Invariants: each ready job is handed out once: it leaves ready in the same call that
-- leases (or removes) it; a lease token is fresh (INCRBY of the topic counter) and the
-- deadline is now + ttr on the Redis clock. A lease is an entry in leases and one in tokens:
-- the record is read but never rewritten nor decoded beyond its ttr (the reply carries it
-- as stored; codec.rs decodes it and counts this delivery in its attempts). When it delivers,
-- the call passes the baton: it signals the next wake time, so that some blocked waiter
-- (in any process) learns of the next event even if this caller stops reserving.

local now, now_us = clock()
local n, at_most_once, budget = tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3])
local s = tonumber(ARGV[4])

local out = { now_us, -1, 0, s }
local items = {}
for i = 1, s do
  local b = 4 + (i - 1) * 5
  items[i] = { tonumber(ARGV[b + 1]), ARGV[b + 2], tonumber(ARGV[b + 3]),
    tonumber(ARGV[b + 4]), ARGV[b + 5] }
end
local statuses, values = settle_many(items, now)
for i = 1, s do
  out[#out + 1] = statuses[i]
  out[#out + 1] = values[i]
end
if n == 0 then return out end

-- A topic with no job at all (the idle case): nothing to do, nothing to wait for.
if redis.call('EXISTS', K_JOBS) == 0 then return out end

local left_behind, unchanged, delayed_head, lease_head = tick(now, math.max(budget, n))

-- ZPOPMIN takes the first n members in the ready order (score = priority, then the member's
-- due time, push order and id), exactly as ZRANGE 0 n-1 would list them.
local popped = redis.call('ZPOPMIN', K_READY, n)
local ids = {}
for i = 1, #popped, 2 do ids[#ids + 1] = id_of_member(popped[i]) end
if #ids > 0 then
  local recs = raw_many(ids)
  -- Fresh lease tokens base+1 .. base+#ids, one INCRBY for the whole batch.
  local base = 0
  if not at_most_once then base = redis.call('INCRBY', K_SEQ, #ids) - #ids end
  local gone, leases, tokens = {}, {}, {}
  for i, id in ipairs(ids) do
    local rec = recs[i]
    if rec then
      if at_most_once then
        gone[#gone + 1] = id
        emit(out, id, rec, P_RESERVED, 0, 0)
      else
        local deadline = now + ttr_of(rec)
        leases[#leases + 1] = deadline
        leases[#leases + 1] = id
        tokens[#tokens + 1] = id
        tokens[#tokens + 1] = base + i
        emit(out, id, rec, P_RESERVED, base + i, deadline)
      end
    end
  end
  call_many('HDEL', K_JOBS, gone, 1)
  call_many('ZADD', K_LEASES, leases, 2)
  call_many('HSET', K_TOKENS, tokens, 2)
end
-- Fewer than n taken means ready is now empty.
local wake
if left_behind or (#ids == n and redis.call('ZCARD', K_READY) > 0) then
  wake = now
elseif unchanged and #ids == 0 then
  wake = delayed_head or -1
  if lease_head and (wake < 0 or lease_head < wake) then wake = lease_head end
else
  wake = timer_head() or -1
end
out[2] = wake
if wake == now then out[3] = 1 end
if (#ids > 0 or left_behind) and wake >= 0 then signal(wake) end
return out
