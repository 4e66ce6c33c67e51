//! The configuration files of the Patroni cluster (`cluster.rs`): each node's `patroni.yml`
//! and HAProxy's config, with the settings docs/OPERATIONS.md ("Running claimd highly
//! available") explains, plus test-speed ones (`fsync = off`, as the other fault rows run).

use std::path::Path;

/// The ports one node listens on (127.0.0.1).
pub struct NodePorts {
    /// PostgreSQL.
    pub pg: u16,
    /// Patroni's REST API (HAProxy's health check).
    pub api: u16,
}

/// Patroni's config for node `name`, its data directory and logs in `dir`, with etcd's
/// client port `etcd`.
pub fn patroni_yml(name: &str, dir: &Path, ports: &NodePorts, etcd: u16) -> String {
    let dir = dir.display();
    let NodePorts { pg, api } = ports;
    let bin = crate::common::pg::pg_bin();
    let bin = bin.display();
    format!(
        "scope: claimd-test
name: {name}
log:
  level: INFO
  dir: {dir}
restapi:
  listen: 127.0.0.1:{api}
  connect_address: 127.0.0.1:{api}
# etcd 3.4 has its v2 API off: Patroni's etcd3 driver.
etcd3:
  hosts: 127.0.0.1:{etcd}
bootstrap:
  dcs:
    # The leader key lives 10 s without a renewal; Patroni loops every 2 s and gives etcd
    # and PostgreSQL 3 s before it demotes itself.
    ttl: 10
    loop_wait: 2
    retry_timeout: 3
    # A crashed primary's postmaster is not restarted in place (for up to 300 s by
    # default): a replica takes over at once.
    primary_start_timeout: 0
    # A commit is acknowledged only once a synchronous standby has it, and never without
    # one; only the synchronous standby may be promoted.
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      # The old leader rejoins as a replica of the new one (needs data checksums).
      use_pg_rewind: true
      parameters:
        # Replicas retry the new leader's WAL every second, not every 5 s.
        wal_retrieve_retry_interval: 1s
        max_connections: 200
        # Test speed only, as the other fault rows: the processes are killed, not the
        # machine.
        fsync: 'off'
  initdb:
    - encoding: UTF8
    - data-checksums
    - auth: trust
postgresql:
  listen: 127.0.0.1:{pg}
  connect_address: 127.0.0.1:{pg}
  data_dir: {dir}/data
  bin_dir: {bin}
  pgpass: {dir}/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: replicator
  parameters:
    unix_socket_directories: {dir}
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
"
    )
}

/// HAProxy's config: `port` leads to whichever of `nodes` answers `GET /primary` with 200;
/// its stats socket is `socket`.
pub fn haproxy_cfg(port: u16, nodes: &[(&str, &NodePorts)], socket: &Path) -> String {
    let servers: String = nodes
        .iter()
        .map(|(name, p)| {
            format!(
                "    server {name} 127.0.0.1:{} check port {}\n",
                p.pg, p.api
            )
        })
        .collect();
    format!(
        "global
    maxconn 400
    stats socket {socket} mode 600 level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s
listen primary
    bind 127.0.0.1:{port}
    # Only the node Patroni says is the primary takes connections.
    option httpchk GET /primary
    http-check expect status 200
    # Checked every second (every 250 ms while changing state); down after 2 failed
    # checks, up after 1; sessions to a server marked down are cut, so no caller keeps
    # talking to a demoted primary.
    default-server inter 1s fastinter 250ms fall 2 rise 1 on-marked-down shutdown-sessions
{servers}",
        socket = socket.display()
    )
}
