//! A TCP proxy between one host and nats-server that the test can cut and heal: a network
//! partition of that host alone, while the server and the other hosts keep running.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A loopback TCP proxy that can be cut (every connection dropped, new ones refused) and
/// healed.
pub struct Proxy {
    addr: SocketAddr,
    open: watch::Sender<bool>,
    _accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Proxies to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (open, _) = watch::channel(true);
        let open_rx = Arc::new(open.subscribe());
        let accept = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                let Ok((mut down, _)) = listener.accept().await else {
                    return;
                };
                if !*open_rx.borrow() {
                    // Partitioned: the connection dies at once.
                    drop(down);
                    continue;
                }
                let upstream = upstream.clone();
                let mut cut = (*open_rx).clone();
                conns.spawn(async move {
                    let Ok(mut up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = copy_bidirectional(&mut down, &mut up) => {}
                        _ = cut.wait_for(|o| !*o) => {}
                    }
                });
            }
        });
        Self {
            addr,
            open,
            _accept: accept,
        }
    }

    /// `nats://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("nats://{}", self.addr)
    }

    /// Drops every connection and refuses new ones.
    pub fn cut(&self) {
        self.open.send_replace(false);
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.open.send_replace(true);
    }
}
