//! Another web site for the cross-site tests: a tiny HTTP/1.1 server on a loopback
//! address the test picks, answering every request with one HTML page, until dropped.

use bytes::Bytes;
use http::{Response, header};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use tokio::task::JoinHandle;

/// A site serving one page.
pub struct Site {
    /// Where it listens.
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Site {
    /// Serves `html` on `ip`, port 0.
    pub async fn serve(ip: IpAddr, html: String) -> Site {
        // Every loopback address (127.0.0.0/8) can be bound on a test machine.
        let listener = tokio::net::TcpListener::bind((ip, 0))
            .await
            .unwrap_or_else(|e| panic!("bind {ip}: {e}"));
        let addr = listener.local_addr().expect("bound address");
        let page = Bytes::from(html);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let page = page.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_request| {
                        let mut answer = Response::new(Full::new(page.clone()));
                        answer.headers_mut().insert(
                            header::CONTENT_TYPE,
                            http::HeaderValue::from_static("text/html; charset=utf-8"),
                        );
                        async move { Ok::<_, Infallible>(answer) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Site { addr, task }
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.task.abort();
    }
}
