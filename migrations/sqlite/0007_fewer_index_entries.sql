-- Fewer index entries per write, as PostgreSQL's migration 0008 (docs/DESIGN.md §4.4,
-- docs/notes/indexes.md). SQLite rewrites every index page a write changes, and an update
-- deletes a row's entry from an index it leaves as well as adding one to an index it
-- enters, so each index a row moves in or out of costs a page in the WAL. Each state is
-- in as few indexes as its queries need:
--
--   PROCESSING   primary key, receipts_due_idx
--   RETRY_WAIT   primary key, receipts_due_idx, receipts_list_idx
--   COMPLETED    primary key, receipts_response_idx (with a response) or
--                receipts_expiry_idx (a tombstone, or completed without one)
--   QUARANTINED  primary key, receipts_list_idx, receipts_expiry_idx

-- List of RETRY_WAIT or QUARANTINED receipts (the dead letters), one ordered range per
-- state. Replaces receipts_state_idx, which also held every COMPLETED and PROCESSING row:
-- List with COMPLETED reads the primary key, List of PROCESSING the tenant's unfinished
-- receipts in receipts_due_idx (which it sorts). Changes on Retry, Quarantine and Redrive.
CREATE INDEX receipts_list_idx ON receipts (tenant_id, state, namespace, key)
    WHERE state = 'retry_wait' OR state = 'quarantined';
DROP INDEX receipts_state_idx;

-- The janitor's deletes and namespace list, for the terminal receipts that
-- receipts_response_idx does not hold: QUARANTINED ones, and COMPLETED ones without a
-- response (tombstones). Together the two indexes hold every terminal receipt exactly once.
-- Replaces receipts_terminal_idx, which held every terminal receipt, so a Complete wrote
-- both. Changes on Quarantine and when a response is stripped.
CREATE INDEX receipts_expiry_idx ON receipts (namespace, terminal_at)
    WHERE state = 'quarantined' OR (state = 'completed' AND response IS NULL);
DROP INDEX receipts_terminal_idx;

-- Unchanged: receipts_due_idx (ListOrphaned, the orphan gauge) and receipts_response_idx
-- (the janitor's strips, and its deletes of COMPLETED receipts that still have a response).
