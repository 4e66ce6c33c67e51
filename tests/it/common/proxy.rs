//! A TCP proxy for network fault tests, in-process on tokio: it listens on a loopback port
//! of its own and forwards every connection to an upstream address that can be switched at
//! run time (a virtual IP or a pooler moved to a promoted standby). The test can drop every
//! open connection at once, delay every chunk forwarded, blackhole (connections stay open
//! and new ones are accepted, but nothing is forwarded in either direction: half-open
//! connections, as a partition looks to both ends) and go back to normal. Bytes held during
//! a blackhole are forwarded once it ends, as TCP retransmits them after a partition heals.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with the bytes it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward at once.
    Normal,
    /// Forward each chunk after this delay.
    Delay(Duration),
    /// Forward nothing, close nothing.
    Blackhole,
}

/// What every connection watches.
struct Shared {
    upstream: Mutex<SocketAddr>,
    mode: watch::Sender<Mode>,
    /// Raised by [`Proxy::drop_connections`]; a connection ends when it changes.
    generation: watch::Sender<u64>,
}

/// A running proxy; dropping it stops accepting and ends every connection.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        // Binding port 0 on loopback always succeeds on a test machine.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let addr = listener.local_addr().expect("bound address");
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            mode: watch::Sender::new(Mode::Normal),
            generation: watch::Sender::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Proxy {
            addr,
            shared,
            accept,
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// New connections go to `upstream`; open ones stay where they are.
    pub fn switch_upstream(&self, upstream: SocketAddr) {
        *self
            .shared
            .upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = upstream;
    }

    /// Closes every open connection (both sides) now; new ones are accepted as before.
    pub fn drop_connections(&self) {
        self.shared.generation.send_modify(|g| *g += 1);
    }

    /// Forwards each chunk `delay` late.
    pub fn delay(&self, delay: Duration) {
        self.shared.mode.send_replace(Mode::Delay(delay));
    }

    /// Forwards nothing and closes nothing until [`Proxy::normal`].
    pub fn blackhole(&self) {
        self.shared.mode.send_replace(Mode::Blackhole);
    }

    /// Forwards at once again (and what a blackhole held).
    pub fn normal(&self) {
        self.shared.mode.send_replace(Mode::Normal);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.drop_connections();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let mut ended = shared.generation.subscribe();
        ended.mark_unchanged();
        let shared = shared.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = ended.changed() => {}
                _ = serve(client, &shared) => {}
            }
        });
    }
}

/// Forwards one connection until either side closes it.
async fn serve(client: TcpStream, shared: &Shared) {
    // A blackhole also holds new connections: the client's connect has gone through, but
    // nothing reaches the upstream until it ends.
    let mut mode = shared.mode.subscribe();
    if mode.wait_for(|m| *m != Mode::Blackhole).await.is_err() {
        return;
    }
    let upstream = *shared.upstream.lock().unwrap_or_else(|p| p.into_inner());
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        _ = pump(client_read, server_write, shared.mode.subscribe()) => {}
        _ = pump(server_read, client_write, shared.mode.subscribe()) => {}
    }
}

/// Copies one direction chunk by chunk, as the mode says, until EOF or an error.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // Nothing is read during a blackhole, so the sender's buffers fill as in a partition.
        let Ok(now) = mode.wait_for(|m| *m != Mode::Blackhole).await.map(|m| *m) else {
            return;
        };
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if let Mode::Delay(d) = now {
            tokio::time::sleep(d).await;
        }
        // A chunk read just before a blackhole began is held until it ends.
        if mode.wait_for(|m| *m != Mode::Blackhole).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
