-- reserve_job.lua: leases one job by its id, now, whatever its due time: a delayed, ready or
-- dead job (beanstalkd's `reserve-job <id>`), also while the topic is paused.
--
-- KEYS: the topic keys of lib.lua.
-- ARGV[1] id   ARGV[2] the most expired leases and due jobs to move first (bounded work)
--
-- Returns: { OK, now µs, lease token, the record as stored } (the record counts ended
--          attempts; codec.rs decodes it as a reserve's delivery, deadline now + its ttr)
--          | { NOT_FOUND } | { WRONG_STATE, public state } (reserved or done)
--
-- Invariants: the job leaves the set that held it (delayed, ready or dead, and expiring) in
-- the call that leases it, so it is handed out once; the token is fresh (fresh_tokens of the
-- topic counter, as reserve.lua's) and the deadline is now + ttr on the Redis clock; a dead
-- job's record becomes WAITING (leased) with its attempts and last error as they were; an
-- expiry that has passed is cleared (an explicit order to run it, as kick.lua's); a waiter
-- is signalled when the lease's deadline is the topic's earliest event.

local now, now_us = clock()
local id = ARGV[1]
-- What time has made due first, so that a lease past its deadline counts as ended (its
-- attempt failed, "lease expired") before this job's state is read.
tick(now, tonumber(ARGV[2]))
local rec = redis.call('HGET', K_JOBS, id)
if not rec then return { NOT_FOUND } end
local j = complete({ cmsgpack.unpack(rec) })
local pstate = public_state(id, j, now)
if pstate == P_RESERVED or pstate == P_DONE then return { WRONG_STATE, pstate } end

unplace(id, j)
local rewrite = j[F_STATE] == DEAD
j[F_STATE] = WAITING
if j[F_EXPIRES] > 0 and j[F_EXPIRES] <= now then
  j[F_EXPIRES] = 0
  rewrite = true
end
if rewrite then
  rec = pack(j)
  redis.call('HSET', K_JOBS, id, rec)
end
local token = fresh_tokens(1, now_us) + 1
local deadline = now + j[F_TTR]
local head = timer_head()
redis.call('ZADD', K_LEASES, deadline, id)
redis.call('HSET', K_JOBS, token_field(id), token)
if head == nil or deadline < head then signal(deadline) end
return { OK, now_us, token, rec }
