-- Schema version 4: whether a topic is on the topic list (Engine::topics). A purge takes the
-- topic off the list but keeps its row, whose counter keeps lease tokens fresh; the next push
-- that creates a job puts it back. Topics of older versions stay listed.
ALTER TABLE topics ADD COLUMN listed INTEGER NOT NULL DEFAULT 1;
