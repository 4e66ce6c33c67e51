//! PostgreSQL for integration tests: owns starting, stopping and cleaning up
//! throwaway PostgreSQL 15 servers (unix socket only, test-speed settings) and
//! handing out fresh, uniquely named databases on them. Migrations are not run
//! here. Set `CLAIMD_TEST_DATABASE_URL` to use an existing server for
//! [`fresh_database`] instead of starting one; `CLAIMD_PG_BIN` overrides the
//! directory holding `initdb` and `postgres`.
#![allow(dead_code)]

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Once, OnceLock, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, User, geteuid, getppid};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};

const DEFAULT_PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// Fixed rather than `$TMPDIR`, to keep the socket path short.
const TMP: &str = "/tmp";
const DIR_PREFIX: &str = "claimd-pg-";
/// Unix socket only, and durability traded for speed.
const SERVER_SETTINGS: &str = "listen_addresses= fsync=off synchronous_commit=on \
    full_page_writes=off max_connections=300 shared_buffers=64MB";
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The server behind [`fresh_database`], started once per test process: every test of the
/// `it` binary shares it.
enum Shared {
    External(String),
    Local(PrivateCluster),
}

static SHARED: OnceLock<Shared> = OnceLock::new();

/// Creates a new, empty, uniquely named database on the shared test server
/// (started on first use) and returns its sqlx connection URL.
pub async fn fresh_database() -> String {
    let shared = SHARED.get_or_init(|| match std::env::var("CLAIMD_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Shared::External(url),
        _ => Shared::Local(PrivateCluster::start()),
    });
    match shared {
        Shared::External(url) => create_database(url, |db| with_database(url, db)).await,
        Shared::Local(cluster) => cluster.create_database().await,
    }
}

/// A PostgreSQL server of its own (data dir, socket and logs in
/// `/tmp/claimd-pg-<pid>-<n>/`), for tests that stop and restart the database
/// without disturbing the shared server. Always local, even when
/// `CLAIMD_TEST_DATABASE_URL` is set.
pub struct PrivateCluster {
    dir: PathBuf,
    server: Option<Server>,
    /// The port of the socket (and of 127.0.0.1 when `tcp`), 5432 unless chosen.
    port: u16,
    /// Also listens on 127.0.0.1:`port`.
    tcp: bool,
    /// Settings after [`SERVER_SETTINGS`], each `name=value`.
    settings: Vec<String>,
}

/// One run of the `postgres` process, waited on by its spawning thread.
struct Server {
    pid: Pid,
    waiter: JoinHandle<std::io::Result<ExitStatus>>,
}

impl PrivateCluster {
    /// Runs `initdb` into a fresh directory under /tmp and starts the server;
    /// returns once it accepts connections. Panics if that is not possible.
    pub fn start() -> PrivateCluster {
        Self::start_with(false, &[])
    }

    /// As [`PrivateCluster::start`], also listening on 127.0.0.1 (a free port, see
    /// [`PrivateCluster::tcp_addr`]), with `settings` (`name=value`) added.
    pub fn start_on_tcp(settings: &[&str]) -> PrivateCluster {
        Self::start_with(true, settings)
    }

    fn start_with(tcp: bool, settings: &[&str]) -> PrivateCluster {
        let bin = pg_bin();
        let dir = new_dir();
        let log = dir.join("initdb.log");
        let mut initdb = command(&bin.join("initdb"), &dir, &log);
        initdb.args("--auth=trust -U postgres --no-sync -E UTF8 -D data".split(' '));
        let status = initdb.status();
        let status = status.unwrap_or_else(|e| panic!("cannot run initdb: {e}"));
        assert!(
            status.success(),
            "initdb failed ({status}):\n{}",
            tail(&log)
        );
        let port = if tcp { free_port() } else { 5432 };
        let settings = settings.iter().map(|s| s.to_string()).collect();
        let mut cluster = PrivateCluster {
            dir,
            server: None,
            port,
            tcp,
            settings,
        };
        cluster.restart();
        cluster
    }

    /// A streaming-replication standby of `primary` (a base backup of it, `-R`), on TCP like
    /// it, whose WAL receiver connects to `primary_at` (the primary's
    /// [`PrivateCluster::tcp_addr`], or a proxy in front of it) as `application_name`.
    pub fn standby_of(
        primary: &PrivateCluster,
        application_name: &str,
        primary_at: std::net::SocketAddr,
    ) -> PrivateCluster {
        let dir = new_dir();
        let log = dir.join("basebackup.log");
        let mut backup = command(&pg_bin().join("pg_basebackup"), &dir, &log);
        backup.arg("-h").arg(&primary.dir);
        backup.args(["-p", &primary.port.to_string()]);
        backup.args("-U postgres -D data -R -X stream --checkpoint=fast --no-sync".split(' '));
        let status = backup.status();
        let status = status.unwrap_or_else(|e| panic!("cannot run pg_basebackup: {e}"));
        assert!(
            status.success(),
            "pg_basebackup failed ({status}):\n{}",
            tail(&log)
        );
        let (host, port) = (primary_at.ip(), primary_at.port());
        let conninfo = format!(
            "primary_conninfo=host={host} port={port} user=postgres \
             application_name={application_name}"
        );
        let mut standby = PrivateCluster {
            dir,
            server: None,
            port: free_port(),
            tcp: true,
            settings: vec![conninfo],
        };
        standby.restart();
        standby
    }

    /// The data directory (`-D`): a test may put a file system of its own there while the
    /// server is stopped (the power-failure rows mount LazyFS over it).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The server's log (every start of it, appended).
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// 127.0.0.1 and the port this cluster listens on (see [`PrivateCluster::start_on_tcp`]).
    pub fn tcp_addr(&self) -> std::net::SocketAddr {
        assert!(self.tcp, "this cluster listens on its unix socket only");
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Promotes a standby (`SELECT pg_promote()`, which waits until it is done).
    pub async fn promote(&self) {
        let mut conn = PgConnection::connect(&self.url("postgres"))
            .await
            .unwrap_or_else(|e| panic!("cannot connect to the standby: {e}"));
        let promoted: bool = sqlx::query_scalar("SELECT pg_promote()")
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("pg_promote failed: {e}"));
        assert!(promoted, "the standby was not promoted within a minute");
        let _ = conn.close().await;
    }
}

/// A fresh, empty cluster directory under /tmp (owned by `postgres` when root).
fn new_dir() -> PathBuf {
    static CLEAN_STALE: Once = Once::new();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // In the background: the last run's shared server can leave a gigabyte of small
    // files, and deleting them must not hold up this run's tests.
    CLEAN_STALE.call_once(|| drop(thread::spawn(remove_stale_dirs)));
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = Path::new(TMP).join(format!("{DIR_PREFIX}{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    if let Some((uid, gid)) = run_as() {
        chown(&dir, Some(uid), Some(gid))
            .unwrap_or_else(|e| panic!("cannot chown {} to postgres: {e}", dir.display()));
    }
    dir
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    // Binding port 0 on loopback always succeeds on a test machine.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("bound address").port()
}

impl PrivateCluster {
    /// The connection URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        let socket_dir = self.dir.display();
        let port = self.port;
        format!("postgres://postgres@localhost:{port}/{db}?host={socket_dir}")
    }

    /// A cluster of the test's own (to stop and start without disturbing other tests) and a
    /// claimd on a fresh database there that notices an outage quickly: health probed
    /// every 200 ms, a call gives up waiting for the database after 1 s.
    pub async fn with_app() -> (PrivateCluster, super::app::TestApp) {
        let cluster = tokio::task::spawn_blocking(PrivateCluster::start)
            .await
            .expect("the private cluster starts");
        let app = super::app::TestApp::builder()
            .database_url(cluster.create_database().await)
            .configure(|c| {
                c.health_interval = std::time::Duration::from_millis(200);
                c.store.acquire_timeout = std::time::Duration::from_secs(1);
            })
            .spawn()
            .await;
        (cluster, app)
    }

    /// Creates a new, empty, uniquely named database and returns its URL.
    pub async fn create_database(&self) -> String {
        create_database(&self.url("postgres"), |db| self.url(db)).await
    }

    /// Fast shutdown (SIGINT); returns once the server has exited.
    pub fn stop(&mut self) {
        self.stop_with(Signal::SIGINT);
    }

    /// `kill -9` of the postmaster and every process it started (no shutdown at all: the
    /// next start runs crash recovery), then a start on the same data directory.
    pub fn kill_9_and_restart(&mut self) {
        self.kill_9();
        self.restart();
    }

    /// `kill -9` of the postmaster and every process it started; returns once it is gone.
    pub fn kill_9(&mut self) {
        if let Some(server) = &self.server {
            let children = children_of(server.pid);
            let _ = kill(server.pid, Signal::SIGKILL);
            for child in children {
                let _ = kill(child, Signal::SIGKILL);
            }
        }
        self.stop_with(Signal::SIGKILL);
    }

    /// Stops the server with `signal` (SIGINT fast, SIGQUIT immediate, SIGKILL none) and
    /// returns once it has exited.
    pub fn stop_with(&mut self, signal: Signal) {
        let Some(server) = self.server.take() else {
            return;
        };
        let _ = kill(server.pid, signal);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while !server.waiter.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        if !server.waiter.is_finished() {
            let _ = kill(server.pid, Signal::SIGKILL);
        }
        let _ = server.waiter.join();
    }

    /// Starts the server (again) on the same data dir and socket and waits
    /// until it accepts connections; stops it first if it is running.
    pub fn restart(&mut self) {
        self.stop();
        let log = self.dir.join("server.log");
        let mut cmd = command(&pg_bin().join("postgres"), &self.dir, &log);
        cmd.arg("-D").arg("data").arg("-k").arg(&self.dir);
        for setting in SERVER_SETTINGS.split(' ') {
            cmd.args(["-c", setting]);
        }
        cmd.arg("-c").arg(format!("port={}", self.port));
        if self.tcp {
            cmd.args(["-c", "listen_addresses=127.0.0.1"]);
        }
        for setting in &self.settings {
            cmd.args(["-c", setting]);
        }
        let parent = Pid::this();
        // SAFETY: only async-signal-safe syscalls (prctl, getppid) run between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Runs after std's setuid, which would otherwise clear the death signal.
                nix::sys::prctl::set_pdeathsig(Signal::SIGQUIT)?;
                if getppid() != parent {
                    return Err(std::io::Error::other("test binary exited during spawn"));
                }
                Ok(())
            });
        }
        // The death signal fires when the spawning thread ends, so a thread
        // that lives exactly as long as the server spawns and reaps it.
        let (pid_tx, pid_rx) = mpsc::channel();
        let waiter = thread::spawn(move || {
            let mut child = cmd.spawn().inspect_err(|e| {
                let _ = pid_tx.send(Err(e.to_string()));
            })?;
            let _ = pid_tx.send(Ok(Pid::from_raw(child.id() as i32)));
            child.wait()
        });
        // Reason: the thread always sends before it can finish.
        let pid = pid_rx.recv().expect("postgres spawner thread vanished");
        let pid = pid.unwrap_or_else(|e| panic!("cannot start postgres: {e}"));
        self.server = Some(Server { pid, waiter });
        self.wait_until_ready(&log);
    }

    fn wait_until_ready(&self, log: &Path) {
        let url = self.url("postgres");
        let server = self.server.as_ref();
        let exited = || server.is_none_or(|s| s.waiter.is_finished());
        // sqlx is async and callers may already be inside a runtime, so poll
        // from a plain thread with a runtime of its own.
        let ready = thread::scope(|scope| {
            let poll = scope.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                // Reason: fails only when the OS is out of threads or descriptors.
                let rt = rt.expect("cannot build tokio runtime");
                rt.block_on(async {
                    let deadline = Instant::now() + READY_TIMEOUT;
                    while Instant::now() < deadline && !exited() {
                        let attempt = PgConnection::connect(&url);
                        if let Ok(Ok(conn)) =
                            tokio::time::timeout(Duration::from_secs(5), attempt).await
                        {
                            let _ = conn.close().await;
                            return true;
                        }
                        tokio::time::sleep(Duration::from_millis(25)).await;
                    }
                    false
                })
            });
            // Reason: the polling closure does not panic except on runtime build failure.
            poll.join().expect("readiness poller panicked")
        });
        assert!(
            ready,
            "postgres in {} did not become ready:\n{}",
            self.dir.display(),
            tail(log)
        );
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The processes whose parent is `parent` (from `/proc`).
pub fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            // `/proc/PID/stat`: "pid (comm) state ppid …"; comm may hold spaces.
            fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
                after.split_whitespace().nth(1) == Some(&parent.as_raw().to_string())
            })
        })
        .map(Pid::from_raw)
        .collect()
}

/// The directory with the server binaries, checked to contain them.
pub fn pg_bin() -> PathBuf {
    let bin =
        std::env::var_os("CLAIMD_PG_BIN").map_or_else(|| DEFAULT_PG_BIN.into(), PathBuf::from);
    if !bin.join("initdb").is_file() || !bin.join("postgres").is_file() {
        panic!(
            "PostgreSQL 15 server binaries not found in {}: install them (Debian: apt-get install \
             postgresql-15), set CLAIMD_PG_BIN to their directory, or set \
             CLAIMD_TEST_DATABASE_URL to an existing server",
            bin.display()
        );
    }
    bin
}

/// The `postgres` user's ids when running as root (PostgreSQL refuses root).
pub fn run_as() -> Option<(u32, u32)> {
    if !geteuid().is_root() {
        return None;
    }
    let user = User::from_name("postgres").ok().flatten();
    let user = user.unwrap_or_else(|| panic!("running as root but there is no `postgres` OS user"));
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

/// A command run in `dir` (as `postgres` if root), output appended to `log`.
fn command(program: &Path, dir: &Path, log: &Path) -> Command {
    let out = OpenOptions::new().create(true).append(true).open(log);
    let out = out.unwrap_or_else(|e| panic!("cannot open {}: {e}", log.display()));
    // Reason: duplicating a fresh file descriptor only fails when out of descriptors.
    let err = out
        .try_clone()
        .expect("cannot duplicate log file descriptor");
    let mut cmd = Command::new(program);
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    if let Some((uid, gid)) = run_as() {
        cmd.uid(uid).gid(gid).env("HOME", dir);
    }
    cmd
}

/// Removes `/tmp/claimd-pg-<pid>-<n>` dirs left behind by dead test processes; what is
/// left when this process exits first goes on the next run.
fn remove_stale_dirs() {
    let Ok(entries) = fs::read_dir(TMP) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX)?.split('-').next());
        if let Some(Ok(pid @ 1..)) = pid.map(str::parse::<i32>)
            && kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH)
        {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Creates a uniquely named database through a connection to `admin` and
/// returns `url_for(<new name>)`.
async fn create_database(admin: &str, url_for: impl Fn(&str) -> String) -> String {
    let name = format!("claimd_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = PgConnection::connect(admin)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {admin}: {e}"));
    conn.execute(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .unwrap_or_else(|e| panic!("cannot create database {name}: {e}"));
    let _ = conn.close().await;
    url_for(&name)
}

/// `url` with its database (path) replaced by `db`, keeping any query.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, String::new()), |(b, q)| (b, format!("?{q}")));
    let host_start = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[host_start..]
        .find('/')
        .map_or(base.len(), |i| host_start + i);
    format!("{}/{db}{query}", &base[..host_end])
}

/// The last lines of a log file, for panic messages.
fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_else(|e| format!("<cannot read log: {e}>"));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
