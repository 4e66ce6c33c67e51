//! A PostgreSQL of the test's own whose data directory is on LazyFS, durable as production
//! runs it (`fsync = on`, `full_page_writes = on`, `synchronous_commit = on`; the shared
//! test server trades them for speed): `initdb` writes the cluster on the disk, the data
//! directory moves beneath a LazyFS mounted in its place, and the server starts on that. A
//! power failure is `kill -9` of every server process and then LazyFS dropping what was
//! not fsynced; the next start runs crash recovery from what is left.

use super::lazyfs::LazyFs;
use super::load;
use crate::common::pg::PrivateCluster;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, chown};

/// LazyFS's cache for a data directory: PostgreSQL writes whole WAL segments (16 MiB each)
/// through it, and all of a run must fit (writes past a full cache would bypass it; a run
/// uses about 5 %).
const CACHE: &str = "256mb";

/// The cluster and the LazyFS its data directory is on.
pub struct PgOnLazyFs {
    cluster: Option<PrivateCluster>,
    fs: Option<LazyFs>,
}

impl PgOnLazyFs {
    /// Starts it; returns once PostgreSQL accepts connections. Blocks (run it where a
    /// thread may wait). Shows first that the mount loses an unsynced write.
    pub fn start() -> PgOnLazyFs {
        let mut cluster = PrivateCluster::start_on_tcp(&["fsync=on", "full_page_writes=on"]);
        cluster.stop();
        let data = cluster.data_dir();
        let disk = data.with_file_name("data-disk");
        fs::rename(&data, &disk).unwrap_or_else(|e| panic!("{}: {e}", data.display()));
        // The mount point, as the data directory was: PostgreSQL checks its owner and mode.
        // Reason: it was renamed there a line above.
        let meta = fs::metadata(&disk).expect("the moved data directory");
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&data)
            .unwrap_or_else(|e| panic!("{}: {e}", data.display()));
        // Reason: the test runs as root (LazyFS has checked), which may chown.
        chown(&data, Some(meta.uid()), Some(meta.gid())).expect("the mount point's owner");
        let fs = LazyFs::mount_over(&data, &disk, CACHE);
        super::detect::loses_an_unsynced_write(&fs);
        cluster.restart();
        PgOnLazyFs {
            cluster: Some(cluster),
            fs: Some(fs),
        }
    }

    /// The server.
    pub fn cluster(&self) -> &PrivateCluster {
        // Reason: both are taken only in drop.
        self.cluster.as_ref().expect("the cluster runs")
    }

    fn parts(&mut self) -> (&mut PrivateCluster, &mut LazyFs) {
        // Reason: both are taken only in drop.
        let cluster = self.cluster.as_mut().expect("the cluster runs");
        (cluster, self.fs.as_mut().expect("LazyFS is mounted"))
    }

    /// The power failure at whatever moment the server is in: `kill -9` of the postmaster
    /// and every backend, then everything not fsynced dropped. Blocks.
    pub fn power_failure(&mut self, n: usize) {
        let (cluster, fs) = self.parts();
        cluster.kill_9();
        load::power_failure(fs, n);
    }

    /// The power failure right before the next fsync of the WAL (LazyFS dies, its cache
    /// with it; PostgreSQL's fsync fails and it PANICs), then `kill -9` of what is left and
    /// LazyFS mounted again. Blocks.
    pub fn power_failure_before_wal_fsync(&mut self, n: usize) {
        let (cluster, fs) = self.parts();
        load::power_failure_before_fsync(fs, "pg_wal/0", n);
        cluster.kill_9();
        fs.remount();
    }

    /// Starts the server again on what the data directory holds (crash recovery); blocks
    /// until it accepts connections.
    pub fn restart(&mut self) {
        let recovering = std::time::Instant::now();
        self.parts().0.restart();
        println!("crash recovery: {} ms", recovering.elapsed().as_millis());
    }
}

impl Drop for PgOnLazyFs {
    fn drop(&mut self) {
        // The server first (nothing of it is kept), then the mount it used, then the
        // cluster's directory with the disk beneath.
        if let Some(cluster) = self.cluster.as_mut() {
            cluster.kill_9();
        }
        drop(self.fs.take());
        drop(self.cluster.take());
    }
}
