-- The seeds' design (seed 003), push: each job's body goes into the job table and its
-- member into the delay bucket, scored by a due time the *client* computed.
--
-- KEYS[1]  job table (HASH: TOPIC:ID -> body)
-- KEYS[2]  delay bucket (ZSET: TOPIC:ID scored by due time in ms, client clock)
-- ARGV     triples: member (TOPIC:ID), due ms, body
-- Returns  the number of jobs written.
-- No validation and no idempotency: a repeated id overwrites, as in the seed.
for i = 1, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i])
end
return #ARGV / 3
