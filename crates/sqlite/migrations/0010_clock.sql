-- Schema version 10: the engine clock's high-water mark (issue 17).
--
-- meta holds named values of the engine itself, one row each. 'clock_ms' is the engine's
-- time (ms) at the last commit that wrote: the writer raises it in every group commit that
-- writes, inside that commit. Opening anchors the engine clock at no earlier than it, so
-- the engine's time never goes backwards across a reopen when the system clock was set
-- back (clock.rs). A database written before this version starts from the latest push
-- time its jobs record (one scan of the table, here, once).
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO meta (key, value)
  VALUES ('clock_ms', coalesce((SELECT max(created_at) FROM jobs), 0));
