-- Schema version 11: a topic's partition count (issue 18, TopicConfig::partitions).
--
-- topics.cfg_partitions is the count set for the topic, NULL when unset (one partition).
-- The embedded engine keeps every job of a topic in one table whatever the count, so the
-- contract's order holds across its partitions (the contract asks it only within one); the
-- count is kept so that every engine answers the same settings and refuses the same changes
-- (a count changes only while the topic holds no job).
ALTER TABLE topics ADD COLUMN cfg_partitions INTEGER;
