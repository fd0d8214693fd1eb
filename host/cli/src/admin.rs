//! The admin API `sluice deploy` talks to: load or replace modules, read status, manage the
//! DLQ; and the web console at `/ui` (see [`crate::console`]).
//!
//! It listens on loopback by default. Bound anywhere else it refuses to start without a
//! bearer token, and with a token every request must carry it. One check ([`guard`]) stands
//! in front of every route, the console's included; browsers may send the token as the
//! password of HTTP Basic authentication, since a page cannot set a bearer header.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_runtime::{ChildSpec, Host};

use crate::console::Console;

/// One module to deploy: the child spec (as in app-config.toml) and the component bytes.
#[derive(Serialize, Deserialize)]
pub struct DeployRequest {
    /// The `[[supervisor.children]]` entry, as JSON.
    pub child: serde_json::Value,
    /// The component, base64.
    pub module_base64: String,
    /// The app the deploy is meant for: a host running an app of another name refuses it
    /// (409, `failed-precondition`). Absent: deploy whatever the host runs (`--force`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

/// The wait for a deploy's roll-out report.
pub type RollOutFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = serde_json::Value> + Send>>;

/// What the admin API does on a member of a cluster.
pub trait ClusterAdmin: Send + Sync + 'static {
    /// The `cluster` part of `/admin/status`.
    fn status(&self) -> serde_json::Value;
    /// After a deploy on this host: roll it out to every member; the per-host report.
    fn roll_out(&self, spec: ChildSpec, bytes: Vec<u8>) -> RollOutFuture;
}

/// A member's admin side.
pub type ClusterInfo = Arc<dyn ClusterAdmin>;

struct AdminState {
    host: Host,
    /// The cluster's part of the status, on a clustered host.
    cluster: Option<ClusterInfo>,
    /// The app this host runs (`sluice run`'s), reported by `/admin/status` and checked on
    /// deploy; `None` for a host that has no app folder (embedded, tests).
    app: Option<String>,
}

/// The admin router. `token`: when set, requests need `Authorization: Bearer <token>`.
pub fn router(host: Host, token: Option<String>) -> Router {
    with_guard(admin_routes(host, None), token)
}

/// The admin router with the web console mounted at `/ui`, behind the same check.
pub fn router_with_console(host: Host, token: Option<String>, console: &Console) -> Router {
    with_guard(admin_routes(host, None).merge(console.router()), token)
}

/// As [`router_with_console`], for a host running the app named `app`: `/admin/status`
/// reports the name and a deploy meant for another app is refused.
pub fn app_router(host: Host, token: Option<String>, console: &Console, app: String) -> Router {
    with_guard(admin_routes(host, Some(app)).merge(console.router()), token)
}

/// As [`app_router`], on a member of a cluster: `/admin/status` adds `cluster` (this host's
/// node id, the live members and their types, its claims and lease).
pub fn cluster_router(
    host: Host,
    token: Option<String>,
    console: &Console,
    app: String,
    cluster: ClusterInfo,
) -> Router {
    let routes = admin_routes_with(host, Some(app), Some(cluster));
    with_guard(routes.merge(console.router()), token)
}

fn admin_routes(host: Host, app: Option<String>) -> Router {
    admin_routes_with(host, app, None)
}

fn admin_routes_with(host: Host, app: Option<String>, cluster: Option<ClusterInfo>) -> Router {
    Router::new()
        .route("/admin/deploy", post(deploy))
        .route("/admin/status", get(status))
        .route("/admin/dlq", get(dlq_list))
        .route("/admin/dlq/replay", post(dlq_replay))
        .route("/admin/dlq/purge", post(dlq_purge))
        .route("/admin/reminders", get(reminders_list))
        .route("/admin/reminders/cancel", post(reminder_cancel))
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(Arc::new(AdminState { host, cluster, app }))
}

fn with_guard(routes: Router, token: Option<String>) -> Router {
    routes
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(no_route)
        .layer(middleware::from_fn_with_state(Arc::new(token), guard))
}

/// A path the admin listener does not serve: the typed body, like every other refusal.
async fn no_route() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"code": "not-found", "message": "NOT_FOUND: no such route: the admin listener serves /admin/deploy, /admin/status, /admin/dlq, /admin/dlq/replay, /admin/dlq/purge, /admin/reminders, /admin/reminders/cancel and the console at /ui"})),
    )
        .into_response()
}

async fn method_not_allowed(method: Method) -> Response {
    // The router adds the `Allow` header.
    (
        StatusCode::METHOD_NOT_ALLOWED,
        axum::Json(json!({"code": "invalid-argument", "message": format!("INVALID_ARGUMENT: method {method} is not allowed on this route (see the Allow header)")})),
    )
        .into_response()
}

/// The one check in front of every admin and console route:
/// - with a token, the request must carry it (`Authorization: Bearer <token>`, or HTTP Basic
///   with the token as the password);
/// - without one (loopback only), the `Host` must name a loopback address, so a web page
///   whose name was rebound to 127.0.0.1 cannot read the console;
/// - a request a browser marks with an `Origin` (a page's fetch or form) must come from a page
///   of this listener, so another site cannot replay or purge the DLQ through the browser.
async fn guard(State(token): State<Arc<Option<String>>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let refusal = match token.as_deref() {
        Some(want) if !authorized(want, headers) => Some(unauthorized()),
        None if !host_is_loopback(headers) => Some(forbidden(
            "the admin API without a token answers loopback names only",
        )),
        _ if req.method() != Method::GET
            && req.method() != Method::HEAD
            && !same_origin(headers) =>
        {
            Some(forbidden("cross-origin request refused"))
        }
        _ => None,
    };
    match refusal {
        Some(response) => refuse(req, response).await,
        None => next.run(req).await,
    }
}

/// The most of a refused request's body that is read and dropped before the answer.
const REFUSED_BODY_DRAIN: usize = 256 << 20;
/// How long a refused request's sender gets to finish sending its body.
const REFUSED_BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Answers a refused request after reading (and dropping) the body it is still sending.
///
/// Answering first and closing the connection with the body unread makes the kernel reset
/// it, and a client still writing (a `sluice deploy` with a wrong token sends megabytes)
/// then sees a broken connection instead of the 401 that says why. The drain is bounded by
/// the admin API's own body limit and a deadline; past either the connection closes.
async fn refuse(req: Request, mut response: Response) -> Response {
    use futures_util::StreamExt as _;
    let mut body = req.into_body().into_data_stream();
    let mut read = 0usize;
    let drained = tokio::time::timeout(REFUSED_BODY_WAIT, async {
        while let Some(Ok(chunk)) = body.next().await {
            read += chunk.len();
            if read > REFUSED_BODY_DRAIN {
                return false;
            }
        }
        true
    })
    .await
    .unwrap_or(false);
    if !drained {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    response
}

/// The token a request carries: a bearer token, or the password of HTTP Basic credentials.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    if let Some(t) = crate::ingress::bearer_token(headers) {
        return Some(t.to_string());
    }
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, b64) = v.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (_, password) = text.split_once(':')?;
    Some(password.to_string())
}

fn authorized(want: &str, headers: &HeaderMap) -> bool {
    let got = presented_token(headers);
    // Compare without early exit so timing does not reveal a prefix.
    got.is_some_and(|g| {
        g.len() == want.len()
            && g.bytes()
                .zip(want.bytes())
                .fold(0u8, |a, (x, y)| a | (x ^ y))
                == 0
    })
}

/// Whether the `Host` header names a loopback address (`localhost`, `*.localhost`,
/// 127.0.0.0/8, `[::1]`), with or without a port. A request without one (HTTP/1.0) passes:
/// a browser always sends it.
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    let name = name.to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// No `Origin`, or one whose `host[:port]` is this request's `Host`.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let (Ok(origin), Some(Ok(host))) = (
        origin.to_str(),
        headers.get(header::HOST).map(|h| h.to_str()),
    ) else {
        return false;
    };
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

fn forbidden(why: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        axum::Json(
            json!({"code": "permission-denied", "message": format!("PERMISSION_DENIED: {why}")}),
        ),
    )
        .into_response()
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        // The challenge makes a browser ask for credentials (the token as the password).
        [(header::WWW_AUTHENTICATE, r#"Basic realm="sluice admin", charset="UTF-8""#)],
        axum::Json(json!({"code": "unauthenticated", "message": "UNAUTHENTICATED: missing or wrong bearer token"})),
    )
        .into_response()
}

/// `invalid-argument` with this status: a request the admin API cannot take as sent.
fn invalid(status: StatusCode, message: String) -> Response {
    (
        status,
        axum::Json(json!({"code": "invalid-argument", "message": message})),
    )
        .into_response()
}

/// A body that could not be read (413 past the size limit, 400 otherwise), typed.
fn unreadable(r: BytesRejection) -> Response {
    invalid(r.status(), format!("INVALID_ARGUMENT: {}", r.body_text()))
}

async fn deploy(
    State(state): State<Arc<AdminState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(r) => return unreadable(r),
    };
    let bad = |m: String| invalid(StatusCode::BAD_REQUEST, m);
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
    if let (Some(want), Some(have)) = (&req.app, &state.app)
        && want != have
    {
        return (
            StatusCode::CONFLICT,
            axum::Json(json!({"code": "failed-precondition",
                "message": format!("FAILED_PRECONDITION: this host runs app {have:?}, not {want:?}")})),
        )
            .into_response();
    }
    let ty = spec.actor_type.clone();
    let for_cluster = state
        .cluster
        .as_ref()
        .map(|_| (spec.clone(), bytes.clone()));
    match state.host.deploy_report(spec, bytes).await {
        Ok(d) => {
            let mut body = json!({"actor_type": ty, "version": d.version, "unchanged": d.unchanged,
                "cached": d.cached, "compile_ms": d.compile_time.as_millis() as u64,
                "app": state.app});
            if let (Some(cluster), Some((spec, bytes))) = (&state.cluster, for_cluster) {
                body["cluster"] = cluster.roll_out(spec, bytes).await;
            }
            (StatusCode::OK, axum::Json(body)).into_response()
        }
        Err(e) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({"code": "invalid-module", "message": e.to_string()})),
        )
            .into_response(),
    }
}

async fn status(State(state): State<Arc<AdminState>>) -> Response {
    let mut body = json!({"app": state.app, "actor_types": state.host.status(), "inflight_turns": state.host.inflight_turns(),
        "bus_subscriptions": state.host.bus_stats()});
    if let Some(cluster) = &state.cluster {
        body["cluster"] = cluster.status();
    }
    axum::Json(body).into_response()
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
struct ListQuery {
    receiver: Option<String>,
    limit: Option<u32>,
}

/// What a listing (`GET /admin/dlq`, `/admin/reminders`) reads: the outbox, the receiver it is
/// limited to and how many at most (default 100, at most 10,000); or the typed refusal.
#[allow(clippy::result_large_err)] // the refusal is the response itself
fn listing(
    state: &AdminState,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<(&Arc<sluice_runtime::outbox::Outbox>, Option<String>, u32), Response> {
    let q = match q {
        Ok(Query(q)) => q,
        Err(r) => {
            return Err(invalid(
                StatusCode::BAD_REQUEST,
                format!("INVALID_ARGUMENT: {}", r.body_text()),
            ));
        }
    };
    let ob = state.host.outbox().ok_or_else(no_outbox)?;
    Ok((ob, q.receiver, q.limit.unwrap_or(100).min(10_000)))
}

async fn dlq_list(
    State(state): State<Arc<AdminState>>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    let (ob, receiver, limit) = match listing(&state, q) {
        Ok(l) => l,
        Err(refused) => return refused,
    };
    match ob.dlq_list(receiver.as_deref(), limit).await {
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
    body: Result<Bytes, BytesRejection>,
    replay: bool,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(r) => return unreadable(r),
    };
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
    body: Result<Bytes, BytesRejection>,
) -> Response {
    dlq_op(state, body, true).await
}

async fn dlq_purge(
    State(state): State<Arc<AdminState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    dlq_op(state, body, false).await
}

/// `GET /admin/reminders[?receiver=Type/key][&limit=N]`: pending reminders, soonest due first.
async fn reminders_list(
    State(state): State<Arc<AdminState>>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    let (ob, receiver, limit) = match listing(&state, q) {
        Ok(l) => l,
        Err(refused) => return refused,
    };
    match ob.reminders(receiver.as_deref(), limit).await {
        Ok(items) => {
            let items: Vec<_> = items
                .into_iter()
                .map(|r| {
                    json!({"id": r.id, "receiver": r.receiver, "name": r.name,
                    "msg_type": r.msg_type, "due_at_ms": r.due_at_ms, "due_in_ms": r.due_in_ms,
                    "payload_bytes": r.payload_bytes, "age_ms": r.age_ms})
                })
                .collect();
            axum::Json(json!({ "reminders": items })).into_response()
        }
        Err(e) => outbox_failed(e),
    }
}

/// The body of `POST /admin/reminders/cancel`.
#[derive(Debug, Serialize, Deserialize)]
pub struct CancelReminder {
    /// The actor whose reminder it is (`Type/key`).
    pub receiver: String,
    /// The reminder's name (anonymous reminders cannot be cancelled).
    pub name: String,
}

/// `POST /admin/reminders/cancel {"receiver": "Type/key", "name": "…"}`: whether one was
/// pending.
async fn reminder_cancel(
    State(state): State<Arc<AdminState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(r) => return unreadable(r),
    };
    let Some(ob) = state.host.outbox() else {
        return no_outbox();
    };
    let req = match serde_json::from_slice::<CancelReminder>(&body) {
        Ok(r) if !r.name.is_empty() => r,
        _ => {
            return invalid(
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT: give {\"receiver\": \"Type/key\", \"name\": \"…\"} (a named reminder)"
                    .into(),
            );
        }
    };
    if let Err(e) = sluice_runtime::ActorId::parse(&req.receiver) {
        return invalid(StatusCode::BAD_REQUEST, e.to_string());
    }
    match ob.cancel_reminder(&req.receiver, &req.name).await {
        Ok(cancelled) => axum::Json(json!({ "cancelled": cancelled })).into_response(),
        Err(e) => outbox_failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_token_comes_as_a_bearer_token_or_a_basic_password() {
        let basic = |s: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(s)
            )
        };
        assert!(authorized(
            "t0k",
            &headers(&[("authorization", "Bearer t0k")])
        ));
        assert!(authorized(
            "t0k",
            &headers(&[("authorization", &basic("anyone:t0k"))])
        ));
        assert!(authorized(
            "t:k",
            &headers(&[("authorization", &basic("u:t:k"))])
        ));
        assert!(!authorized(
            "t0k",
            &headers(&[("authorization", &basic("t0k"))])
        ));
        assert!(!authorized(
            "t0k",
            &headers(&[("authorization", &basic("u:t0"))])
        ));
        assert!(!authorized(
            "t0k",
            &headers(&[("authorization", "Basic !!!")])
        ));
        assert!(!authorized(
            "t0k",
            &headers(&[("authorization", "Bearer t0kk")])
        ));
        assert!(!authorized("t0k", &headers(&[])));
    }

    #[test]
    fn only_loopback_host_names_pass_without_a_token() {
        for ok in [
            "127.0.0.1:7401",
            "127.3.2.1",
            "localhost:1",
            "LOCALHOST",
            "app.localhost:9",
            "[::1]:7401",
            "[::1]",
        ] {
            assert!(host_is_loopback(&headers(&[("host", ok)])), "{ok}");
        }
        for bad in [
            "rebound.example:7401",
            "10.0.0.1:7401",
            "localhost.evil.example",
            "[::2]:1",
            "[fe80::1]",
        ] {
            assert!(!host_is_loopback(&headers(&[("host", bad)])), "{bad}");
        }
        assert!(host_is_loopback(&headers(&[])), "HTTP/1.0 without Host");
    }

    #[test]
    fn a_posted_origin_must_be_this_listener() {
        let h = |o: &str| headers(&[("host", "127.0.0.1:7401"), ("origin", o)]);
        assert!(same_origin(&headers(&[("host", "127.0.0.1:7401")])));
        assert!(same_origin(&h("http://127.0.0.1:7401")));
        assert!(!same_origin(&h("http://127.0.0.1:7402")));
        assert!(!same_origin(&h("http://evil.example")));
        assert!(!same_origin(&h("null")));
    }
}
