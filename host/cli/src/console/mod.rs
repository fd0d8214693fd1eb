//! The web console at `/ui` on the admin listener: static pages embedded in the binary
//! (bundled from pinned npm packages at build time, see `host/cli/console/`), the frames
//! the [`sampler`] takes once a second, and a live stream of new ones (server-sent events).
//!
//! It is mounted inside the admin router, so the admin API's one check guards it: open on
//! loopback, the admin token everywhere else. The DLQ panel calls the admin API itself.

mod assets;
pub mod frame;
pub mod recorder;
pub mod sampler;

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::Stream;
use sluice_runtime::Host;
use tokio::task::JoinHandle;

pub use frame::Frame;
pub use recorder::ConsoleRecorder;
pub use sampler::{ConsoleConfig, Frames};

/// The path the console is served under.
pub const PATH: &str = "/ui";

/// A running console: the sampler task and its frames. Clones share them; the sampler stops
/// when the last clone is dropped.
#[derive(Clone)]
pub struct Console {
    frames: Arc<Frames>,
    _task: Arc<AbortOnDrop>,
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Console {
    /// Starts sampling `host` from the process's console recorder
    /// ([`crate::metrics_export::console_recorder`]). Must run inside a tokio runtime.
    pub fn start(host: Host, config: ConsoleConfig) -> Self {
        let recorder = crate::metrics_export::console_recorder().clone();
        let mut sampler = sampler::Sampler::new(host, recorder, config);
        let frames = Arc::clone(&sampler.frames);
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(config.sample_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                sampler.sample();
            }
        });
        Self {
            frames,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// The frames taken so far.
    pub fn frames(&self) -> &Arc<Frames> {
        &self.frames
    }

    /// The console's routes (no authentication of their own: mount them behind the admin
    /// router's check, as [`crate::admin::router_with_console`] does).
    pub fn router(&self) -> Router {
        Router::new()
            .route(PATH, get(assets::index))
            .route("/ui/", get(assets::index))
            .route("/ui/app.js", get(assets::script))
            .route("/ui/app.css", get(assets::style))
            .route("/ui/api/frames", get(history))
            .route("/ui/api/stream", get(stream))
            .with_state(Arc::clone(&self.frames))
    }
}

async fn history(State(frames): State<Arc<Frames>>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        frames.history_json(),
    )
        .into_response()
}

/// Each new frame as an SSE `frame` event; a slow reader skips to the newest.
async fn stream(
    State(frames): State<Arc<Frames>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = frames.subscribe();
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok()?;
        let data = rx.borrow_and_update().clone();
        let event = Event::default()
            .event("frame")
            .data(data.as_deref().unwrap_or("null"));
        Some((Ok(event), rx))
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
