-- Fewer index entries per write (docs/DESIGN.md §4.4, docs/notes/indexes.md). An update
-- that changes `state` or a lease is never HOT here (receipts_due_idx must follow both), so
-- it adds an entry to the primary key and to every index whose predicate the new row
-- version satisfies. The indexes below are partial so that each state is in as few of them
-- as its queries need:
--
--   PROCESSING   primary key, receipts_due_idx
--   RETRY_WAIT   primary key, receipts_due_idx, receipts_list_idx
--   COMPLETED    primary key, receipts_response_idx (with a response) or
--                receipts_expiry_idx (a tombstone, or completed without one)
--   QUARANTINED  primary key, receipts_list_idx, receipts_expiry_idx
--
-- Claim and Heartbeat now add two entries (they added three), Complete two (it added four).
-- On a large table both CREATE INDEX statements block writes while they build; to avoid
-- that, create the two indexes first with CREATE INDEX CONCURRENTLY under the same names
-- and definitions (and check they are valid): this migration then only drops the old ones.

-- List of RETRY_WAIT or QUARANTINED receipts (the dead letters), one ordered range per
-- state. Replaces receipts_state_idx, which also held every COMPLETED and PROCESSING row:
-- List with COMPLETED reads the primary key (completed receipts are the bulk), List of
-- PROCESSING the tenant's unfinished receipts in receipts_due_idx (which it sorts).
-- Costs an entry per Retry, Quarantine and Redrive.
CREATE INDEX IF NOT EXISTS receipts_list_idx ON receipts (tenant_id, state, namespace, key)
    WHERE state = 'retry_wait' OR state = 'quarantined';
DROP INDEX receipts_state_idx;

-- The janitor's deletes and namespace list, for the terminal receipts that
-- receipts_response_idx does not hold: QUARANTINED ones, and COMPLETED ones without a
-- response (tombstones). Together the two indexes hold every terminal receipt exactly once.
-- Replaces receipts_terminal_idx, which held every terminal receipt, so a Complete wrote
-- both. Costs an entry per Quarantine and per stripped response.
CREATE INDEX IF NOT EXISTS receipts_expiry_idx ON receipts (namespace, terminal_at)
    WHERE state = 'quarantined' OR (state = 'completed' AND response IS NULL);
DROP INDEX receipts_terminal_idx;

-- Unchanged: receipts_due_idx (ListOrphaned, the orphan gauge; an entry per Claim,
-- Heartbeat, Retry and takeover) and receipts_response_idx (the janitor's strips, and its
-- deletes of COMPLETED receipts that still have a response; an entry per Complete with a
-- response).
