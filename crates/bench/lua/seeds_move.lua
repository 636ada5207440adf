-- The seeds' design (seed 003), the mover: every member of the bucket due by the *client's*
-- clock moves to the topic's ready LIST, with no limit per call (the seed: "looping over 1000
-- or 10000 in Lua makes no difference"); then the bucket's head is returned, for the mover
-- to wait until it.
--
-- KEYS[1]  delay bucket (ZSET)
-- KEYS[2]  ready list of the topic (LIST of TOPIC:ID)
-- ARGV[1]  now in ms, from the client's clock
-- Returns  the head's due time in ms, or false when the bucket is empty.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, member in ipairs(due) do
  redis.call('ZREM', KEYS[1], member)
  redis.call('RPUSH', KEYS[2], member)
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if head[2] then
  return head[2]
end
return false
