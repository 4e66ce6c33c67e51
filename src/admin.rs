//! Operator commands that act on the database directly: `claimd keys create|list|revoke`.

use crate::auth::generate_key;
use crate::config::{DatabaseArgs, KeysCommand};
use crate::domain::{MAX_NAMESPACE, MAX_TENANT, NAME_ALPHABET};
use crate::seal::Sealer;
use crate::store::keys::NewApiKey;
use std::io::Write;

/// Runs a `keys` subcommand. `create` prints the new key alone on stdout (shown only
/// this once) and what it created on stderr, so `KEY=$(claimd keys create …)` works.
pub async fn keys(command: KeysCommand) -> anyhow::Result<()> {
    let database = match &command {
        KeysCommand::Create { database, .. }
        | KeysCommand::List { database }
        | KeysCommand::Revoke { database, .. } => database.clone(),
    };
    let store = open(&database).await?;
    match command {
        KeysCommand::Create {
            tenant,
            namespaces,
            label,
            ..
        } => {
            check_name("--tenant", &tenant, MAX_TENANT)?;
            for ns in &namespaces {
                check_name("--namespaces", ns, MAX_NAMESPACE)?;
            }
            let generated = generate_key();
            let namespaces = (!namespaces.is_empty()).then_some(namespaces);
            store
                .create_key(&NewApiKey {
                    id: generated.id.clone(),
                    tenant: tenant.clone(),
                    secret_hash: generated.secret_hash,
                    label,
                    namespaces: namespaces.clone(),
                })
                .await?;
            println!("{}", generated.key);
            let scope = namespaces.map_or("every namespace".to_owned(), |n| n.join(","));
            eprintln!(
                "created API key {} for tenant {tenant} ({scope}); it is shown only this once",
                generated.id
            );
        }
        KeysCommand::List { .. } => {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "ID\tTENANT\tLABEL\tNAMESPACES\tCREATED\tLAST_USED\tREVOKED"
            )?;
            let time = |t: Option<crate::domain::Timestamp>| {
                t.map_or("-".to_owned(), |t| {
                    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
                })
            };
            for key in store.list_keys().await? {
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    key.id,
                    key.tenant,
                    key.label.as_deref().unwrap_or("-"),
                    key.namespaces.map_or("*".to_owned(), |n| n.join(",")),
                    time(Some(key.created_at)),
                    time(key.last_used_at),
                    time(key.revoked_at),
                )?;
            }
        }
        KeysCommand::Revoke { id, .. } => {
            if !store.revoke_key(&id).await? {
                anyhow::bail!("no API key with id {id}");
            }
            eprintln!("revoked API key {id}; servers stop accepting it within their key cache TTL");
        }
    }
    Ok(())
}

async fn open(database: &DatabaseArgs) -> anyhow::Result<std::sync::Arc<dyn crate::store::Store>> {
    // `keys` never reads or writes a payload, so it needs no seal keys.
    let options = database.store_options(std::sync::Arc::new(Sealer::plaintext()));
    let url = database.url()?;
    let store = crate::config::open_store(&url, &options).await?;
    crate::config::migrate(store.as_ref(), &url).await?;
    Ok(store)
}

/// Tenants and namespaces share the namespace alphabet (`domain::check_name`).
fn check_name(flag: &str, name: &str, max: usize) -> anyhow::Result<()> {
    if crate::domain::check_name(name, max).is_err() {
        anyhow::bail!("{flag}: {name:?} must be 1 to {max} characters of {NAME_ALPHABET}");
    }
    Ok(())
}
