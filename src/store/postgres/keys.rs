//! API keys in PostgreSQL.

use super::{PgDriver, interpret};
use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::keys::{ApiKey, KeyStore, NewApiKey, join_namespaces, split_namespaces};
use async_trait::async_trait;
use sqlx::FromRow;

#[derive(FromRow)]
struct KeyRow {
    id: String,
    tenant_id: String,
    secret_hash: Vec<u8>,
    label: Option<String>,
    namespaces: Option<String>,
    created_at: Timestamp,
    last_used_at: Option<Timestamp>,
    revoked_at: Option<Timestamp>,
}

impl From<KeyRow> for ApiKey {
    fn from(r: KeyRow) -> ApiKey {
        ApiKey {
            id: r.id,
            tenant: r.tenant_id,
            secret_hash: r.secret_hash,
            label: r.label,
            namespaces: split_namespaces(r.namespaces),
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            revoked_at: r.revoked_at,
        }
    }
}

#[async_trait]
impl KeyStore for PgDriver {
    async fn create_key(&self, key: &NewApiKey) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_keys (id, tenant_id, secret_hash, label, namespaces)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&key.id)
        .bind(&key.tenant)
        .bind(&key.secret_hash)
        .bind(&key.label)
        .bind(join_namespaces(&key.namespaces))
        .execute(&self.pool)
        .await
        .map_err(interpret)?;
        Ok(())
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        let rows: Vec<KeyRow> = sqlx::query_as(
            "SELECT id, tenant_id, secret_hash, label, namespaces, created_at, last_used_at,
                    revoked_at
             FROM api_keys ORDER BY created_at DESC, id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(interpret)?;
        Ok(rows.into_iter().map(ApiKey::from).collect())
    }

    async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1",
        )
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(interpret)?;
        Ok(done.rows_affected() > 0)
    }

    async fn find_key(&self, id: &str) -> Result<Option<ApiKey>, StoreError> {
        let row = sqlx::query_as::<_, KeyRow>(
            "SELECT id, tenant_id, secret_hash, label, namespaces, created_at, last_used_at,
                    revoked_at
             FROM api_keys WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool);
        // On the request path: bounded like the receipts' statements.
        let row = self.bounded(async { row.await.map_err(interpret) }).await?;
        Ok(row.map(ApiKey::from))
    }

    async fn touch_keys(&self, ids: &[String]) -> Result<(), StoreError> {
        let touched = sqlx::query(
            "UPDATE api_keys SET last_used_at = now()
             WHERE id = ANY($1) AND revoked_at IS NULL",
        )
        .bind(ids)
        .execute(&self.pool);
        self.bounded(async { touched.await.map_err(interpret) })
            .await?;
        Ok(())
    }

    async fn keys_exist(&self) -> Result<bool, StoreError> {
        let exist =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM api_keys)").fetch_one(&self.pool);
        self.bounded(async { exist.await.map_err(interpret) }).await
    }
}
