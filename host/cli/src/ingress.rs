//! The HTTP ingress: ask/tell an actor, `/metrics`, `/healthz`.
//!
//! Errors are JSON `{code, message, retry_after_ms, skipped, scope, depth, limit}` with the
//! status of their code: 429 resource-exhausted/overloaded, 404, 400, 503, 504, 500.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use sluice_runtime::{ActorError, CallOptions, Host, OverloadScope, TellReceipt};

/// The header carrying a call's remaining budget in milliseconds.
pub const DEADLINE_HEADER: &str = "x-sluice-deadline-ms";
/// The header naming the principal the call is made for.
pub const PRINCIPAL_HEADER: &str = "x-sluice-principal";

/// The ingress router for `host`.
pub fn router(host: Host) -> Router {
    // Let oversize bodies reach the host so they get its typed INVALID_ARGUMENT, up to a
    // hard transport ceiling of twice the payload limit.
    let limit = host.config().max_payload_bytes.saturating_mul(2);
    Router::new()
        .route("/actors/{ty}/{key}/ask/{msg_type}", post(ask))
        .route("/actors/{ty}/{key}/tell/{msg_type}", post(tell))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(Arc::new(host))
}

/// An error as the wire carries it.
pub fn error_json(e: &ActorError) -> serde_json::Value {
    let (scope, depth, limit) = match &e.overload {
        Some(o) => (
            Some(match o.scope {
                OverloadScope::Actor => "actor",
                OverloadScope::Host => "host",
            }),
            Some(o.depth),
            Some(o.limit),
        ),
        None => (None, None, None),
    };
    json!({
        "code": e.code.as_str(),
        "message": e.to_string(),
        "retry_after_ms": e.retry_after_ms,
        "skipped": e.skipped,
        "kind": match e.code {
            sluice_runtime::ErrorCode::DeadlineExceeded => Some("call-timeout"),
            sluice_runtime::ErrorCode::Overloaded => Some("overloaded"),
            _ => None,
        },
        "scope": scope,
        "depth": depth,
        "limit": limit,
    })
}

fn error_response(e: &ActorError) -> Response {
    let status =
        StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, axum::Json(error_json(e))).into_response();
    if let Some(ms) = e.retry_after_ms {
        let secs = ms.div_ceil(1000).max(1);
        if let Ok(v) = secs.to_string().parse() {
            resp.headers_mut().insert("retry-after", v);
        }
    }
    resp
}

/// Reads the deadline header: a positive finite number of milliseconds, re-anchored on this
/// host's clock. Anything else is ignored and the host default applies.
pub fn deadline_from(headers: &HeaderMap) -> Option<Instant> {
    let text = headers.get(DEADLINE_HEADER)?.to_str().ok()?;
    sluice_flow::deadline::budget_from_header(text).map(|b| Instant::now() + b)
}

fn options(headers: &HeaderMap) -> CallOptions {
    CallOptions {
        deadline: deadline_from(headers),
        principal: headers
            .get(PRINCIPAL_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|p| !p.is_empty() && p.len() <= 256)
            .map(Arc::from),
        sender: None,
        internal: false,
    }
}

async fn ask(
    State(host): State<Arc<Host>>,
    Path((ty, key, msg_type)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match host
        .ask_with(
            &format!("{ty}/{key}"),
            &msg_type,
            body.to_vec(),
            options(&headers),
        )
        .await
    {
        Ok(reply) => (StatusCode::OK, reply).into_response(),
        Err(e) => error_response(&e),
    }
}

async fn tell(
    State(host): State<Arc<Host>>,
    Path((ty, key, msg_type)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match host.tell_with(
        &format!("{ty}/{key}"),
        &msg_type,
        body.to_vec(),
        options(&headers),
    ) {
        Ok(r) => {
            let receipt = match r {
                TellReceipt::Queued => "queued",
                TellReceipt::DisplacedOldest => "displaced-oldest",
                TellReceipt::DroppedNewest => "dropped-newest",
            };
            (
                StatusCode::ACCEPTED,
                axum::Json(json!({"receipt": receipt})),
            )
                .into_response()
        }
        Err(e) => error_response(&e),
    }
}

async fn metrics() -> Response {
    let body = crate::metrics_export::handle().render();
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}
