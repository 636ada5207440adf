-- list.lua: one page of the jobs in a state, after applying what is due.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] public state (1 delayed, 2 ready, 3 reserved, 4 dead, 5 done)
-- ARGV[2] cursor score   ARGV[3] cursor member ('' = first page)
-- ARGV[4] page size (1..1000)   ARGV[5] the most expired leases and due jobs to move first
--
-- Returns: { has next (1|0), next cursor score, next cursor member, then 7 values per job:
--            its score and member in the set (where it stands, so that delayq-redis can
--            merge the pages of a topic's partitions), then emit's 5 (with the record as
--            stored; lease token 0) }
--
-- Orders (those of the sorted sets): delayed by (due, id), ready by (priority, due, push
-- order), reserved by (deadline, id), dead by (time of death, id), done by (time of the
-- ack, id): only the done jobs the topic's retention still keeps (none without one).
--
-- Invariants: a cursor stays valid when its job leaves the set in between (the page starts
-- after the cursor's position); members are compared bytewise, never with the locale.

local now = clock()
tick(now, tonumber(ARGV[5]))
local state = tonumber(ARGV[1])
local key = ({ K_DELAYED, K_READY, K_LEASES, K_DEAD, K_DONE })[state]
local after_score, after_member, limit = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])

-- True when a <= b bytewise (Lua's own comparison follows the server's locale).
local function bytes_le(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return la <= lb
end

local start = 0
if after_member ~= '' then
  local rank = redis.call('ZRANK', key, after_member)
  local score = redis.call('ZSCORE', key, after_member)
  if rank and tonumber(score) == after_score then
    start = rank + 1
  else
    start = redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[2])
    local scanning = true
    while scanning do
      local chunk = redis.call('ZRANGE', key, start, start + 99, 'WITHSCORES')
      scanning = #chunk > 0
      for k = 1, #chunk, 2 do
        if tonumber(chunk[k + 1]) == after_score and bytes_le(chunk[k], after_member) then
          start = start + 1
        else
          scanning = false
          break
        end
      end
    end
  end
end

if state == P_DONE then
  -- The done jobs that outlived the retention's age are the first ranks: skipped.
  local keep = retention()
  if not keep then return { 0, '', '' } end
  start = math.max(start, redis.call('ZCOUNT', K_DONE, '-inf', now - keep[2]))
end

local page = redis.call('ZRANGE', key, start, start + limit - 1, 'WITHSCORES')
local out = { 0, '', '' }
for k = 1, #page, 2 do
  local id = page[k]
  if state == P_READY then id = id_of_member(page[k]) end
  local rec = redis.call('HGET', K_JOBS, id)
  -- The score is the deadline of a reserved job, the time of death of a dead one, the time
  -- of the ack of a done one.
  local deadline = 0
  if state >= P_RESERVED then deadline = tonumber(page[k + 1]) end
  if rec then
    out[#out + 1] = page[k + 1]
    out[#out + 1] = page[k]
    emit(out, #out, id, rec, state, 0, deadline)
  end
end
if #page == 2 * limit and redis.call('ZCARD', key) > start + limit then
  out[1] = 1
  out[2] = page[#page]
  out[3] = page[#page - 1]
end
return out
