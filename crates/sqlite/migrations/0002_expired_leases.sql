-- Schema version 2: a per-topic count of leases that ran out without an answer (the worker
-- died or overran its ttr), for TopicStats::expired_leases and the server's metrics. It
-- counts since the topic was created or last purged, as the Redis engine's `counters` hash.
ALTER TABLE topics ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
