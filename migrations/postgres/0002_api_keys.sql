-- API keys: only a SHA-256 hash of each key's secret is stored. The key id is public (it
-- appears in `claimd keys list`); the secret is shown once, at creation.
CREATE TABLE api_keys (
    id           text COLLATE "C" PRIMARY KEY,
    tenant_id    text COLLATE "C" NOT NULL,
    secret_hash  bytea NOT NULL,
    label        text,
    -- Comma-separated namespaces the key may use; NULL: every namespace of the tenant.
    namespaces   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
