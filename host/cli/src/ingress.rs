//! The HTTP ingress: ask/tell an actor, `/metrics`, `/healthz`.
//!
//! Errors are JSON `{code, message, retry_after_ms, skipped, kind, scope, depth, limit}`
//! with the status of their code: 429 resource-exhausted/overloaded, 404, 400, 503, 504, 500.
//! Every refusal has that body, the ingress's own included: 401/403 for the principal, 400
//! for a path that is not UTF-8 or a bad type, key or msg_type, 404 for an unknown route,
//! 405 for a wrong method, and, served through [`serve`], the 400/414/431 hyper gives a
//! request it cannot parse (see [`transport`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Extension, Path, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use sluice_app::IngressSettings;
use sluice_runtime::{ActorError, CallOptions, Host, OverloadScope, TellReceipt};
use tracing::Instrument;

pub mod transport;

/// The header carrying a call's remaining budget in milliseconds.
pub const DEADLINE_HEADER: &str = "x-sluice-deadline-ms";
/// The header naming the principal the call is made for.
pub const PRINCIPAL_HEADER: &str = "x-sluice-principal";
/// The W3C trace context header: continued by the call's span when present, and answered
/// with the span's own context when traces are on.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Who may call the ingress, and as which principal (from the app config's `[ingress]`).
///
/// - A request with `Authorization: Bearer T` runs as the principal `T` stands for; an
///   unknown token is 401. A token's own principal cannot be overridden: a different
///   `x-sluice-principal` is 403. A gateway token (principal `"*"`) takes the principal
///   from `x-sluice-principal` (`system` when absent).
/// - Without a token: refused (401) when tokens are configured. With none configured, the
///   call runs as `x-sluice-principal` only if the ingress listens on loopback (a
///   development setup, where whoever can connect already runs on the machine); otherwise a
///   request naming a principal is 401, and one naming none runs as `system`.
#[derive(Clone, Default)]
pub struct IngressAuth {
    tokens: HashMap<String, Grant>,
    trust_header: bool,
}

#[derive(Clone)]
enum Grant {
    Principal(Arc<str>),
    Gateway,
}

impl std::fmt::Debug for IngressAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the tokens.
        f.debug_struct("IngressAuth")
            .field("tokens", &self.tokens.len())
            .field("trust_header", &self.trust_header)
            .finish()
    }
}

/// A request the ingress refuses itself: status, canonical code, detail.
struct Refusal(StatusCode, &'static str, String);

impl IngressAuth {
    /// The rules for an ingress with these settings, listening on a loopback address or not.
    pub fn new(settings: &IngressSettings, loopback: bool) -> Self {
        let tokens = settings
            .tokens
            .iter()
            .map(|(t, p)| {
                let grant = if p == "*" {
                    Grant::Gateway
                } else {
                    Grant::Principal(Arc::from(p.as_str()))
                };
                (t.clone(), grant)
            })
            .collect();
        Self {
            tokens,
            trust_header: loopback,
        }
    }

    /// No tokens, and `x-sluice-principal` believed: an ingress on loopback.
    pub fn loopback() -> Self {
        Self::new(&IngressSettings::default(), true)
    }

    /// Whether requests must carry a token.
    pub fn requires_token(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The principal `headers` may act as (`None` = `system`), or why not.
    fn principal(&self, headers: &HeaderMap) -> Result<Option<Arc<str>>, Refusal> {
        let claimed = match headers.get(PRINCIPAL_HEADER) {
            None => None,
            Some(v) => match v.to_str() {
                Ok(p) if !p.is_empty() && p.len() <= 256 && !p.chars().any(char::is_control) => {
                    Some(p)
                }
                _ => {
                    return Err(Refusal(
                        StatusCode::BAD_REQUEST,
                        "INVALID_ARGUMENT",
                        format!("{PRINCIPAL_HEADER} must be 1..=256 printable characters"),
                    ));
                }
            },
        };
        let bearer = bearer_token(headers);
        let unauthenticated =
            |why: &str| Refusal(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", why.to_string());
        match bearer {
            Some(token) => match self.tokens.get(token) {
                None => Err(unauthenticated("unknown bearer token")),
                Some(Grant::Gateway) => Ok(claimed.map(Arc::from)),
                Some(Grant::Principal(p)) => match claimed {
                    Some(c) if c != &**p => Err(Refusal(
                        StatusCode::FORBIDDEN,
                        "PERMISSION_DENIED",
                        format!("this token acts as {p:?}, not {c:?}"),
                    )),
                    _ => Ok(Some(p.clone())),
                },
            },
            None if self.requires_token() => Err(unauthenticated(
                "this ingress requires Authorization: Bearer <token>",
            )),
            None if claimed.is_some() && !self.trust_header => Err(unauthenticated(
                "x-sluice-principal needs a token ([ingress.tokens]) when the ingress is not on loopback",
            )),
            None => Ok(claimed.map(Arc::from)),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

struct IngressState {
    host: Host,
    auth: IngressAuth,
}

/// The ingress router for `host` on loopback without tokens (see [`IngressAuth::loopback`]).
pub fn router(host: Host) -> Router {
    router_with(host, IngressAuth::loopback())
}

/// The ingress router for `host` with these authentication rules.
pub fn router_with(host: Host, auth: IngressAuth) -> Router {
    // Let oversize bodies reach the host so they get its typed INVALID_ARGUMENT, up to a
    // hard transport ceiling of twice the payload limit.
    let limit = host.config().max_payload_bytes.saturating_mul(2);
    Router::new()
        .route("/actors/{type}/{key}/ask/{msg_type}", post(ask))
        .route("/actors/{type}/{key}/tell/{msg_type}", post(tell))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        // After the routes: it applies to those present.
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(Arc::new(IngressState { host, auth }))
}

/// Serves an ingress `router` on `listener`, with hyper's own refusals typed as well (see
/// [`transport`]). This is how `sluice run` serves its ingress.
pub async fn serve(listener: tokio::net::TcpListener, router: Router) -> std::io::Result<()> {
    axum::serve(
        transport::Listener::new(listener),
        router.into_make_service_with_connect_info::<transport::Connection>(),
    )
    .await
}

async fn no_route() -> Response {
    Refusal(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        "no such route: the ingress serves POST /actors/{type}/{key}/ask/{msg_type}, \
         POST /actors/{type}/{key}/tell/{msg_type}, GET /metrics and GET /healthz"
            .into(),
    )
    .into_response()
}

async fn method_not_allowed(method: Method) -> Response {
    // The router adds the `Allow` header.
    Refusal(
        StatusCode::METHOD_NOT_ALLOWED,
        "INVALID_ARGUMENT",
        format!("method {method} is not allowed on this route (see the Allow header)"),
    )
    .into_response()
}

/// The refusal for a path the router matched but could not decode.
fn path_refusal(r: PathRejection) -> Refusal {
    let detail = match &r {
        PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
            ErrorKind::InvalidUtf8InPathParam { key } => {
                let name = if key == "type" { "actor type" } else { key };
                format!("the {name} in the path is not UTF-8 once percent-decoded")
            }
            _ => r.body_text(),
        },
        _ => r.body_text(),
    };
    Refusal(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", detail)
}

/// The three path segments of an ask or tell, or the refusal to answer.
type ActorPath = Result<Path<(String, String, String)>, PathRejection>;

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

fn options(
    state: &IngressState,
    headers: &HeaderMap,
    span: &tracing::Span,
) -> Result<CallOptions, Refusal> {
    Ok(CallOptions {
        deadline: deadline_from(headers),
        principal: state.auth.principal(headers)?,
        sender: None,
        internal: false,
        trace: sluice_trace::of(span),
    })
}

/// The span of one ingress call, continuing the caller's trace when the request carries a
/// valid `traceparent` header (a malformed one starts a new trace). Disabled while traces
/// are off.
pub fn call_span(
    verb: &'static str,
    actor: &str,
    msg_type: &str,
    headers: &HeaderMap,
) -> tracing::Span {
    if !sluice_trace::enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "ingress",
        verb,
        actor,
        msg_type,
        status = tracing::field::Empty,
    );
    let parent = headers
        .get(TRACEPARENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<sluice_trace::TraceParent>().ok());
    sluice_trace::set_parent(&span, parent);
    span
}

/// Records the response status on the call's span and names the span in a `traceparent`
/// response header, so a caller can find the trace of its call.
fn traced(
    span: &tracing::Span,
    trace: Option<sluice_trace::TraceParent>,
    mut resp: Response,
) -> Response {
    if let Some(tp) = trace {
        span.record("status", i64::from(resp.status().as_u16()));
        if let Ok(v) = tp.to_string().parse() {
            resp.headers_mut().insert(TRACEPARENT_HEADER, v);
        }
    }
    resp
}

/// The body of a refusal that is not an [`ActorError`]: the same fields, with this `code`
/// (`invalid-argument`) and `message` (`INVALID_ARGUMENT: …`), the others empty.
pub(crate) fn refusal_json(code: &str, message: String) -> serde_json::Value {
    let mut body = error_json(&ActorError::internal(""));
    body["code"] = code.into();
    body["message"] = message.into();
    body
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let Refusal(status, code, msg) = self;
        let body = refusal_json(
            &code.to_ascii_lowercase().replace('_', "-"),
            format!("{code}: {msg}"),
        );
        (status, axum::Json(body)).into_response()
    }
}

async fn ask(
    State(state): State<Arc<IngressState>>,
    conn: Option<Extension<ConnectInfo<transport::Connection>>>,
    path: ActorPath,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (ty, key, msg_type) = match path {
        Ok(Path(p)) => p,
        Err(r) => return path_refusal(r).into_response(),
    };
    let body = match body {
        Ok(b) => b,
        Err(r) => return body_refusal(&state, r),
    };
    let actor = format!("{ty}/{key}");
    let span = call_span("ask", &actor, &msg_type, &headers);
    let opts = match options(&state, &headers, &span) {
        Ok(o) => o,
        Err(r) => return r.into_response(),
    };
    let trace = opts.trace;
    let resp = match state
        .host
        .ask_with(&actor, &msg_type, body.to_vec(), opts)
        .instrument(span.clone())
        .await
    {
        Ok(reply) => {
            if let Some(Extension(ConnectInfo(c))) = conn {
                c.note_reply(&reply);
            }
            (StatusCode::OK, reply).into_response()
        }
        Err(e) => error_response(&e),
    };
    traced(&span, trace, resp)
}

async fn tell(
    State(state): State<Arc<IngressState>>,
    path: ActorPath,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (ty, key, msg_type) = match path {
        Ok(Path(p)) => p,
        Err(r) => return path_refusal(r).into_response(),
    };
    let body = match body {
        Ok(b) => b,
        Err(r) => return body_refusal(&state, r),
    };
    let actor = format!("{ty}/{key}");
    let span = call_span("tell", &actor, &msg_type, &headers);
    let opts = match options(&state, &headers, &span) {
        Ok(o) => o,
        Err(r) => return r.into_response(),
    };
    let trace = opts.trace;
    let resp = match state
        .host
        .tell_with(&actor, &msg_type, body.to_vec(), opts)
        .instrument(span.clone())
        .await
    {
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
    };
    traced(&span, trace, resp)
}

/// Refuses a body the transport would not read, and says the connection closes.
///
/// The unread rest of the body leaves the connection unusable, so the server drops it after
/// this answer. Without `Connection: close` a pooling client (reqwest, a browser) could send
/// its next request on that connection before it sees it close, and get a broken connection
/// instead of an answer.
fn body_refusal(state: &IngressState, r: BytesRejection) -> Response {
    let mut response = error_response(&body_error(state, r));
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// A body the transport would not read: one past twice the payload limit (stopped before
/// it is buffered), or one that failed to arrive. Typed like every other refusal.
fn body_error(state: &IngressState, r: BytesRejection) -> ActorError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ActorError::invalid_argument(format!(
            "payload of more than {} bytes exceeds max_payload_bytes={}",
            state.host.config().max_payload_bytes.saturating_mul(2),
            state.host.config().max_payload_bytes
        ))
    } else {
        ActorError::invalid_argument(format!("request body could not be read: {}", r.body_text()))
    }
}

async fn metrics(State(state): State<Arc<IngressState>>) -> Response {
    // The recorder first, so that the gauges set below are recorded.
    crate::metrics_export::handle();
    // Mailbox depth and age are read from the mailboxes at scrape time rather than kept up
    // to date on every message.
    for t in state.host.status() {
        let ty = t.actor_type;
        metrics::gauge!("sluice_mailbox_depth", "actor_type" => ty.clone()).set(t.queued as f64);
        metrics::gauge!("sluice_mailbox_oldest_age_seconds", "actor_type" => ty)
            .set(t.oldest_queued_ms as f64 / 1e3);
    }
    let body = crate::metrics_export::render();
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}
