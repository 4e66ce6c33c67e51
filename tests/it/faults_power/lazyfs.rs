//! LazyFS mounted by the test: a FUSE file system that keeps every write in its own page
//! cache until the file is fsynced, and on `lazyfs::clear-cache` (a line written into its
//! command FIFO) drops everything not fsynced — a power failure, simulated; armed with
//! `lazyfs::crash`, it kills itself (its cache with it) right before the next fsync of a
//! file, the moment a commit's data is written and not yet durable. Metadata operations
//! (create, rename, link, unlink, truncate) go to the disk beneath at once; only data waits
//! for fsync.
//!
//! A mount runs `lazyfs` in the foreground as a child of a thread of its own (its death
//! signal goes with that thread, so a crashed test leaves no daemon), logs to a file the
//! commands' answers are read from, can be mounted again after a crash, and is unmounted
//! when dropped. It needs root, `/dev/fuse`
//! and `lazyfs` on `PATH`: without them the test fails saying how to get them, never skips.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, getppid};

/// What to do when LazyFS is missing, relative to the repository's root.
const HOW_TO_GET_IT: &str = "LazyFS is not installed (`lazyfs` on PATH): build it with \
     `sudo bash ../shared/lazyfs/build.sh` (scripts/test does so as root when the script is \
     there), or install upstream dsrhaslab/lazyfs and fuse3 so that `lazyfs` is on PATH";

/// How long a mount or a command may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// A LazyFS mount; unmounted (and its daemon stopped) when dropped — stop what uses it first.
pub struct LazyFs {
    mount: PathBuf,
    root: PathBuf,
    config: PathBuf,
    fifo: PathBuf,
    log: PathBuf,
    daemon: Option<Daemon>,
    /// The configuration, FIFO, log and (for [`LazyFs::mount`]) both directories.
    _dir: tempfile::TempDir,
}

/// One run of `lazyfs`, waited on by the thread that spawned it.
struct Daemon {
    pid: Pid,
    waiter: JoinHandle<std::io::Result<ExitStatus>>,
}

impl Daemon {
    fn exited(daemon: &Option<Daemon>) -> bool {
        daemon.as_ref().is_none_or(|d| d.waiter.is_finished())
    }
}

impl LazyFs {
    /// A fresh, empty LazyFS with a cache of `cache` (`256mb`): the file system is
    /// [`LazyFs::path`], the disk beneath a directory of its own.
    pub fn mount(cache: &str) -> LazyFs {
        // A test cannot run without a temporary directory.
        let dir = tempfile::tempdir().expect("a directory for LazyFS");
        let (mount, root) = (dir.path().join("mnt"), dir.path().join("disk"));
        for d in [&mount, &root] {
            fs::create_dir(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        LazyFs::start(dir, mount, root, cache)
    }

    /// LazyFS at `mount` (an empty directory) over the files of `root`.
    pub fn mount_over(mount: &Path, root: &Path, cache: &str) -> LazyFs {
        // A test cannot run without a temporary directory.
        let dir = tempfile::tempdir().expect("a directory for LazyFS");
        LazyFs::start(dir, mount.to_owned(), root.to_owned(), cache)
    }

    fn start(dir: tempfile::TempDir, mount: PathBuf, root: PathBuf, cache: &str) -> LazyFs {
        assert!(
            nix::unistd::geteuid().is_root(),
            "the power-failure tests mount LazyFS (FUSE, allow_other): run them as root (CI does)"
        );
        assert!(
            Path::new("/dev/fuse").exists(),
            "the power-failure tests need /dev/fuse (LazyFS is a FUSE file system): run them \
             where the fuse device exists (a container needs --device /dev/fuse)"
        );
        let (fifo, log) = (
            dir.path().join("faults.fifo"),
            dir.path().join("lazyfs.log"),
        );
        let config = dir.path().join("lazyfs.toml");
        // The whole cache is allocated at start; writes beyond it would go to the disk
        // beneath unsynced-but-kept, so a run checks it never filled (`LazyFs::usage`).
        let toml = format!(
            "[faults]\nfifo_path=\"{}\"\n[cache]\napply_eviction=false\n[cache.simple]\n\
             custom_size=\"{cache}\"\nblocks_per_page=1\n[filesystem]\n\
             log_all_operations=false\nlogfile=\"\"\n",
            fifo.display()
        );
        // Reason: files in the test's own fresh temporary directory.
        fs::write(&config, toml).expect("the LazyFS configuration");
        File::create(&log).expect("the LazyFS log");
        let mut lazyfs = LazyFs {
            mount,
            root,
            config,
            fifo,
            log,
            daemon: None,
            _dir: dir,
        };
        lazyfs.start_daemon();
        lazyfs
    }

    /// Runs `lazyfs` on the mount and waits until it serves.
    fn start_daemon(&mut self) {
        let out = OpenOptions::new().append(true).open(&self.log);
        // Reason: created with the mount, in its own directory.
        let out = out.expect("the LazyFS log");
        // Reason: duplicating a fresh file descriptor only fails when out of descriptors.
        let err = out.try_clone().expect("the LazyFS log, twice");
        let mut cmd = Command::new("lazyfs");
        cmd.arg(&self.mount).arg("--config-path").arg(&self.config);
        cmd.args(["-o", "allow_other", "-o", "modules=subdir", "-o"]);
        cmd.arg(format!("subdir={}", self.root.display())).arg("-f");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let parent = Pid::this();
        // SAFETY: only async-signal-safe syscalls (prctl, getppid) run between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
                if getppid() != parent {
                    return Err(std::io::Error::other("test binary exited during spawn"));
                }
                Ok(())
            });
        }
        // The death signal fires when the spawning thread ends: this one lives as long as
        // the daemon.
        let (pid_tx, pid_rx) = mpsc::channel();
        let waiter = thread::spawn(move || {
            let mut child = cmd.spawn().inspect_err(|e| {
                let _ = pid_tx.send(Err(e.kind()));
            })?;
            let _ = pid_tx.send(Ok(Pid::from_raw(child.id() as i32)));
            child.wait()
        });
        // Reason: the thread always sends before it can finish.
        let pid = match pid_rx.recv().expect("the LazyFS spawner thread vanished") {
            Ok(pid) => pid,
            Err(std::io::ErrorKind::NotFound) => panic!("{HOW_TO_GET_IT}"),
            Err(e) => panic!("cannot start lazyfs: {e}"),
        };
        let ready = "waiting for fault commands";
        let before = self.log().matches(ready).count();
        self.daemon = Some(Daemon { pid, waiter });
        let deadline = Instant::now() + PATIENCE;
        let ours = format!(" {} fuse.lazyfs ", self.mount.display());
        loop {
            let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
            // The command FIFO's worker starts with the file system.
            if mounts.contains(&ours) && self.log().matches(ready).count() > before {
                return;
            }
            assert!(
                !Daemon::exited(&self.daemon),
                "lazyfs exited before mounting:\n{}",
                self.log()
            );
            assert!(
                Instant::now() < deadline,
                "lazyfs did not mount within {PATIENCE:?}:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Where the file system is mounted.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// Everything LazyFS logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Writes `command` into the FIFO and waits until the log shows `done` once more than
    /// before; returns the log from there on.
    fn command(&self, command: &str, done: &[&str]) -> String {
        let count = |log: &str| done.iter().map(|d| log.matches(d).count()).sum::<usize>();
        let before = self.log();
        let mut fifo = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.fifo)
            .unwrap_or_else(|e| panic!("LazyFS's FIFO is closed ({e}):\n{}", self.log()));
        fifo.write_all(format!("{command}\n").as_bytes())
            .unwrap_or_else(|e| panic!("cannot write to LazyFS's FIFO: {e}"));
        let deadline = Instant::now() + PATIENCE;
        loop {
            let log = self.log();
            if count(&log) > count(&before) {
                return log[before.len()..].to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "LazyFS did not answer {command} within {PATIENCE:?}:\n{log}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The power failure: every byte not fsynced is dropped (`lazyfs::clear-cache`).
    pub fn clear_cache(&self) {
        self.command("lazyfs::clear-cache", &["cache is cleared."]);
    }

    /// How many bytes written through LazyFS are not fsynced yet, and the files they are of
    /// (their names on the disk beneath).
    pub fn unsynced(&self) -> (u64, Vec<String>) {
        let marks = ["bytes un-fsynced: ", "all data blocks are synced!"];
        report(&self.command("lazyfs::unsynced-data-report", &marks))
    }

    /// Arms the crash: LazyFS kills itself, losing everything unsynced, right before the next
    /// fsync of a file whose path matches `pattern` (a regular expression).
    pub fn crash_before_fsync_of(&self, pattern: &str) {
        let command = format!("lazyfs::crash::timing=before::op=fsync::from_rgx={pattern}");
        self.command(&command, &["received: VALID crash fault"]);
    }

    /// Waits until the armed crash happened; what it lost, as [`LazyFs::unsynced`] says.
    pub fn crashed(&self) -> (u64, Vec<String>) {
        let deadline = Instant::now() + PATIENCE;
        while !Daemon::exited(&self.daemon) {
            assert!(
                Instant::now() < deadline,
                "no fsync crashed LazyFS within {PATIENCE:?}:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
        let log = self.log();
        let at = log.rfind("Triggered fault condition");
        let at = at.unwrap_or_else(|| panic!("lazyfs died otherwise than armed:\n{log}"));
        report(&log[at..])
    }

    /// Mounts LazyFS again on the same disk after a crash (nothing may use the dead mount).
    pub fn remount(&mut self) {
        self.unmount();
        self.start_daemon();
    }

    /// How full the cache is, in percent of its pages: at 100 writes would bypass it.
    pub fn usage(&self) -> f64 {
        let mark = "cache usage (%pages) is ";
        let answer = self.command("lazyfs::display-cache-usage", &[mark]);
        let usage = answer.split(mark).nth(1).and_then(|rest| {
            let number = rest.split('%').next()?;
            number.trim().parse().ok()
        });
        usage.unwrap_or_else(|| panic!("no cache usage in LazyFS's answer: {answer}"))
    }

    /// Unmounts it and waits for the daemon to end (killing it after 5 s).
    fn unmount(&mut self) {
        let path = self.mount.to_string_lossy().into_owned();
        let unmounted = Command::new("umount").arg(&path).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            // Busy: detach it, it goes when the last user does.
            let _ = Command::new("umount").args(["--lazy", &path]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !Daemon::exited(&self.daemon) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        if let Some(daemon) = self.daemon.take() {
            if !daemon.waiter.is_finished() {
                let _ = kill(daemon.pid, Signal::SIGKILL);
            }
            let _ = daemon.waiter.join();
        }
    }
}

/// The bytes and files of an unsynced-data report (names on the disk beneath).
fn report(answer: &str) -> (u64, Vec<String>) {
    let count = answer.split("bytes un-fsynced: ").nth(1).and_then(|rest| {
        let number = rest.split(' ').next()?;
        number.parse().ok()
    });
    let files = answer.split("=> file: '").skip(1);
    let names = files.filter_map(|rest| {
        let path = rest.split('\'').next()?;
        Some(path.rsplit('/').next()?.to_owned())
    });
    (count.unwrap_or(0), names.collect())
}

impl Drop for LazyFs {
    fn drop(&mut self) {
        self.unmount();
    }
}
