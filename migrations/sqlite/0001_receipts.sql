-- The embedded store: the same receipts as PostgreSQL, times as microseconds since the
-- epoch (INTEGER), text compared bytewise (SQLite's BINARY collation).
CREATE TABLE receipts (
    tenant_id        TEXT NOT NULL,
    namespace        TEXT NOT NULL,
    key              TEXT NOT NULL,
    state            TEXT NOT NULL
                     CHECK (state IN ('processing', 'retry_wait', 'completed', 'quarantined')),
    attempt          INTEGER NOT NULL CHECK (attempt >= 1),
    free_attempts    INTEGER NOT NULL DEFAULT 0 CHECK (free_attempts >= 0),
    fingerprint      BLOB NOT NULL,
    claim_token      BLOB,
    lease_expires_at INTEGER,
    next_attempt_at  INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    completed_at     INTEGER,
    -- The four payload columns are sealed (src/seal.rs): a format byte, then the key id,
    -- nonce and AES-256-GCM ciphertext bound to this row and column.
    last_error       BLOB,
    checkpoint       BLOB,
    response         BLOB,
    recovery_payload BLOB,
    -- When somebody other than the holder may act: the lease end or the retry time.
    due_at           INTEGER GENERATED ALWAYS AS (
                         CASE state
                             WHEN 'processing' THEN lease_expires_at
                             WHEN 'retry_wait' THEN next_attempt_at
                         END) STORED,
    PRIMARY KEY (tenant_id, namespace, key)
) WITHOUT ROWID;

-- ListOrphaned: the tenant's unfinished receipts, oldest due first.
CREATE INDEX receipts_due_idx ON receipts (tenant_id, due_at, namespace, key)
    WHERE due_at IS NOT NULL;
