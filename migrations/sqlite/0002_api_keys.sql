-- API keys: only a SHA-256 hash of each key's secret is stored. Times are microseconds
-- since the epoch.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    secret_hash  BLOB NOT NULL,
    label        TEXT,
    -- Comma-separated namespaces the key may use; NULL: every namespace of the tenant.
    namespaces   TEXT,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
) WITHOUT ROWID;
