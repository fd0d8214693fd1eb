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
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(Arc::new(AdminState { host, token }))
}

fn authorized(state: &AdminState, headers: &HeaderMap) -> bool {
    let Some(want) = &state.token else {
        return true;
    };
    let got = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
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
        json!({"actor_types": state.host.status(), "inflight_turns": state.host.inflight_turns()}),
    )
    .into_response()
}
