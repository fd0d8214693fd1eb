//! Tells to one host share NATS requests: each destination host has a queue and one task that
//! sends whatever has queued (up to [`MAX_BATCH`] tells) as one frame, waits for the frame's
//! receipts, hands each tell its own, and sends the next. Under load a frame carries many
//! tells; a lone tell goes at once. Tells keep their order per destination (one frame in
//! flight per host, calls in queue order).

use std::collections::HashMap;

use parking_lot::Mutex;
use sluice_cluster::transport::{self as t, Client, Outcome};
use tokio::sync::{mpsc, oneshot};

/// Most tells in one frame.
pub const MAX_BATCH: usize = 64;
/// Tells queued per destination before senders wait (backpressure).
const QUEUE: usize = 4096;

type Queued = (t::Outgoing, oneshot::Sender<Outcome>);

/// The per-destination queues of one host.
pub(crate) struct Batcher {
    client: Client,
    queues: Mutex<HashMap<String, mpsc::Sender<Queued>>>,
}

impl Batcher {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            queues: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `call` (a tell) to `node` in the next frame; its own outcome.
    pub async fn tell(&self, node: &str, call: t::Outgoing) -> Outcome {
        let (tx, rx) = oneshot::channel();
        let queue = self.queue(node);
        if queue.send((call, tx)).await.is_err() {
            return Outcome::Failed(t::ErrorRecord::unavailable(&format!(
                "the sender to host {node} stopped"
            )));
        }
        rx.await.unwrap_or_else(|_| {
            Outcome::Failed(t::ErrorRecord::unavailable(&format!(
                "the sender to host {node} stopped before a receipt came"
            )))
        })
    }

    fn queue(&self, node: &str) -> mpsc::Sender<Queued> {
        let mut queues = self.queues.lock();
        if let Some(q) = queues.get(node)
            && !q.is_closed()
        {
            return q.clone();
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(send_frames(self.client.clone(), node.to_string(), rx));
        queues.insert(node.to_string(), tx.clone());
        tx
    }
}

async fn send_frames(client: Client, node: String, mut rx: mpsc::Receiver<Queued>) {
    let mut batch: Vec<Queued> = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (calls, waiters): (Vec<_>, Vec<_>) = batch.drain(..).unzip();
        let outcomes = client.send(&node, calls).await;
        for (w, o) in waiters.into_iter().zip(outcomes) {
            let _ = w.send(o);
        }
    }
}
