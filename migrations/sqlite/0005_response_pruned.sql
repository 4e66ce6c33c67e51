-- When the janitor stripped a COMPLETED receipt's response (a tombstone), in microseconds
-- since the epoch; NULL while it is kept.
ALTER TABLE receipts ADD COLUMN response_pruned_at INTEGER;
