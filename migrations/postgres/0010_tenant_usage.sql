-- Each tenant's receipts and the bytes of their sealed columns as stored, for the storage
-- quotas (docs/DESIGN.md §5.15): counted in the store so that every replica reads one
-- figure. The statements that add, change or delete receipts add their change here in the
-- same statement, each to the row of its connection's slot (pg_backend_pid() % 16), so two
-- connections writing one tenant rarely wait for each other; a tenant's figure is the sum
-- of its slots.
CREATE TABLE tenant_usage (
    tenant_id    text COLLATE "C" NOT NULL,
    slot         smallint NOT NULL,
    receipts     bigint NOT NULL,
    stored_bytes bigint NOT NULL,
    PRIMARY KEY (tenant_id, slot)
);

INSERT INTO tenant_usage (tenant_id, slot, receipts, stored_bytes)
SELECT tenant_id, 0, count(*),
       sum(COALESCE(octet_length(last_error), 0) + COALESCE(octet_length(checkpoint), 0)
           + COALESCE(octet_length(response), 0) + COALESCE(octet_length(recovery_payload), 0))
FROM receipts GROUP BY tenant_id;
