-- One durable row per (tenant, namespace, key). tenant_id leads every key and index so the
-- table can be distributed by tenant. Text compares bytewise (COLLATE "C") so keyset pages
-- are stable and independent of the server's locale.
CREATE TABLE receipts (
    tenant_id        text COLLATE "C" NOT NULL,
    namespace        text COLLATE "C" NOT NULL,
    key              text COLLATE "C" NOT NULL,
    state            text NOT NULL
                     CHECK (state IN ('processing', 'retry_wait', 'completed', 'quarantined')),
    attempt          integer NOT NULL CHECK (attempt >= 1),
    free_attempts    integer NOT NULL DEFAULT 0 CHECK (free_attempts >= 0),
    fingerprint      bytea NOT NULL,
    claim_token      uuid,
    lease_expires_at timestamptz,
    next_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    completed_at     timestamptz,
    -- The four payload columns are sealed (src/seal.rs): a format byte, then the key id,
    -- nonce and AES-256-GCM ciphertext bound to this row and column.
    last_error       bytea,
    checkpoint       bytea,
    response         bytea,
    recovery_payload bytea,
    -- When somebody other than the holder may act: the lease end or the retry time.
    due_at           timestamptz GENERATED ALWAYS AS (
                         CASE state
                             WHEN 'processing' THEN lease_expires_at
                             WHEN 'retry_wait' THEN next_attempt_at
                         END) STORED,
    PRIMARY KEY (tenant_id, namespace, key)
);

-- ListOrphaned: the tenant's unfinished receipts, oldest due first.
CREATE INDEX receipts_due_idx ON receipts (tenant_id, due_at, namespace, key)
    WHERE due_at IS NOT NULL;
