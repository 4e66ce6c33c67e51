//! SIGHUP: the policy file (namespace policies and tenant quotas) read again and put in
//! force for the next call, or refused (logged) with the policies in force kept.

use super::load;
use crate::domain::PolicyHandle;
use std::path::PathBuf;

/// Reloads the policy file into `handle` at every signal of `hangups` (SIGHUP, registered
/// by the caller before it binds, so no SIGHUP can arrive unhandled), for as long as the
/// process runs. A file that does not load is logged and the policies in force stay.
/// Without a file, SIGHUP is logged and ignored (instead of ending the process, its default
/// action).
pub async fn reload_on_sighup(
    mut hangups: tokio::signal::unix::Signal,
    handle: PolicyHandle,
    path: Option<PathBuf>,
) {
    while hangups.recv().await.is_some() {
        let Some(path) = &path else {
            tracing::info!("SIGHUP: no policy file configured (--config); nothing to reload");
            continue;
        };
        match load(path) {
            Ok(policies) => {
                let overrides = policies.namespaces.len();
                let tenants = policies.quotas.tenants.len();
                handle.replace(policies);
                tracing::info!(file = %path.display(), overrides, tenants, "policies reloaded");
            }
            Err(error) => {
                tracing::error!(%error, "policy file refused; the policies in force stay");
            }
        }
    }
}
