//! API keys in the embedded SQLite database.

use super::{SqliteDriver, interpret};
use crate::store::StoreError;
use crate::store::keys::{ApiKey, KeyStore, NewApiKey, join_namespaces, split_namespaces};
use async_trait::async_trait;
use chrono::DateTime;
use sqlx::FromRow;

#[derive(FromRow)]
struct KeyRow {
    id: String,
    tenant_id: String,
    secret_hash: Vec<u8>,
    label: Option<String>,
    namespaces: Option<String>,
    created_at: i64,
    last_used_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl TryFrom<KeyRow> for ApiKey {
    type Error = StoreError;

    fn try_from(r: KeyRow) -> Result<ApiKey, StoreError> {
        let time = |micros: i64| {
            DateTime::from_timestamp_micros(micros)
                .ok_or_else(|| StoreError::Corrupt(format!("key time {micros} out of range")))
        };
        Ok(ApiKey {
            id: r.id,
            tenant: r.tenant_id,
            secret_hash: r.secret_hash,
            label: r.label,
            namespaces: split_namespaces(r.namespaces),
            created_at: time(r.created_at)?,
            last_used_at: r.last_used_at.map(time).transpose()?,
            revoked_at: r.revoked_at.map(time).transpose()?,
        })
    }
}

#[async_trait]
impl KeyStore for SqliteDriver {
    async fn create_key(&self, key: &NewApiKey) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_keys (id, tenant_id, secret_hash, label, namespaces, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .bind(&key.id)
        .bind(&key.tenant)
        .bind(&key.secret_hash)
        .bind(&key.label)
        .bind(join_namespaces(&key.namespaces))
        .bind(self.clock.now().timestamp_micros())
        .execute(&self.writer)
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
        .fetch_all(&self.reader)
        .await
        .map_err(interpret)?;
        rows.into_iter().map(ApiKey::try_from).collect()
    }

    async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        let done =
            sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1")
                .bind(id)
                .bind(self.clock.now().timestamp_micros())
                .execute(&self.writer)
                .await
                .map_err(interpret)?;
        Ok(done.rows_affected() > 0)
    }

    async fn find_key(&self, id: &str) -> Result<Option<ApiKey>, StoreError> {
        let row: Option<KeyRow> = sqlx::query_as(
            "SELECT id, tenant_id, secret_hash, label, namespaces, created_at, last_used_at,
                    revoked_at
             FROM api_keys WHERE id = ?1",
        )
        .bind(id)
        .fetch_optional(&self.reader)
        .await
        .map_err(interpret)?;
        row.map(ApiKey::try_from).transpose()
    }

    async fn touch_keys(&self, ids: &[String]) -> Result<(), StoreError> {
        let touched = self.touch_in_one(ids).await;
        self.writable.noted(touched)
    }

    async fn keys_exist(&self) -> Result<bool, StoreError> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM api_keys)")
            .fetch_one(&self.reader)
            .await
            .map_err(interpret)
    }
}

impl SqliteDriver {
    /// The key touches in one transaction on the writer: one commit, however many keys.
    async fn touch_in_one(&self, ids: &[String]) -> Result<(), StoreError> {
        let now = self.clock.now().timestamp_micros();
        let mut tx = self.writer.begin().await.map_err(interpret)?;
        for id in ids {
            sqlx::query(
                "UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            )
            .bind(id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(interpret)?;
        }
        tx.commit().await.map_err(interpret)
    }
}
