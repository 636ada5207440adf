-- Schema version 5: a topic's settings (delayq_core::TopicConfig), NULL when unset: the
-- defaults of the jobs pushed without their own (ttr, max attempts, back-off: the four
-- back-off columns are set together or not at all) and the largest body it takes. They
-- apply when a job is pushed; a purge keeps them.
ALTER TABLE topics ADD COLUMN cfg_ttr_ms INTEGER;
ALTER TABLE topics ADD COLUMN cfg_max_attempts INTEGER;
ALTER TABLE topics ADD COLUMN cfg_bo_base_ms INTEGER;
ALTER TABLE topics ADD COLUMN cfg_bo_factor INTEGER;
ALTER TABLE topics ADD COLUMN cfg_bo_max_ms INTEGER;
ALTER TABLE topics ADD COLUMN cfg_bo_jitter INTEGER;
ALTER TABLE topics ADD COLUMN cfg_max_body INTEGER;
