-- Each tenant's receipts and the bytes of their sealed columns as stored, for the storage
-- quotas (docs/DESIGN.md §5.15), kept by triggers in the transaction of every change of
-- receipts (one writer: one row per tenant, slot 0, as PostgreSQL's table has slots).
CREATE TABLE tenant_usage (
    tenant_id    TEXT NOT NULL,
    slot         INTEGER NOT NULL,
    receipts     INTEGER NOT NULL,
    stored_bytes INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, slot)
) WITHOUT ROWID;

INSERT INTO tenant_usage (tenant_id, slot, receipts, stored_bytes)
SELECT tenant_id, 0, count(*),
       sum(ifnull(length(last_error), 0) + ifnull(length(checkpoint), 0)
           + ifnull(length(response), 0) + ifnull(length(recovery_payload), 0))
FROM receipts GROUP BY tenant_id;

CREATE TRIGGER receipts_usage_insert AFTER INSERT ON receipts
BEGIN
    INSERT INTO tenant_usage (tenant_id, slot, receipts, stored_bytes)
    VALUES (NEW.tenant_id, 0, 1,
            ifnull(length(NEW.last_error), 0) + ifnull(length(NEW.checkpoint), 0)
            + ifnull(length(NEW.response), 0) + ifnull(length(NEW.recovery_payload), 0))
    ON CONFLICT (tenant_id, slot) DO UPDATE SET
        receipts = receipts + 1, stored_bytes = stored_bytes + excluded.stored_bytes;
END;

CREATE TRIGGER receipts_usage_delete AFTER DELETE ON receipts
BEGIN
    UPDATE tenant_usage SET
        receipts = receipts - 1,
        stored_bytes = stored_bytes
            - (ifnull(length(OLD.last_error), 0) + ifnull(length(OLD.checkpoint), 0)
               + ifnull(length(OLD.response), 0) + ifnull(length(OLD.recovery_payload), 0))
    WHERE tenant_id = OLD.tenant_id AND slot = 0;
END;

CREATE TRIGGER receipts_usage_update
AFTER UPDATE OF last_error, checkpoint, response, recovery_payload ON receipts
WHEN ifnull(length(NEW.last_error), 0) + ifnull(length(NEW.checkpoint), 0)
     + ifnull(length(NEW.response), 0) + ifnull(length(NEW.recovery_payload), 0)
  <> ifnull(length(OLD.last_error), 0) + ifnull(length(OLD.checkpoint), 0)
     + ifnull(length(OLD.response), 0) + ifnull(length(OLD.recovery_payload), 0)
BEGIN
    UPDATE tenant_usage SET
        stored_bytes = stored_bytes
            + (ifnull(length(NEW.last_error), 0) + ifnull(length(NEW.checkpoint), 0)
               + ifnull(length(NEW.response), 0) + ifnull(length(NEW.recovery_payload), 0))
            - (ifnull(length(OLD.last_error), 0) + ifnull(length(OLD.checkpoint), 0)
               + ifnull(length(OLD.response), 0) + ifnull(length(OLD.recovery_payload), 0))
    WHERE tenant_id = NEW.tenant_id AND slot = 0;
END;
