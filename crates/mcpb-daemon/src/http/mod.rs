//! The streamable HTTP front: the same sessions, policy, pins and facade as the shim, behind a
//! TCP listener (loopback by default). POST carries one JSON-RPC message; `initialize` opens a
//! session whose id comes back in `Mcp-Session-Id`; GET opens the session's stream of server
//! messages (SSE); DELETE ends it. A POST without a session is a stateless (2026-07-28) request,
//! served by a session of its own. Every request passes the gate (Host, Origin, bearer token)
//! before anything else.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming as Body};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, ORIGIN};
use hyper::{Method, Request, Response, StatusCode};
use mcpb_config::http::HttpSettings;
use mcpb_protocol::message::{Incoming, IncomingKind};
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;

use mcpb_console::pool;

use crate::broker::Broker;

mod bridge;
mod gate;

use bridge::Bridge;
use gate::{Gate, Refusal};

const SESSION_HEADER: &str = "mcp-session-id";
/// How often an open stream gets a comment, so proxies keep it open.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How long a request's head, and then its body, may take to arrive.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections that showed a valid token, served at once (each may hold a stream open).
const MAX_CONNECTIONS: usize = 1024;
/// Connections waiting to show a token.
const MAX_WAITING: usize = 256;

type Reply = Response<BoxBody<Bytes, Infallible>>;

struct Front {
    broker: Arc<Broker>,
    path: String,
    gate: Gate,
    sessions: Mutex<HashMap<String, Arc<Bridge>>>,
    idle: Duration,
    max_body: usize,
    shutdown: watch::Receiver<bool>,
    pools: pool::Pools,
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Reply {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

/// A plain-text refusal: what happened, and what to do.
fn refuse(status: StatusCode, text: &str) -> Reply {
    let mut r = reply(status, "text/plain; charset=utf-8", format!("{text}\n"));
    if status == StatusCode::UNAUTHORIZED
        && let Ok(v) = HeaderValue::from_str("Bearer realm=\"mcp-broker\"")
    {
        r.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, v);
    }
    r
}

fn header(req: &Request<Body>, name: impl hyper::header::AsHeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Binds the listener now (a busy port stops the daemon's start with a clear error) and
/// returns the task that serves it until shutdown.
pub(crate) fn bind(
    http: &HttpSettings,
    broker: Arc<Broker>,
    shutdown: watch::Receiver<bool>,
) -> Result<impl std::future::Future<Output = ()> + Send + 'static, String> {
    let std_listener = std::net::TcpListener::bind(&http.listen)
        .map_err(|e| format!("cannot listen on {} for HTTP: {e}", http.listen))?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    let port = std_listener.local_addr().map_err(|e| e.to_string())?.port();
    let listener = TcpListener::from_std(std_listener).map_err(|e| e.to_string())?;
    let settings = broker.config().settings.clone();
    let env = |name: &str| std::env::var(name).ok();
    let gate = Gate::new(http, port, &env, &settings.runtime.secrets_dir())?;
    tracing::info!(listen = %http.listen, path = %http.path, tokens = gate.tokens.len(), "HTTP front listening");
    let front = Arc::new(Front {
        broker,
        path: http.path.clone(),
        gate,
        sessions: Mutex::default(),
        idle: Duration::from_millis(http.session_idle_ms),
        max_body: settings.broker.max_frame_bytes,
        shutdown,
        pools: pool::Pools::new(MAX_CONNECTIONS, MAX_WAITING),
    });
    Ok(serve(front, listener))
}

async fn serve(front: Arc<Front>, listener: TcpListener) {
    let mut shutdown = front.shutdown.clone();
    let sweeper = tokio::spawn(sweep(front.clone()));
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of fds, most likely: wait for some to close instead of spinning.
                    tracing::warn!(error = %e, "HTTP accept failed; pausing accepts for 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = crate::session::until_set(&mut shutdown) => break,
        };
        let conn = front.pools.arrive();
        let front = front.clone();
        tokio::spawn(async move {
            let served = {
                let front = front.clone();
                let conn = conn.clone();
                hyper::service::service_fn(move |req| {
                    let front = front.clone();
                    let conn = conn.clone();
                    async move { Ok::<_, Infallible>(handle(&front, &conn, req).await) }
                })
            };
            let io = hyper_util::rt::TokioIo::new(stream);
            let serving = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(io, served);
            tokio::pin!(serving);
            // Until a request shows a valid token the connection has a short deadline and may
            // be evicted for a newer one; then it is served like any other.
            let deadline = tokio::time::sleep(pool::WAITING_DEADLINE);
            tokio::pin!(deadline);
            loop {
                if conn.evicted() {
                    break;
                }
                tokio::select! {
                    _ = &mut serving => break,
                    () = conn.changed(), if !conn.admitted() => {}
                    () = &mut deadline, if !conn.admitted() => break,
                }
                if conn.admitted() {
                    let _ = serving.await;
                    break;
                }
            }
            front.pools.leave(&conn);
        });
    }
    sweeper.abort();
    let all: Vec<Arc<Bridge>> = front.sessions.lock().drain().map(|(_, b)| b).collect();
    for b in all {
        b.close().await;
    }
}

/// Closes sessions that have been idle (no request, no stream) longer than the limit.
async fn sweep(front: Arc<Front>) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        let stale: Vec<(String, Arc<Bridge>)> = front
            .sessions
            .lock()
            .iter()
            .filter(|(_, b)| b.idle_for() > front.idle)
            .map(|(k, b)| (k.clone(), b.clone()))
            .collect();
        for (id, b) in stale {
            front.sessions.lock().remove(&id);
            b.close().await;
            tracing::info!("HTTP session closed after being idle");
        }
    }
}

async fn handle(front: &Arc<Front>, conn: &pool::Conn, req: Request<Body>) -> Reply {
    if req.uri().path() != front.path {
        return refuse(
            StatusCode::NOT_FOUND,
            &format!("no MCP endpoint here; it is {}", front.path),
        );
    }
    // A gate header sent twice, or not readable as text, is refused rather than half-read.
    for name in [HOST, ORIGIN, AUTHORIZATION] {
        let values: Vec<_> = req.headers().get_all(&name).iter().collect();
        if values.len() > 1 || values.iter().any(|v| v.to_str().is_err()) {
            return refuse(
                StatusCode::BAD_REQUEST,
                &format!("one readable {name} header at most"),
            );
        }
    }
    // An absolute-form target names the host it is for; it must be the Host header's.
    if let Some(authority) = req.uri().authority()
        && header(&req, HOST).is_none_or(|h| !h.eq_ignore_ascii_case(authority.as_str()))
    {
        return refuse(
            StatusCode::FORBIDDEN,
            "the request's target names another host",
        );
    }
    let origin = header(&req, ORIGIN).map(str::to_string);
    if req.method() == Method::OPTIONS {
        return match front.gate.place(header(&req, HOST), origin.as_deref()) {
            Ok(()) => preflight(origin.as_deref()),
            Err(Refusal::Forbidden(why)) => refuse(StatusCode::FORBIDDEN, &why),
            Err(Refusal::Unauthorized) => refuse(StatusCode::UNAUTHORIZED, "not allowed"),
        };
    }
    let placed = front
        .gate
        .place(header(&req, HOST), origin.as_deref())
        .is_ok();
    let mut answer = admitted(front, conn, req).await;
    // A page of an allowed origin may read the answer (and the session id in it).
    if let Some(o) = origin
        .as_deref()
        .filter(|_| placed)
        .and_then(|o| HeaderValue::from_str(o).ok())
    {
        let h = answer.headers_mut();
        h.insert(hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.insert(
            hyper::header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id, www-authenticate"),
        );
        h.insert(hyper::header::VARY, HeaderValue::from_static("origin"));
    }
    answer
}

/// The answer to a browser's preflight from an origin the gate allows (or none): which methods
/// and headers the endpoint takes. The real request still needs its token.
fn preflight(origin: Option<&str>) -> Reply {
    let mut r = reply(StatusCode::NO_CONTENT, "text/plain", Bytes::new());
    let h = r.headers_mut();
    if let Some(o) = origin.and_then(|o| HeaderValue::from_str(o).ok()) {
        h.insert(hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.insert(hyper::header::VARY, HeaderValue::from_static("origin"));
    }
    h.insert(
        hyper::header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST, GET, DELETE"),
    );
    h.insert(
        hyper::header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id",
        ),
    );
    h.insert(
        hyper::header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    r
}

/// A request past the Host and Origin checks: its token, then its method.
async fn admitted(front: &Arc<Front>, conn: &pool::Conn, req: Request<Body>) -> Reply {
    let token = match front.gate.admit(
        header(&req, HOST),
        header(&req, ORIGIN),
        header(&req, AUTHORIZATION),
    ) {
        Ok(t) => t,
        Err(Refusal::Forbidden(why)) => return refuse(StatusCode::FORBIDDEN, &why),
        Err(Refusal::Unauthorized) => {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "a valid bearer token is needed (Authorization: Bearer ...)",
            );
        }
    };
    if !front.pools.admit(conn) {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "{} connections with a token are open already; close some",
                MAX_CONNECTIONS
            ),
        );
    }
    let session = header(&req, SESSION_HEADER).map(str::to_string);
    match *req.method() {
        Method::POST => post(front, token, session, req).await,
        Method::GET => get(front, token, session, &req),
        Method::DELETE => delete(front, token, session).await,
        _ => refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "use POST, GET or DELETE (or OPTIONS for a preflight)",
        ),
    }
}

/// The session `id` opened with `token`; another token's session is as unknown as none.
fn find(front: &Front, token: usize, id: &str) -> Option<Arc<Bridge>> {
    front
        .sessions
        .lock()
        .get(id)
        .filter(|b| b.token == token)
        .cloned()
}

fn open_session(
    front: &Arc<Front>,
    token: usize,
    register: bool,
) -> Result<(String, Arc<Bridge>), Box<Reply>> {
    let t = &front.gate.tokens[token];
    let Some(profile) = front.broker.profile(&t.profile) else {
        return Err(Box::new(refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the token's profile is gone from the configuration",
        )));
    };
    let mut permits = Vec::with_capacity(2);
    // A stateless request's session lives as long as the request: its in-flight permit
    // bounds it, not the token's session count.
    if register {
        let Ok(mine) = t.sessions.clone().try_acquire_owned() else {
            return Err(Box::new(refuse(
                StatusCode::TOO_MANY_REQUESTS,
                "this token has all its sessions open; close one (DELETE) or wait",
            )));
        };
        permits.push(mine);
    }
    let Ok(slot) = front.broker.session_slots.clone().try_acquire_owned() else {
        return Err(Box::new(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "mcp-broker serves broker.max_clients sessions already",
        )));
    };
    permits.push(slot);
    let id = uuid::Uuid::new_v4().simple().to_string();
    let gone = Arc::downgrade(front);
    let key = id.clone();
    let bridge = Bridge::start(
        front.broker.clone(),
        profile,
        token,
        permits,
        front.shutdown.clone(),
        move || {
            if let Some(f) = gone.upgrade() {
                f.sessions.lock().remove(&key);
            }
        },
    );
    if register {
        front.sessions.lock().insert(id.clone(), bridge.clone());
    }
    Ok((id, bridge))
}

async fn post(
    front: &Arc<Front>,
    token: usize,
    session: Option<String>,
    req: Request<Body>,
) -> Reply {
    // Held from before the body is read: bodies in transit count against the token too.
    let Ok(_in_flight) = front.gate.tokens[token]
        .in_flight
        .clone()
        .try_acquire_owned()
    else {
        return refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "this token has all its requests in flight; wait for one",
        );
    };
    let body = match read_body(front, req).await {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let Ok(msg) = Incoming::parse(&body) else {
        let err = mcpb_protocol::message::error_line(
            None,
            mcpb_protocol::RpcCode::ParseError,
            "the body is not one JSON-RPC message",
        );
        return reply(StatusCode::BAD_REQUEST, "application/json", err);
    };
    let is_request = msg.kind() == IncomingKind::Request;
    let id = msg.id.map(|i| i.get().to_string());
    let initialize = msg.method() == "initialize";
    if initialize && !is_request {
        return refuse(
            StatusCode::BAD_REQUEST,
            "initialize must be a request (with an id)",
        );
    }
    let (sid, bridge, one_shot) = match session_for(front, token, session, initialize, is_request) {
        Ok(found) => found,
        Err(r) => return *r,
    };
    // A one-shot session ends with its request, even when the client goes away mid-way and
    // this future is dropped.
    let one_shot_guard = one_shot.then(|| CloseOnDrop(bridge.clone()));
    if one_shot
        && msg.method() == "subscriptions/listen"
        && let Some(id) = id.clone()
    {
        // A stream that stays open counts as one of the token's sessions for its whole life.
        return match front.gate.tokens[token]
            .sessions
            .clone()
            .try_acquire_owned()
        {
            Ok(seat) => listen(bridge, id, body, (one_shot_guard, seat)),
            Err(_) => refuse(
                StatusCode::TOO_MANY_REQUESTS,
                "this token has all its sessions open; close one (DELETE) or wait",
            ),
        };
    }
    let _one_shot = one_shot_guard;
    if msg.method() == "notifications/cancelled"
        && let Some(params) = msg.params
        && let Some(request_id) = mcpb_protocol::rewrite::member(params, "requestId")
    {
        bridge.cancelled(request_id.get());
    }
    let id = match (is_request, id) {
        (true, Some(id)) => id,
        _ => return pass_on(&bridge, &body).await,
    };
    answer(&bridge, &id, &body, initialize.then_some(sid.as_str())).await
}

/// Hands a notification or response to the session: accepted, or the session has ended.
async fn pass_on(bridge: &Bridge, body: &[u8]) -> Reply {
    if bridge.send(body).await {
        reply(StatusCode::ACCEPTED, "text/plain", Bytes::new())
    } else {
        refuse(StatusCode::NOT_FOUND, "the session has ended")
    }
}

/// The session's answer to the request `id` (naming the session when it is new), or why
/// there is none.
async fn answer(bridge: &Bridge, id: &str, body: &[u8], new_session: Option<&str>) -> Reply {
    match bridge.request(id, body).await {
        Some(answer) => {
            let mut r = reply(StatusCode::OK, "application/json", answer);
            if let Some(Ok(v)) = new_session.map(HeaderValue::from_str) {
                r.headers_mut().insert(SESSION_HEADER, v);
            }
            r
        }
        None => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the session ended before answering",
        ),
    }
}

/// The request's body, read within `BODY_TIMEOUT` and `max_body`, on one line.
async fn read_body(front: &Front, req: Request<Body>) -> Result<Bytes, Box<Reply>> {
    let collect = Limited::new(req.into_body(), front.max_body).collect();
    match tokio::time::timeout(BODY_TIMEOUT, collect).await {
        Err(_) => Err(Box::new(refuse(
            StatusCode::REQUEST_TIMEOUT,
            "the body did not arrive in time",
        ))),
        // The session reads one message per line: a pretty-printed body's line breaks go. In
        // valid JSON a raw CR or LF can only be whitespace between tokens (inside a string it
        // must be escaped), so a space in its place changes nothing else.
        Ok(Ok(b)) => {
            let mut body = b.to_bytes().to_vec();
            for c in body.iter_mut().filter(|c| matches!(**c, b'\n' | b'\r')) {
                *c = b' ';
            }
            Ok(Bytes::from(body))
        }
        Ok(Err(_)) => Err(Box::new(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the body is over broker.max_frame_bytes ({} bytes)",
                front.max_body
            ),
        ))),
    }
}

/// The session a message goes to: the one its header names, a new one for `initialize`, or a
/// one-shot one for a request without a session (the flag).
fn session_for(
    front: &Arc<Front>,
    token: usize,
    session: Option<String>,
    initialize: bool,
    is_request: bool,
) -> Result<(String, Arc<Bridge>, bool), Box<Reply>> {
    match (session, initialize) {
        (Some(sid), _) => match find(front, token, &sid) {
            Some(b) => Ok((sid, b, false)),
            None => Err(Box::new(refuse(
                StatusCode::NOT_FOUND,
                "unknown or ended session; initialize a new one",
            ))),
        },
        (None, true) => open_session(front, token, true).map(|(sid, b)| (sid, b, false)),
        // A request without a session: stateless (2026-07-28), served by a session of its own.
        (None, false) if is_request => {
            open_session(front, token, false).map(|(sid, b)| (sid, b, true))
        }
        (None, false) => Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            "Mcp-Session-Id is missing",
        ))),
    }
}

/// A stateless client's `subscriptions/listen`: the answer is an SSE stream of what the
/// session has to say (the acknowledgement, then list changes) that ends with the request's
/// result (at shutdown) or when the client leaves, which ends the session too.
fn listen(
    bridge: Arc<Bridge>,
    id: String,
    body: Bytes,
    guard: (Option<CloseOnDrop>, tokio::sync::OwnedSemaphorePermit),
) -> Reply {
    type Answer =
        std::pin::Pin<Box<dyn std::future::Future<Output = Option<Vec<u8>>> + Send + Sync>>;
    struct Listening {
        events: bridge::StreamRx,
        answer: Option<Answer>,
        _guard: (Option<CloseOnDrop>, tokio::sync::OwnedSemaphorePermit),
    }
    let events = bridge.open_stream(None);
    let answer: Answer = Box::pin(async move { bridge.request(&id, &body).await });
    let state = Listening {
        events,
        answer: Some(answer),
        _guard: guard,
    };
    let frames = futures_util::stream::unfold(state, |mut st| async move {
        let answer = st.answer.as_mut()?;
        let item = tokio::select! {
            m = st.events.recv() => m?,
            a = answer => {
                st.answer = None;
                bridge::sse_message(&a?)
            }
            () = tokio::time::sleep(KEEPALIVE) => Bytes::from_static(b": keepalive\n\n"),
        };
        Some((Ok::<_, Infallible>(Frame::data(item)), st))
    });
    event_stream(frames)
}

/// A `text/event-stream` answer of `frames`.
fn event_stream(
    frames: impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + Sync + 'static,
) -> Reply {
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r
}

/// Closes a session when dropped.
struct CloseOnDrop(Arc<Bridge>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        let bridge = self.0.clone();
        tokio::spawn(async move { bridge.close().await });
    }
}

fn get(front: &Arc<Front>, token: usize, session: Option<String>, req: &Request<Body>) -> Reply {
    let Some(sid) = session else {
        return refuse(StatusCode::BAD_REQUEST, "Mcp-Session-Id is missing");
    };
    if !header(req, ACCEPT).is_some_and(|a| a.contains("text/event-stream")) {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            "a stream needs Accept: text/event-stream",
        );
    }
    let Some(bridge) = find(front, token, &sid) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "unknown or ended session; initialize a new one",
        );
    };
    // An id this session never gave out replays nothing, like a first GET.
    let last = header(req, "last-event-id").and_then(|v| v.trim().parse::<u64>().ok());
    let rx = bridge.open_stream(last);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        let item = tokio::select! {
            m = rx.recv() => m?,
            () = tokio::time::sleep(KEEPALIVE) => Bytes::from_static(b": keepalive\n\n"),
        };
        Some((Ok::<_, Infallible>(Frame::data(item)), rx))
    });
    event_stream(frames)
}

async fn delete(front: &Arc<Front>, token: usize, session: Option<String>) -> Reply {
    let Some(sid) = session else {
        return refuse(StatusCode::BAD_REQUEST, "Mcp-Session-Id is missing");
    };
    let Some(bridge) = find(front, token, &sid) else {
        return refuse(StatusCode::NOT_FOUND, "unknown or ended session");
    };
    front.sessions.lock().remove(&sid);
    bridge.close().await;
    reply(StatusCode::OK, "text/plain", Bytes::new())
}
