-- When the janitor stripped a COMPLETED receipt's response (a tombstone); NULL while it is kept.
ALTER TABLE receipts ADD COLUMN response_pruned_at timestamptz;
