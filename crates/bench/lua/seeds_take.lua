-- The seeds' design (seed 003), "LrangeAndLTrim": takes up to ARGV[1] members from the head
-- of the ready list at once. Nothing records that they were taken: a consumer that dies
-- before it handled them loses them (no ack).
--
-- KEYS[1]  ready list (LIST)
-- ARGV[1]  the most to take (the consumer's free threads)
-- Returns  the members taken.
local items = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #items > 0 then
  redis.call('LTRIM', KEYS[1], #items, -1)
end
return items
