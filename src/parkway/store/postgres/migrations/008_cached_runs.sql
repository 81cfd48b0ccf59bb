-- parkway schema, version 8: which worker keeps a parked run's replay machine.

-- The worker whose advance parked the run last, when it keeps the run in its
-- cache (NULL: none does): its claims skip reading the run's journal, and any
-- other worker's advance overwrites it. (Nullable, no default: added without
-- rewriting the table.)
ALTER TABLE parkway.runs ADD COLUMN advanced_by TEXT;
