//! The real `claimd` binary as a child process: started with no `CLAIMD_*` variable
//! inherited (but metrics on port 0, so parallel tests do not fight over 9464), its output
//! captured in a log file, waited on until it serves, stopped with SIGTERM or SIGKILL, and
//! killed if a test fails while it runs.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long claimd may take to start serving or to exit.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// `claimd` with none of the test process's `CLAIMD_*` variables, and `/metrics` on a
/// port of its own (`CLAIMD_METRICS_LISTEN=127.0.0.1:0`; a `--metrics-listen` flag wins).
pub fn claimd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claimd"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CLAIMD_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("CLAIMD_METRICS_LISTEN", "127.0.0.1:0");
    cmd
}

/// A loopback address with a port nobody listens on right now.
pub fn free_addr() -> SocketAddr {
    super::panic_line::install();
    // Binding port 0 on loopback always succeeds on a test machine.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("bound address")
}

/// A running (or exited) claimd process. Dropping it kills the process.
pub struct Claimd {
    child: Child,
    log: PathBuf,
    _log_dir: tempfile::TempDir,
}

impl Claimd {
    /// Spawns `cmd` with stdout and stderr going to a log file.
    pub fn spawn(mut cmd: Command) -> Claimd {
        // A test cannot run claimd without somewhere to put its log.
        let log_dir = tempfile::tempdir().expect("temp dir for the log");
        let log = log_dir.path().join("claimd.log");
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file handle");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("the claimd binary starts");
        Claimd {
            child,
            log,
            _log_dir: log_dir,
        }
    }

    /// Spawns `cmd` and waits until it accepts connections on `addr`.
    pub async fn start(cmd: Command, addr: SocketAddr) -> Claimd {
        let mut claimd = Claimd::spawn(cmd);
        claimd.wait_until_serving(addr).await;
        claimd
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process wrote to stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the process accepts TCP connections on `addr`; fails, showing its log,
    /// if it exits first or takes longer than [`PATIENCE`].
    pub async fn wait_until_serving(&mut self, addr: SocketAddr) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll claimd") {
                panic!(
                    "claimd exited ({status}) before serving on {addr}:\n{}",
                    self.log()
                );
            }
            // Listening there, and the socket is this process's: another test's server that
            // took the same free port first (this one then exits, "address in use") is not it.
            if tokio::net::TcpStream::connect(addr).await.is_ok()
                && listens_on(self.child.id(), addr.port())
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "claimd did not listen on {addr} within {PATIENCE:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits up to `timeout` for the process to exit on its own; `None` if it still runs.
    pub async fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll claimd") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.pid()).expect("pid fits in i32"));
        kill(pid, signal).expect("signal claimd");
    }

    /// SIGKILL, as `kill -9` does, then reaps the process.
    pub fn kill_9(mut self) {
        self.signal(Signal::SIGKILL);
        self.child.wait().expect("reap claimd");
    }

    /// SIGTERM, then the exit status (failing if it does not exit within [`PATIENCE`]).
    pub async fn terminate(mut self) -> ExitStatus {
        self.signal(Signal::SIGTERM);
        match self.wait_for_exit(PATIENCE).await {
            Some(status) => status,
            None => panic!(
                "claimd did not exit within {PATIENCE:?} of SIGTERM:\n{}",
                self.log()
            ),
        }
    }
}

impl Drop for Claimd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether process `pid` (or a child of it: a wrapper such as `setpriv` execs or forks
/// claimd) holds the listening TCP socket on `port`, from `/proc/net/tcp{,6}` and the
/// process's file descriptors.
fn listens_on(pid: u32, port: u16) -> bool {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let local_port = fields.get(1)?.rsplit(':').next()?;
                    let listening = *fields.get(3)? == "0A";
                    let ours = u16::from_str_radix(local_port, 16).ok()? == port;
                    let inode = fields.get(9)?;
                    (listening && ours).then(|| format!("socket:[{inode}]"))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let holds = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
            })
        })
    };
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    holds(pid)
        || children
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .any(holds)
}
