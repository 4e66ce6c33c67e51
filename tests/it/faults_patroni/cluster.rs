//! A real Patroni cluster for the failover row: one etcd member, three Patroni nodes each
//! running PostgreSQL 15 (`config::patroni_yml`), and HAProxy leading to whichever node
//! Patroni's REST API says is the primary — all on 127.0.0.1 and free ports, in a temporary
//! directory, as the `postgres` OS user when root. Dropping it SIGKILLs every process it
//! started (the postmasters Patroni started too) and removes the directory. A missing
//! program fails the test naming the Debian package to install.

use super::config::{self, NodePorts};
use super::rest::{self, Member};
use crate::common::pg::{children_of, run_as};
use crate::common::process::free_addr;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fs;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// One Patroni node.
struct Node {
    name: String,
    ports: NodePorts,
    dir: PathBuf,
    patroni: Option<Child>,
}

/// etcd, three Patroni nodes and HAProxy.
pub struct Cluster {
    nodes: Vec<Node>,
    etcd: Child,
    haproxy: Option<Child>,
    haproxy_port: u16,
    /// Last: removed once the processes are gone.
    dir: tempfile::TempDir,
}

/// `program` on `PATH`, or a failed test naming the Debian package that has it.
fn program(name: &str, package: &str) -> PathBuf {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&paths).chain(["/usr/sbin".into(), "/usr/bin".into()]);
    let found = dirs.map(|d| d.join(name)).find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!("{name} not found: install {package} (Debian: apt-get install {package})")
    })
}

/// A free loopback port.
fn port() -> u16 {
    free_addr().port()
}

/// `path` handed to the `postgres` OS user when root.
fn own(path: &Path) {
    if let Some((uid, gid)) = run_as() {
        chown(path, Some(uid), Some(gid))
            .unwrap_or_else(|e| panic!("cannot chown {}: {e}", path.display()));
    }
}

/// Starts `program` with `args` (as `postgres` when root), its output in `log`.
fn spawn(program: &Path, args: &[&str], log: &Path) -> Child {
    let out = fs::File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    // Reason: duplicating a fresh descriptor fails only when out of descriptors.
    let err = out.try_clone().expect("a second handle on the log");
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    if let Some((uid, gid)) = run_as() {
        let home = log.parent().unwrap_or(Path::new("/tmp"));
        cmd.uid(uid).gid(gid).env("HOME", home);
    }
    cmd.spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()))
}

/// SIGKILLs `child` and reaps it.
fn kill_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Polls `ready` every 100 ms until it answers `Some`, for at most `within`.
fn wait_for<T>(within: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = ready() {
            return Some(t);
        }
        if Instant::now() >= deadline {
            return None;
        }
        sleep(Duration::from_millis(100));
    }
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

impl Node {
    fn start(&mut self, patroni: &Path) {
        let yml = self.dir.join("patroni.yml");
        let out = self.dir.join("patroni.out");
        self.patroni = Some(spawn(patroni, &[&yml.to_string_lossy()], &out));
    }

    /// The running postmaster (`postmaster.pid`'s first line, if that process is a
    /// `postgres` of this data directory).
    fn postmaster(&self) -> Option<Pid> {
        let data = self.dir.join("data");
        let pid_file = fs::read_to_string(data.join("postmaster.pid")).ok()?;
        let pid: i32 = pid_file.lines().next()?.trim().parse().ok()?;
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline);
        cmdline
            .contains(&*data.to_string_lossy())
            .then(|| Pid::from_raw(pid))
    }

    /// SIGKILL of the postmaster and every backend; returns once none of them runs any
    /// more (10 s at most), so nothing sent afterwards reaches them.
    fn kill_postmaster(&self) {
        let Some(pid) = self.postmaster() else {
            return;
        };
        let mut pids = children_of(pid);
        pids.push(pid);
        for &pid in &pids {
            let _ = kill(pid, Signal::SIGKILL);
        }
        let dead = wait_for(Duration::from_secs(10), || {
            pids.iter().all(|&p| gone(p)).then_some(())
        });
        assert!(
            dead.is_some(),
            "{}'s postmaster outlived SIGKILL",
            self.name
        );
    }
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn gone(pid: Pid) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"));
    // `/proc/PID/stat`: "pid (comm) state …"; comm may hold spaces.
    stat.map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
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
