//! A real Patroni cluster for the failover row: one etcd member, three Patroni nodes each
//! running PostgreSQL 15 (`config::patroni_yml`), and HAProxy leading to whichever node
//! Patroni's REST API says is the primary — all on 127.0.0.1 and free ports, in a temporary
//! directory, as the `postgres` OS user when root. Dropping it SIGKILLs every process it
//! started (the postmasters Patroni started too) and removes the directory.

use super::config::{self, NodePorts};
use super::node::{Node, kill_child, own, port, program, spawn, wait_for};
use super::rest::{self, Member};
use std::fs;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

/// etcd, three Patroni nodes and HAProxy.
pub struct Cluster {
    nodes: Vec<Node>,
    etcd: Child,
    haproxy: Option<Child>,
    haproxy_port: u16,
    /// Last: removed once the processes are gone.
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts etcd, three Patroni nodes and HAProxy; returns once there is a leader, a
    /// synchronous standby and a replica, and HAProxy leads only to the leader.
    pub fn start() -> Cluster {
        let (patroni, etcd_bin) = (
            program("patroni", "patroni"),
            program("etcd", "etcd-server"),
        );
        let haproxy_bin = program("haproxy", "haproxy");
        // Short paths: PostgreSQL's socket lives in it. A test needs somewhere to run.
        let dir = tempfile::Builder::new()
            .prefix("claimd-patroni-")
            .tempdir_in("/tmp")
            .expect("a directory for the cluster");
        own(dir.path());
        let (client, peer) = (port(), port());
        let (client_url, peer_url) = (
            format!("http://127.0.0.1:{client}"),
            format!("http://127.0.0.1:{peer}"),
        );
        let data = dir.path().join("etcd");
        let etcd_args = [
            "--name",
            "e0",
            "--data-dir",
            &data.to_string_lossy(),
            "--listen-client-urls",
            &client_url,
            "--advertise-client-urls",
            &client_url,
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
            "--initial-cluster",
            &format!("e0={peer_url}"),
            "--log-level",
            "warn",
        ];
        let etcd = spawn(&etcd_bin, &etcd_args, &dir.path().join("etcd.log"));
        let mut cluster = Cluster {
            nodes: Vec::new(),
            etcd,
            haproxy: None,
            haproxy_port: 0,
            dir,
        };
        let healthy = wait_for(Duration::from_secs(30), || {
            let (status, body) = rest::get(client, "/health")?;
            (status == 200 && body.contains("true")).then_some(())
        });
        assert!(healthy.is_some(), "etcd never healthy:\n{}", cluster.logs());
        for i in 0..3 {
            let name = format!("n{i}");
            let dir = cluster.dir.path().join(&name);
            fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            own(&dir);
            let ports = NodePorts {
                pg: port(),
                api: port(),
            };
            let yml = dir.join("patroni.yml");
            fs::write(&yml, config::patroni_yml(&name, &dir, &ports, client))
                .unwrap_or_else(|e| panic!("{}: {e}", yml.display()));
            own(&yml);
            let mut node = Node {
                name,
                ports,
                dir,
                patroni: None,
            };
            node.start(&patroni);
            cluster.nodes.push(node);
        }
        let leader = cluster.wait_healthy(3, Duration::from_secs(120));
        // Chosen late: a port picked free may be taken by anything until it is bound.
        cluster.haproxy_port = port();
        let servers: Vec<_> = cluster
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), &n.ports))
            .collect();
        let cfg = cluster.dir.path().join("haproxy.cfg");
        let text = config::haproxy_cfg(cluster.haproxy_port, &servers, &cluster.stats_socket());
        fs::write(&cfg, text).unwrap_or_else(|e| panic!("{}: {e}", cfg.display()));
        let log = cluster.dir.path().join("haproxy.log");
        cluster.haproxy = Some(spawn(
            &haproxy_bin,
            &["-db", "-f", &cfg.to_string_lossy()],
            &log,
        ));
        // A fresh HAProxy counts every server as up until its first check.
        cluster.wait_routing_only_to(&leader);
        let haproxy = cluster.haproxy.as_mut().map(Child::try_wait);
        let exited = matches!(haproxy, Some(Ok(Some(_))));
        assert!(!exited, "HAProxy exited:\n{}", cluster.logs());
        cluster
    }

    fn stats_socket(&self) -> PathBuf {
        self.dir.path().join("haproxy.sock")
    }

    fn node(&self, name: &str) -> &Node {
        let node = self.nodes.iter().find(|n| n.name == name);
        node.unwrap_or_else(|| panic!("no node {name}"))
    }

    /// The URL of database `db` through HAProxy (on the primary).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.haproxy_port)
    }

    /// The URL of database `db` on node `name` itself.
    pub fn node_url(&self, name: &str, db: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{db}",
            self.node(name).ports.pg
        )
    }

    /// The nodes whose Patroni runs.
    pub fn running(&self) -> Vec<String> {
        let running = self.nodes.iter().filter(|n| n.patroni.is_some());
        running.map(|n| n.name.clone()).collect()
    }

    /// The members as the first running node's Patroni that answers lists them.
    pub fn members(&self) -> Option<Vec<Member>> {
        let running = self.nodes.iter().filter(|n| n.patroni.is_some());
        running.filter_map(|n| rest::members(n.ports.api)).next()
    }

    /// The leader's name, once it runs.
    pub fn leader(&self) -> Option<String> {
        let members = self.members()?;
        let leader = members
            .into_iter()
            .find(|m| m.role == "leader" && m.state == "running");
        leader.map(|m| m.name)
    }

    /// Waits until `count` members run — a leader, a synchronous standby, the rest replicas
    /// whose lag is known — and returns the leader's name.
    pub fn wait_healthy(&self, count: usize, within: Duration) -> String {
        let leader = wait_for(within, || {
            let members = self.members()?;
            let with = |role: &str| members.iter().filter(|m| m.role == role).count();
            let ready = members.len() == count
                && members.iter().all(|m| m.state == "running")
                && with("leader") == 1
                && with("sync_standby") == 1
                && members
                    .iter()
                    .all(|m| m.role == "leader" || m.lag.is_some());
            ready.then(|| self.leader()).flatten()
        });
        let members = self.members();
        leader
            .unwrap_or_else(|| panic!("not {count} healthy members: {members:?}\n{}", self.logs()))
    }

    /// Waits until HAProxy counts `leader` alone as up.
    pub fn wait_routing_only_to(&self, leader: &str) {
        let socket = self.stats_socket();
        let only = wait_for(Duration::from_secs(30), || {
            (rest::haproxy_up(&socket)? == [leader]).then_some(())
        });
        let up = rest::haproxy_up(&socket);
        assert!(
            only.is_some(),
            "HAProxy counts {up:?} up, not {leader} alone:\n{}",
            self.logs()
        );
    }

    /// Kills node `name` whole: SIGKILL of Patroni, its postmaster and every backend.
    pub fn kill_node(&mut self, name: &str) {
        let node = self.nodes.iter_mut().find(|n| n.name == name);
        let node = node.unwrap_or_else(|| panic!("no node {name}"));
        if let Some(mut patroni) = node.patroni.take() {
            kill_child(&mut patroni);
        }
        node.kill_postmaster();
    }

    /// SIGKILL of node `name`'s postmaster and every backend; Patroni keeps running.
    pub fn kill_postmaster(&self, name: &str) {
        self.node(name).kill_postmaster();
    }

    /// Starts node `name`'s Patroni again (after [`Cluster::kill_node`]).
    pub fn restart_node(&mut self, name: &str) {
        let patroni = program("patroni", "patroni");
        let node = self.nodes.iter_mut().find(|n| n.name == name);
        node.unwrap_or_else(|| panic!("no node {name}"))
            .start(&patroni);
    }

    /// The last lines of every log, for failure messages.
    pub fn logs(&self) -> String {
        let mut logs = vec![self.dir.path().join("etcd.log")];
        for node in &self.nodes {
            logs.extend([node.dir.join("patroni.log"), node.dir.join("patroni.out")]);
        }
        logs.push(self.dir.path().join("haproxy.log"));
        let tail = |path: &PathBuf| {
            let text = fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            format!("== {}\n{tail}", path.display())
        };
        logs.iter().map(tail).collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut patroni) = node.patroni.take() {
                kill_child(&mut patroni);
            }
            node.kill_postmaster();
        }
        if let Some(mut haproxy) = self.haproxy.take() {
            kill_child(&mut haproxy);
        }
        kill_child(&mut self.etcd);
    }
}
