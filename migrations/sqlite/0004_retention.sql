-- The janitor (src/janitor.rs): terminal receipts by age, per namespace. `terminal_at` is
-- when a receipt's retention starts: completed_at for COMPLETED, updated_at for
-- QUARANTINED, NULL while work is unfinished (so PROCESSING and RETRY_WAIT are never in
-- these indexes and never pruned). VIRTUAL: SQLite cannot add a STORED column to a table;
-- the index stores it.
ALTER TABLE receipts ADD COLUMN terminal_at INTEGER GENERATED ALWAYS AS (
    CASE state
        WHEN 'completed' THEN completed_at
        WHEN 'quarantined' THEN updated_at
    END) VIRTUAL;

-- Deleting past retention, and listing the namespaces that have terminal receipts.
CREATE INDEX receipts_terminal_idx ON receipts (namespace, terminal_at)
    WHERE terminal_at IS NOT NULL;
-- Stripping responses past response_retention: only rows that still have one, so
-- tombstones cost nothing to skip.
CREATE INDEX receipts_response_idx ON receipts (namespace, completed_at)
    WHERE state = 'completed' AND response IS NOT NULL;
