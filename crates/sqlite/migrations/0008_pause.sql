-- Schema version 8: a topic can be paused (issue 14, Engine::pause).
--
-- topics.paused_until is the end of the topic's pause in ms on the engine's clock
-- (delayq_core::Timestamp::NEVER: until resumed), NULL when it is not paused. A pause whose
-- end has passed is over, whatever the column still holds. Kept by a purge and by setting
-- the topic's settings, like the other columns of the topic.
ALTER TABLE topics ADD COLUMN paused_until INTEGER;
