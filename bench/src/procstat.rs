//! What the claimd process costs during a round, from Linux's `/proc`: CPU time
//! (utime + stime of `/proc/PID/stat`, in clock ticks) and the peak resident set, sampled
//! from `VmRSS` in `/proc/PID/status` every 100 ms by a background task; for a soak also
//! what it holds open ([`open_files`]). And what PostgreSQL costs, when it runs on this
//! machine: the CPU time of the postmaster's process tree ([`tree_cpu_seconds`]) and the
//! flushes of the disk under its data directory ([`disk_flushes`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How often the RSS is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Fields 3 onwards of `/proc/PID/stat` (`field(n)` is field `n`, counted from 1).
struct Stat {
    pid: u32,
    fields: Vec<String>,
}

impl Stat {
    /// `/proc/PID/stat` now.
    fn read(pid: u32) -> anyhow::Result<Stat> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // The command name (field 2) may hold spaces; the fields after its ')' start at 3.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .ok_or_else(|| anyhow::anyhow!("unexpected /proc/{pid}/stat"))?;
        let fields = rest.split_whitespace().map(str::to_owned).collect();
        Ok(Stat { pid, fields })
    }

    /// Field `n` as a number.
    fn field(&self, n: usize) -> anyhow::Result<u64> {
        let text = self.fields.get(n - 3).map_or("", String::as_str);
        text.parse()
            .map_err(|_| anyhow::anyhow!("field {n} of /proc/{}/stat: {text:?}", self.pid))
    }
}

/// User plus system CPU time of `pid` so far, in seconds.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = Stat::read(pid)?;
    let ticks = stat.field(14)? + stat.field(15)?;
    Ok(ticks as f64 / ticks_per_second())
}

/// CPU time so far of the process tree under `parent` (PostgreSQL's postmaster), in
/// seconds: the parent's own user and system time, that of its children it has reaped
/// (cutime + cstime: backends and workers that exited), and that of every live process
/// whose parent it is (backends, the WAL writer, the checkpointer, autovacuum, …). Across a
/// round the difference counts a child that started or ended during it once.
pub fn tree_cpu_seconds(parent: u32) -> anyhow::Result<f64> {
    let top = Stat::read(parent)?;
    let mut ticks = top.field(14)? + top.field(15)? + top.field(16)? + top.field(17)?;
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process gone between the listing and the read no longer counts here: the
        // parent's cutime has it once reaped.
        let Ok(stat) = Stat::read(pid) else {
            continue;
        };
        if stat.field(4).ok() == Some(u64::from(parent)) {
            ticks += stat.field(14).unwrap_or(0) + stat.field(15).unwrap_or(0);
        }
    }
    Ok(ticks as f64 / ticks_per_second())
}

/// The parent of `pid` (`PPid` of `/proc/PID/status`).
pub fn parent_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("PPid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The short name of `pid` (`/proc/PID/comm`).
pub fn command_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned())
}

/// The block device (major, minor) holding `path`, as `/proc/diskstats` names it.
pub fn device_of(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    // glibc's encoding of dev_t (gnu_dev_major / gnu_dev_minor).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    Some((major, minor))
}

/// Flush requests the device `(major, minor)` has completed (field 16 of its
/// `/proc/diskstats` line, Linux 5.5 on): an `fsync`/`fdatasync` of a file with a volatile
/// write cache below it issues one. `None` if the device is not listed (tmpfs, overlay).
pub fn disk_flushes(device: (u64, u64)) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    let (major, minor) = (device.0.to_string(), device.1.to_string());
    text.lines().find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.first() == Some(&major.as_str()) && cols.get(1) == Some(&minor.as_str()) {
            // major, minor, name, then the statistics from field 1.
            cols.get(2 + 16)?.parse().ok()
        } else {
            None
        }
    })
}

/// The kernel's clock ticks per second (`USER_HZ`).
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as f64 } else { 100.0 }
}

/// The resident set of `pid` now, in KiB (`None` once the process is gone).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A background task keeping the peak RSS of one process until stopped.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    /// Starts sampling `pid` now.
    pub fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss_kib(pid).unwrap_or(0)));
        let (s, p) = (stop.clone(), peak.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            while !s.load(Ordering::Relaxed) {
                tick.tick().await;
                if let Some(kib) = rss_kib(pid) {
                    p.fetch_max(kib, Ordering::Relaxed);
                }
            }
        });
        RssSampler { stop, peak, task }
    }

    /// Stops sampling; the peak in KiB.
    pub async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

/// What a process holds open: see [`open_files`].
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenFiles {
    /// Entries of `/proc/PID/fd`.
    pub fds: usize,
    /// Those that are sockets (`socket:[inode]`: TCP, UDP and unix alike).
    pub sockets: usize,
    /// Those sockets that are established TCP connections (state 01 in the process's
    /// `/proc/PID/net/tcp` and `tcp6`): gRPC clients, and PostgreSQL when reached by TCP.
    pub tcp: usize,
}

/// The open files, sockets and established TCP connections of `pid` now.
pub fn open_files(pid: u32) -> anyhow::Result<OpenFiles> {
    let mut inodes = HashSet::new();
    let mut fds = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        fds += 1;
        // An fd closed between the listing and the readlink is simply not counted.
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
        {
            inodes.insert(inode.to_owned());
        }
    }
    let mut tcp = 0;
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        // Columns: sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.get(3) == Some(&"01") && cols.get(9).is_some_and(|i| inodes.contains(*i)) {
                tcp += 1;
            }
        }
    }
    Ok(OpenFiles {
        fds,
        sockets: inodes.len(),
        tcp,
    })
}
