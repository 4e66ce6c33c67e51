//! The claimd under test as a child process: started with `serve --listen 127.0.0.1:<free
//! port> --metrics-listen off --db-pool-size N` and either `--database-url` (PostgreSQL,
//! payloads sealed under a random key passed in `CLAIMD_SEAL_KEYS`) or `--data-dir` (the
//! embedded SQLite store, which makes its own seal key), with no other `CLAIMD_*` variable
//! inherited (a policy file goes in as `--config`), its output appended to a log file; ready once health answers SERVING for
//! `claimd.v1.ClaimService`; stopped with SIGTERM (SIGKILL after 30 s; killed on drop, and
//! sent SIGTERM by the kernel if this process dies first).

use crate::cli::StoreKind;
use anyhow::{Context, bail};
use base64::Engine;
use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// How long claimd may take to start serving, and to exit after SIGTERM.
const PATIENCE: Duration = Duration::from_secs(30);

/// How to start claimd; the same for every start in a run.
pub struct Launch {
    /// The binary.
    pub binary: PathBuf,
    /// Which store.
    pub store: StoreKind,
    /// PostgreSQL's URL (`--store postgres`).
    pub database_url: Option<String>,
    /// The embedded store's directory (`--store sqlite`).
    pub data_dir: PathBuf,
    /// Where its output goes.
    pub log: PathBuf,
    /// The seal key for PostgreSQL (base64), one per run.
    pub seal_key: String,
    /// The policy file passed as `--config`, if any.
    pub config: Option<PathBuf>,
}

impl Launch {
    /// The binary next to this executable, unless `binary` names one.
    pub fn default_binary(binary: Option<PathBuf>) -> anyhow::Result<PathBuf> {
        let path = match binary {
            Some(path) => path,
            None => std::env::current_exe()?
                .parent()
                .context("this executable has no directory")?
                .join("claimd"),
        };
        if !path.is_file() {
            bail!(
                "no claimd binary at {} (build it, or pass --claimd PATH)",
                path.display()
            );
        }
        Ok(path)
    }

    /// A random 32-byte seal key, base64.
    pub fn random_seal_key() -> String {
        base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>())
    }

    /// `claimd <args>` with the database flags and a clean environment.
    fn command(&self, args: &[&str]) -> anyhow::Result<Command> {
        let mut cmd = Command::new(&self.binary);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CLAIMD_") {
                cmd.env_remove(name);
            }
        }
        cmd.args(args);
        match (&self.store, &self.database_url) {
            (StoreKind::Postgres, Some(url)) => {
                cmd.arg("--database-url").arg(url);
                cmd.env("CLAIMD_SEAL_KEYS", &self.seal_key);
            }
            _ => {
                cmd.arg("--data-dir").arg(&self.data_dir);
            }
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        Ok(cmd)
    }

    /// Migrates, then creates one API key for each of the tenants `bench-1` … `bench-n`
    /// (`claimd keys create`); the keys, in tenant order.
    pub fn create_keys(&self, n: usize) -> anyhow::Result<Vec<String>> {
        self.migrate()?;
        let mut keys = Vec::with_capacity(n);
        for i in 1..=n {
            let tenant = format!("bench-{i}");
            let mut cmd = self.command(&["keys", "create", "--tenant", &tenant])?;
            cmd.arg("--label").arg("claimd-bench");
            let out = cmd.stdout(Stdio::piped()).output()?;
            if !out.status.success() {
                bail!(
                    "claimd keys create --tenant {tenant} failed ({}):\n{}",
                    out.status,
                    tail(&self.log)
                );
            }
            let key = String::from_utf8(out.stdout)?.trim().to_owned();
            if !key.starts_with("claimd_") {
                bail!("claimd keys create --tenant {tenant} printed no key");
            }
            keys.push(key);
        }
        Ok(keys)
    }

    /// Runs `claimd migrate` to the end.
    pub fn migrate(&self) -> anyhow::Result<()> {
        let status = self.command(&["migrate"])?.status()?;
        if !status.success() {
            bail!("claimd migrate failed ({status}):\n{}", tail(&self.log));
        }
        Ok(())
    }
}

/// A claimd child process; killed if dropped while running.
pub struct Claimd {
    child: Child,
    /// Where it serves gRPC.
    pub addr: String,
    log: PathBuf,
}

impl Claimd {
    /// Starts claimd with a pool of `pool_size` connections and waits until it serves.
    pub async fn start(launch: &Launch, pool_size: usize) -> anyhow::Result<Claimd> {
        let addr = free_port()?;
        let pool = pool_size.to_string();
        let args = [
            "serve",
            "--listen",
            &addr,
            "--metrics-listen",
            "off",
            "--db-pool-size",
            &pool,
        ];
        let mut cmd = launch.command(&args)?;
        if let Some(config) = &launch.config {
            cmd.arg("--config").arg(config);
        }
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // claimd gets SIGTERM if this process dies without stopping it (a signal, a
                // panic), so no benchmark server outlives its run.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().context("cannot start claimd")?;
        let mut claimd = Claimd {
            child,
            addr,
            log: launch.log.clone(),
        };
        claimd.wait_until_serving().await?;
        Ok(claimd)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Polls health until SERVING; an error with the log's tail if claimd exits first or
    /// takes longer than [`PATIENCE`].
    async fn wait_until_serving(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "claimd exited before serving ({status}):\n{}",
                    tail(&self.log)
                );
            }
            if serving(&self.addr).await {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("claimd did not serve within 30 s:\n{}", tail(&self.log));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then waits for the exit (SIGKILL after 30 s).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let pid = libc::pid_t::try_from(self.child.id())?;
        // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + PATIENCE;
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                self.child.kill()?;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
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

/// Whether health on `addr` answers SERVING for ClaimService.
pub async fn serving(addr: &str) -> bool {
    let Ok(endpoint) = Channel::from_shared(format!("http://{addr}")) else {
        return false;
    };
    let endpoint = endpoint.connect_timeout(Duration::from_secs(1));
    let Ok(channel) = endpoint.connect().await else {
        return false;
    };
    let request = HealthCheckRequest {
        service: "claimd.v1.ClaimService".into(),
    };
    match HealthClient::new(channel).check(request).await {
        Ok(reply) => reply.into_inner().status() == ServingStatus::Serving,
        Err(_) => false,
    }
}

/// A loopback address nobody listens on right now.
fn free_port() -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.to_string())
}

/// The last lines of the log at `path`.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
