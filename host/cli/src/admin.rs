//! The admin API `sluice deploy` talks to: load or replace modules, read status.
//!
//! It listens on loopback by default. Bound anywhere else it refuses to start without a
//! bearer token, and with a token every request must carry it.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_runtime::{ChildSpec, Host};

/// One module to deploy: the child spec (as in app-config.toml) and the component bytes.
#[derive(Serialize, Deserialize)]
pub struct DeployRequest {
    /// The `[[supervisor.children]]` entry, as JSON.
    pub child: serde_json::Value,
    /// The component, base64.
    pub module_base64: String,
}

struct AdminState {
    host: Host,
    token: Option<String>,
}

/// The admin router. `token`: when set, requests need `Authorization: Bearer <token>`.
pub fn router(host: Host, token: Option<String>) -> Router {
    Router::new()
        .route("/admin/deploy", post(deploy))
        .route("/admin/status", get(status))
        .route("/admin/dlq", get(dlq_list))
        .route("/admin/dlq/replay", post(dlq_replay))
        .route("/admin/dlq/purge", post(dlq_purge))
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(Arc::new(AdminState { host, token }))
}

fn authorized(state: &AdminState, headers: &HeaderMap) -> bool {
    let Some(want) = &state.token else {
        return true;
    };
    let got = crate::ingress::bearer_token(headers);
    // Compare without early exit so timing does not reveal a prefix.
    got.is_some_and(|g| {
        g.len() == want.len()
            && g.bytes()
                .zip(want.bytes())
                .fold(0u8, |a, (x, y)| a | (x ^ y))
                == 0
    })
}

fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, axum::Json(json!({"code": "unauthenticated", "message": "UNAUTHENTICATED: missing or wrong bearer token"}))).into_response()
}

async fn deploy(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    let bad = |m: String| {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"code": "invalid-argument", "message": m})),
        )
            .into_response()
    };
    let req: DeployRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad(format!("INVALID_ARGUMENT: deploy request: {e}")),
    };
    let spec: ChildSpec = match serde_json::from_value(req.child) {
        Ok(s) => s,
        Err(e) => return bad(format!("INVALID_ARGUMENT: child spec: {e}")),
    };
    let bytes = match base64::engine::general_purpose::STANDARD.decode(req.module_base64) {
        Ok(b) => b,
        Err(e) => return bad(format!("INVALID_ARGUMENT: module_base64: {e}")),
    };
    let ty = spec.actor_type.clone();
    match state.host.deploy(spec, bytes).await {
        Ok(version) => (
            StatusCode::OK,
            axum::Json(json!({"actor_type": ty, "version": version})),
        )
            .into_response(),
        Err(e) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({"code": "invalid-module", "message": e.to_string()})),
        )
            .into_response(),
    }
}

async fn status(State(state): State<Arc<AdminState>>, headers: HeaderMap) -> Response {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    axum::Json(
        json!({"actor_types": state.host.status(), "inflight_turns": state.host.inflight_turns(),
            "bus_subscriptions": state.host.bus_stats()}),
    )
    .into_response()
}

/// Which dead letters a replay or purge applies to: one `id`, one `receiver`, or `all`.
#[derive(Serialize, Deserialize, Default)]
pub struct DlqRequest {
    /// One message.
    pub id: Option<i64>,
    /// Every dead letter of one receiver.
    pub receiver: Option<String>,
    /// Every dead letter.
    #[serde(default)]
    pub all: bool,
}

impl DlqRequest {
    fn selector(&self) -> Option<sluice_runtime::outbox::DlqSelector> {
        use sluice_runtime::outbox::DlqSelector;
        match (self.id, &self.receiver, self.all) {
            (Some(id), None, false) => Some(DlqSelector::Id(id)),
            (None, Some(r), false) => Some(DlqSelector::Receiver(r.clone())),
            (None, None, true) => Some(DlqSelector::All),
            _ => None,
        }
    }
}

fn no_outbox() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(
            json!({"code": "unavailable", "message": "UNAVAILABLE: this host has no outbox"}),
        ),
    )
        .into_response()
}

fn outbox_failed(e: impl std::fmt::Display) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({"code": "unavailable", "message": format!("UNAVAILABLE: outbox: {e}")})),
    )
        .into_response()
}

#[derive(Deserialize)]
struct DlqQuery {
    receiver: Option<String>,
    limit: Option<u32>,
}

async fn dlq_list(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<DlqQuery>,
) -> Response {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    let Some(ob) = state.host.outbox() else {
        return no_outbox();
    };
    match ob
        .dlq_list(q.receiver.as_deref(), q.limit.unwrap_or(100).min(10_000))
        .await
    {
        Ok(items) => {
            let items: Vec<_> = items
                .into_iter()
                .map(|d| json!({"id": d.id, "receiver": d.receiver, "msg_type": d.msg_type, "attempts": d.attempts,
                    "reason": d.reason, "last_error": d.last_error, "age_ms": d.age_ms}))
                .collect();
            axum::Json(json!({"dead_letters": items})).into_response()
        }
        Err(e) => outbox_failed(e),
    }
}

async fn dlq_op(
    state: Arc<AdminState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
    replay: bool,
) -> Response {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    let Some(ob) = state.host.outbox() else {
        return no_outbox();
    };
    let sel = serde_json::from_slice::<DlqRequest>(&body)
        .ok()
        .and_then(|r| r.selector());
    let Some(sel) = sel else {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"code": "invalid-argument",
            "message": "INVALID_ARGUMENT: give exactly one of {\"id\": N}, {\"receiver\": \"Type/key\"}, {\"all\": true}"}))).into_response();
    };
    let r = if replay {
        ob.dlq_replay(sel).await
    } else {
        ob.dlq_purge(sel).await
    };
    match r {
        Ok(n) => {
            axum::Json(json!({ if replay { "replayed" } else { "purged" }: n })).into_response()
        }
        Err(e) => outbox_failed(e),
    }
}

async fn dlq_replay(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    dlq_op(state, headers, body, true).await
}

async fn dlq_purge(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    dlq_op(state, headers, body, false).await
}
