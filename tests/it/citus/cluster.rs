//! A Citus cluster of the test's own: a coordinator and two workers, each a
//! [`PrivateCluster`] on TCP with `shared_preload_libraries = 'citus'`, and databases made
//! on all three with the extension, the workers added to the coordinator. Citus is not a
//! Debian package: `scripts/test` builds it with `../shared/citus/build.sh`; where it is
//! missing, [`CitusCluster::start`] fails naming that script.

use crate::common::pg::{PrivateCluster, pg_bin};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};

/// The settings of every node.
const SETTINGS: &[&str] = &[
    "shared_preload_libraries=citus",
    "citus.node_conninfo=sslmode=disable",
];

/// The coordinator's settings besides [`SETTINGS`]: Citus's planner decisions in its log
/// (DEBUG1), so a test can find a statement Citus did not route whole ([`CitusCluster::unrouted`]).
const COORDINATOR_SETTINGS: &[&str] = &[
    "shared_preload_libraries=citus",
    "citus.node_conninfo=sslmode=disable",
    "log_min_messages=debug1",
];

/// What Citus logs when it plans a statement in pieces instead of sending it whole to the
/// shards it names: a CTE or subquery run first and shipped as an intermediate result, or
/// an `INSERT … SELECT` collected on the coordinator.
const UNROUTED: &[&str] = &[
    "generating subplan",
    "results on coordinator",
    "repartitioned INSERT",
];

/// A coordinator and its two workers.
pub struct CitusCluster {
    /// Where claimd connects.
    pub coordinator: PrivateCluster,
    /// The workers, in the order they were added.
    pub workers: [PrivateCluster; 2],
}

/// Fails the test, naming the build script, when Citus is not installed.
fn require_citus() {
    let lib = pg_bin().join("../lib/citus.so");
    assert!(
        lib.is_file(),
        "Citus is not installed in this machine's PostgreSQL 15 ({} is missing): build it with \
         `sudo bash ../shared/citus/build.sh` (scripts/test does this when run as root)",
        lib.display()
    );
}

async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

async fn run(url: &str, sql: &str) {
    let mut conn = connect(url).await;
    conn.execute(AssertSqlSafe(sql.to_owned()))
        .await
        .unwrap_or_else(|e| panic!("{sql} failed on {url}: {e}"));
    let _ = conn.close().await;
}

impl CitusCluster {
    /// Three servers with Citus loaded, on free ports.
    pub async fn start() -> CitusCluster {
        require_citus();
        let start = || PrivateCluster::start_on_tcp(SETTINGS);
        let first = || PrivateCluster::start_on_tcp(COORDINATOR_SETTINGS);
        let (coordinator, a, b) = tokio::task::spawn_blocking(move || (first(), start(), start()))
            .await
            .expect("the Citus nodes start");
        CitusCluster {
            coordinator,
            workers: [a, b],
        }
    }

    /// A new database on every node with the `citus` extension, the workers added to the
    /// coordinator; the coordinator's URL.
    pub async fn create_database(&self) -> String {
        let name = format!("claimd_citus_{}", uuid::Uuid::new_v4().simple());
        for node in self.nodes() {
            run(&node.url("postgres"), &format!("CREATE DATABASE {name}")).await;
            run(&node.url(&name), "CREATE EXTENSION citus").await;
        }
        let url = self.coordinator.url(&name);
        let port = self.coordinator.tcp_addr().port();
        run(
            &url,
            &format!("SELECT citus_set_coordinator_host('127.0.0.1', {port})"),
        )
        .await;
        for worker in &self.workers {
            let port = worker.tcp_addr().port();
            run(&url, &format!("SELECT citus_add_node('127.0.0.1', {port})")).await;
        }
        url
    }

    /// The lines of the coordinator's log where Citus planned a statement in pieces
    /// ([`UNROUTED`]): claimd's statements on `receipts` each name one tenant and must be
    /// sent whole to its shard, so a test expects none.
    pub fn unrouted(&self) -> Vec<String> {
        (self.coordinator.server_log().lines())
            .filter(|line| UNROUTED.iter().any(|m| line.contains(m)))
            .map(|line| line.chars().take(300).collect())
            .collect()
    }

    /// Fails the test naming every statement Citus did not route whole ([`Self::unrouted`]).
    pub fn assert_routed(&self) {
        let unrouted = self.unrouted();
        assert!(
            unrouted.is_empty(),
            "statements Citus planned in pieces instead of routing to one shard: {unrouted:#?}"
        );
    }

    fn nodes(&self) -> [&PrivateCluster; 3] {
        [&self.coordinator, &self.workers[0], &self.workers[1]]
    }

    /// The index in [`CitusCluster::workers`] of the worker that holds `tenant`'s receipts.
    pub async fn worker_of(&self, url: &str, tenant: &str) -> usize {
        let mut conn = connect(url).await;
        let port: i32 = sqlx::query_scalar(
            "SELECT nodeport FROM citus_shards
             WHERE shardid = get_shard_id_for_distribution_column('receipts', $1)",
        )
        .bind(tenant)
        .fetch_one(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("cannot find the shard of {tenant}: {e}"));
        let port = u16::try_from(port).expect("a port");
        (self.workers.iter())
            .position(|w| w.tcp_addr().port() == port)
            .unwrap_or_else(|| panic!("{tenant}'s shard is on no worker (port {port})"))
    }

    /// `n` tenant names, the first of them on worker 0 and the next on worker 1, then
    /// alternating as far as the hash allows.
    pub async fn tenants_on_both(&self, url: &str, n: usize) -> Vec<(String, usize)> {
        let mut found: Vec<(String, usize)> = Vec::new();
        let mut candidate = 0;
        while found.len() < n {
            let tenant = format!("tenant-{candidate}");
            candidate += 1;
            let worker = self.worker_of(url, &tenant).await;
            let want = found.len() % 2;
            if worker == want || candidate > 200 {
                found.push((tenant, worker));
            }
        }
        found
    }
}
