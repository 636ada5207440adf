-- Schema version 13: the topics' push destinations (issue 20; Engine::put_destination).
--
-- One row per topic that has one, keyed by the topic's name (a destination needs no topic
-- row: it may be set before the first push, and purge leaves it). `doc` is the document as
-- put; the engine does not read it (delayq-push does).
CREATE TABLE destinations (
    topic TEXT PRIMARY KEY,
    doc   TEXT NOT NULL
) WITHOUT ROWID;
