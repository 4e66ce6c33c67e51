-- List (the dead-letter admin view): a tenant's receipts in some states, in (namespace, key)
-- order. Without it, listing the few QUARANTINED receipts of a tenant with many COMPLETED
-- ones would read every row of the tenant.
CREATE INDEX receipts_state_idx ON receipts (tenant_id, state, namespace, key);
