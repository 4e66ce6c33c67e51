//! The Service as kube-proxy makes it, in-process: a loopback port whose connections go, one
//! after the other, to the ready endpoints — a pod joins once its declared readiness probe
//! answers SERVING and leaves as soon as it is being stopped, before its preStop hook runs;
//! a connection already open stays with its pod, as kube-proxy's do. And the probe itself,
//! run as the kubelet runs a `grpc:` probe (podman ignores probes).

use super::manifests::Probe;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tonic::transport::Endpoint;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The Service: its address and its ready endpoints. Dropping it stops accepting.
pub struct Service {
    pub addr: SocketAddr,
    endpoints: Arc<Mutex<Vec<SocketAddr>>>,
    accept: JoinHandle<()>,
}

impl Service {
    /// Listens on a free loopback port, with no endpoint yet.
    pub async fn start() -> Service {
        // Binding port 0 on loopback always succeeds on a test machine.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let addr = listener.local_addr().expect("bound address");
        let endpoints: Arc<Mutex<Vec<SocketAddr>>> = Arc::default();
        let accept = tokio::spawn(accept_loop(listener, endpoints.clone()));
        Service {
            addr,
            endpoints,
            accept,
        }
    }

    /// A ready pod's endpoint joins.
    pub fn add(&self, endpoint: SocketAddr) {
        self.lock().push(endpoint);
    }

    /// A pod being stopped leaves (new connections go elsewhere).
    pub fn remove(&self, endpoint: SocketAddr) {
        self.lock().retain(|e| *e != endpoint);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SocketAddr>> {
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, endpoints: Arc<Mutex<Vec<SocketAddr>>>) {
    let next = AtomicUsize::new(0);
    while let Ok((mut client, _)) = listener.accept().await {
        let endpoint = {
            let ready = endpoints.lock().unwrap_or_else(|p| p.into_inner());
            // No ready endpoint: the connection is refused, as kube-proxy rejects it.
            (!ready.is_empty()).then(|| ready[next.fetch_add(1, Ordering::Relaxed) % ready.len()])
        };
        let Some(endpoint) = endpoint else { continue };
        tokio::spawn(async move {
            let connect = TcpStream::connect(endpoint);
            if let Ok(Ok(mut upstream)) =
                tokio::time::timeout(Duration::from_secs(1), connect).await
            {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
    }
}

/// One run of `probe` against the pod at `ip`: SERVING, another status, or why it failed.
pub async fn check(ip: IpAddr, probe: &Probe) -> Result<ServingStatus, String> {
    // `http://` and an address always make a valid URI.
    let endpoint = Endpoint::from_shared(format!("http://{}", SocketAddr::new(ip, probe.port)))
        .expect("a valid URI")
        .connect_timeout(probe.timeout)
        .timeout(probe.timeout);
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let request = HealthCheckRequest {
        service: probe.service.clone(),
    };
    match HealthClient::new(channel).check(request).await {
        Ok(r) => Ok(r.into_inner().status()),
        Err(status) => Err(format!("call: {status:?}")),
    }
}

/// Runs `probe` every `every` until the pod at `ip` is SERVING; fails after `patience`,
/// showing the last answer and `log()`.
pub async fn wait_serving(
    ip: IpAddr,
    probe: &Probe,
    every: Duration,
    patience: Duration,
    log: impl Fn() -> String,
) {
    let deadline = Instant::now() + patience;
    loop {
        let now = check(ip, probe).await;
        if now == Ok(ServingStatus::Serving) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the pod at {ip} was not ready within {patience:?} (last probe: {now:?}):\n{}",
            log()
        );
        tokio::time::sleep(every).await;
    }
}
