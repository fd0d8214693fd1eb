//! Tells to one host share NATS requests: each destination host has a queue and one task that
//! sends whatever has queued (up to [`MAX_BATCH`] tells) as one frame, and hands each tell its
//! own receipt when the frame's reply comes. Up to `[cluster] tell_frames_in_flight` frames
//! (default 8) per host are in flight at once; under load a frame carries many tells, a lone tell goes at once.
//!
//! Order: frames are published in queue order (each request is polled for the first time, so
//! published, before the next is created; async-nats queues publishes FIFO) and the receiving
//! host handles its subject's messages one after another, so tells reach it in queue order. A
//! sender awaits each tell's receipt before its next, so its own tells never share the
//! pipeline; only different senders' tells interleave.

use std::collections::HashMap;
use std::pin::Pin;

use parking_lot::Mutex;
use sluice_cluster::transport::{self as t, Client, Outcome};
use tokio::sync::{mpsc, oneshot};

/// Most tells in one frame.
pub const MAX_BATCH: usize = 64;
/// Tells queued per destination before senders wait (backpressure).
const QUEUE: usize = 4096;

type Queued = (t::Outgoing, oneshot::Sender<Outcome>);
/// The wait for room in a full queue: `false` when the sender task has stopped.
type Room = Pin<Box<dyn Future<Output = bool> + Send>>;

/// The per-destination queues of one host.
pub(crate) struct Batcher {
    client: Client,
    frames_in_flight: usize,
    queues: Mutex<HashMap<String, mpsc::Sender<Queued>>>,
}

impl Batcher {
    pub fn new(client: Client, frames_in_flight: usize) -> Self {
        Self {
            client,
            frames_in_flight: frames_in_flight.max(1),
            queues: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `call` (a tell) to `node` in the next frame; its own outcome, or `None` when
    /// the sender to `node` stopped before a receipt came (the caller names the host in the
    /// error it makes of that).
    ///
    /// The tell is queued before this returns (so tells keep the order of the calls), and
    /// the future holds only the wait for its receipt: it sits inside every remote tell's
    /// future, which should stay small. Queuing touches no reference count: under the lock,
    /// the common case is one `try_send` on the queue as found.
    pub fn tell(
        &self,
        node: &str,
        call: t::Outgoing,
    ) -> impl Future<Output = Option<Outcome>> + use<> {
        let (tx, rx) = oneshot::channel();
        let room: Option<Room> = {
            let mut queues = self.queues.lock();
            let queue = match queues.get(node) {
                Some(q) if !q.is_closed() => q,
                _ => {
                    let q = self.start(node);
                    queues.insert(node.to_string(), q);
                    &queues[node]
                }
            };
            match queue.try_send((call, tx)) {
                Ok(()) => None,
                // Waiting for room is rare: boxed, so that it does not grow the common case.
                Err(mpsc::error::TrySendError::Full(item)) => {
                    let queue = queue.clone();
                    Some(Box::pin(async move { queue.send(item).await.is_ok() }))
                }
                Err(mpsc::error::TrySendError::Closed(_)) => Some(Box::pin(async { false })),
            }
        };
        async move {
            if let Some(room) = room
                && !room.await
            {
                return None;
            }
            rx.await.ok()
        }
    }

    /// Starts the sender task to `node`; its queue.
    fn start(&self, node: &str) -> mpsc::Sender<Queued> {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(send_frames(
            self.client.clone(),
            node.to_string(),
            self.frames_in_flight,
            rx,
        ));
        tx
    }
}

async fn send_frames(
    client: Client,
    node: String,
    max_in_flight: usize,
    mut rx: mpsc::Receiver<Queued>,
) {
    use futures_util::StreamExt;
    use futures_util::stream::FuturesOrdered;
    let mut in_flight = FuturesOrdered::new();
    let mut batch: Vec<Queued> = Vec::with_capacity(MAX_BATCH);
    let mut open = true;
    while open || !in_flight.is_empty() {
        tokio::select! {
            // Replies first, so receipts are handed out before more tells are taken in.
            biased;
            Some((waiters, outcomes)) = in_flight.next(), if !in_flight.is_empty() => {
                let waiters: Vec<oneshot::Sender<Outcome>> = waiters;
                let outcomes: Vec<Outcome> = outcomes;
                for (w, o) in waiters.into_iter().zip(outcomes) {
                    let _ = w.send(o);
                }
            }
            n = rx.recv_many(&mut batch, MAX_BATCH), if open && in_flight.len() < max_in_flight => {
                if n == 0 {
                    open = false;
                    continue;
                }
                let (calls, waiters): (Vec<_>, Vec<_>) = batch.drain(..).unzip();
                let client = client.clone();
                let node = node.clone();
                let mut frame = Box::pin(async move { (waiters, client.send(&node, calls).await) });
                // Publish now, in queue order: the first poll sends the request.
                let first = std::future::poll_fn(|cx| {
                    std::task::Poll::Ready(frame.as_mut().poll(cx))
                })
                .await;
                match first {
                    std::task::Poll::Ready((waiters, outcomes)) => {
                        for (w, o) in waiters.into_iter().zip(outcomes) {
                            let _ = w.send(o);
                        }
                    }
                    std::task::Poll::Pending => in_flight.push_back(frame),
                }
            }
        }
    }
}
