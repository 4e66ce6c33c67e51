//! A real PgBouncer for tests: its config in a temporary directory (trust authentication,
//! one pool mode), listening on 127.0.0.1 and a free port, in front of a PostgreSQL on TCP.
//! Started as the `postgres` OS user when root (PgBouncer refuses to run as root), stopped
//! when dropped. A missing binary fails the test with what to install.

use std::fs;
use std::net::SocketAddr;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian installs it; otherwise it is looked up on `PATH`.
const DEBIAN_BIN: &str = "/usr/sbin/pgbouncer";

/// A running PgBouncer; dropping it stops it.
pub struct PgBouncer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// The pgbouncer binary, or a failed test saying what to install.
fn binary() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("pgbouncer"))
            .find(|p| p.is_file())
    });
    match on_path {
        Some(bin) => bin,
        None if std::path::Path::new(DEBIAN_BIN).is_file() => DEBIAN_BIN.into(),
        None => {
            panic!("pgbouncer not found: install pgbouncer (Debian: apt-get install pgbouncer)")
        }
    }
}

impl PgBouncer {
    /// Starts PgBouncer in `pool_mode` (`session`, `transaction`) in front of `upstream`,
    /// with `settings` (`name = value` lines) added to its `[pgbouncer]` section; returns once
    /// it accepts connections.
    pub fn start(upstream: SocketAddr, pool_mode: &str, settings: &[&str]) -> PgBouncer {
        let bin = binary();
        // A test cannot run PgBouncer without somewhere to put its config.
        let dir = tempfile::tempdir().expect("temp dir for pgbouncer");
        let path = dir.path();
        let port = super::process::free_addr().port();
        let (host, upstream_port) = (upstream.ip(), upstream.port());
        let config = format!(
            "[databases]\n* = host={host} port={upstream_port}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {users}\npool_mode = {pool_mode}\n\
             logfile = {log}\npidfile = {pid}\n{extra}\n",
            users = path.join("users.txt").display(),
            log = path.join("pgbouncer.log").display(),
            pid = path.join("pgbouncer.pid").display(),
            extra = settings.join("\n"),
        );
        let write = |name: &str, text: &str| {
            let file = path.join(name);
            fs::write(&file, text).unwrap_or_else(|e| panic!("cannot write {name}: {e}"));
        };
        write("pgbouncer.ini", &config);
        write("users.txt", "\"postgres\" \"\"\n");
        let mut cmd = Command::new(&bin);
        cmd.arg(path.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((uid, gid)) = super::pg::run_as() {
            for entry in [path.to_path_buf(), path.join("users.txt")] {
                chown(&entry, Some(uid), Some(gid))
                    .unwrap_or_else(|e| panic!("cannot chown {}: {e}", entry.display()));
            }
            cmd.uid(uid).gid(gid);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut bouncer = PgBouncer { child, port, dir };
        bouncer.wait_until_listening();
        bouncer
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its log so far, for failure messages.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }

    fn wait_until_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("pgbouncer exited ({status}):\n{}", self.log());
            }
            if std::net::TcpStream::connect(addr).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "pgbouncer did not listen on {addr}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
