//! The processes of the Patroni cluster (`cluster.rs`): one Patroni node (its config, its
//! process, the postmaster it starts and the kill of either), and starting, polling and
//! killing programs as the `postgres` OS user when root. A missing program fails the test
//! naming the Debian package to install.

use super::config::NodePorts;
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
pub struct Node {
    pub name: String,
    pub ports: NodePorts,
    pub dir: PathBuf,
    pub patroni: Option<Child>,
}

/// `program` on `PATH`, or a failed test naming the Debian package that has it.
pub fn program(name: &str, package: &str) -> PathBuf {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&paths).chain(["/usr/sbin".into(), "/usr/bin".into()]);
    let found = dirs.map(|d| d.join(name)).find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!("{name} not found: install {package} (Debian: apt-get install {package})")
    })
}

/// A free loopback port.
pub fn port() -> u16 {
    free_addr().port()
}

/// `path` handed to the `postgres` OS user when root.
pub fn own(path: &Path) {
    if let Some((uid, gid)) = run_as() {
        chown(path, Some(uid), Some(gid))
            .unwrap_or_else(|e| panic!("cannot chown {}: {e}", path.display()));
    }
}

/// Starts `program` with `args` (as `postgres` when root), its output in `log`.
pub fn spawn(program: &Path, args: &[&str], log: &Path) -> Child {
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
pub fn kill_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Polls `ready` every 100 ms until it answers `Some`, for at most `within`.
pub fn wait_for<T>(within: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
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

impl Node {
    pub fn start(&mut self, patroni: &Path) {
        let yml = self.dir.join("patroni.yml");
        let out = self.dir.join("patroni.out");
        self.patroni = Some(spawn(patroni, &[&yml.to_string_lossy()], &out));
    }

    /// The running postmaster (`postmaster.pid`'s first line, if that process is a
    /// `postgres` of this data directory).
    pub fn postmaster(&self) -> Option<Pid> {
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
    pub fn kill_postmaster(&self) {
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
