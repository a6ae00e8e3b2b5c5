//! Remote upstreams over HTTP: streamable HTTP (2025-03-26 and later: one POST per message, the
//! answer as JSON or as an SSE stream, a session id header, an optional GET stream for what the
//! server sends on its own) and the legacy HTTP+SSE transport of 2024-11-05 (one long GET
//! stream that names a POST endpoint, answers arriving on the stream).
//!
//! Both feed the same message handling as a child's stdout, so routing, progress and timeouts
//! behave the same whatever the transport.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use mcpb_config::UpstreamSettings;
use mcpb_protocol::{Incoming, IncomingKind, RpcCode};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use sse_stream::SseByteStream;

use crate::UpstreamError;
use crate::inbound::{ReadCtx, dispatch, fail_all};
use crate::transport::{Channels, Peer, Transport};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// A remote upstream as it will be reached: streamable HTTP, or the legacy HTTP+SSE transport
/// when its settings say `transport: sse`.
pub(crate) struct Http {
    pub settings: UpstreamSettings,
    /// Header values with their secret references already resolved.
    pub headers: BTreeMap<String, String>,
    /// The upstream's OAuth sign-in, when there is one.
    pub bearer: Option<Arc<mcpb_oauth::Bearer>>,
    /// Where refusals and failed refreshes are recorded for the upstream's status.
    pub auth_log: Arc<crate::auth_seen::AuthLog>,
}

impl Transport for Http {
    fn open(self: Box<Self>, ch: Channels) -> BoxFuture<'static, Result<Peer, UpstreamError>> {
        Box::pin(self.connect(ch))
    }
}

/// What the tasks of one remote instance share.
struct Remote {
    client: reqwest::Client,
    url: reqwest::Url,
    session: Mutex<Option<String>>,
    version: Arc<Mutex<String>>,
    ctx: Arc<ReadCtx>,
    limit: usize,
    bearer: Option<Arc<mcpb_oauth::Bearer>>,
    auth_log: Arc<crate::auth_seen::AuthLog>,
}

fn unreachable_error(name: &str, reason: impl std::fmt::Display) -> UpstreamError {
    UpstreamError::Connect {
        upstream: name.to_string(),
        reason: reason.to_string(),
    }
}

impl Remote {
    /// Answers a request that could not be delivered with an error of our own, through the same
    /// path as a real answer, so the caller fails at once instead of at its timeout.
    async fn fail_request(&self, line: &[u8], reason: &str) {
        let Ok(msg) = Incoming::parse(line) else {
            return;
        };
        if msg.kind() != IncomingKind::Request {
            return;
        }
        let Some(id) = msg.id.and_then(|id| id.get().parse::<u64>().ok()) else {
            return;
        };
        let message = format!("upstream '{}' {reason}", self.ctx.name);
        crate::inbound::fail_request(&self.ctx, id, RpcCode::UpstreamUnavailable, &message);
    }

    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        let session = self.session.lock().clone();
        if let Some(v) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
            h.insert(HeaderName::from_static(SESSION_HEADER), v);
        }
        let version = self.version.lock().clone();
        if let Ok(v) = HeaderValue::from_str(&version)
            && !version.is_empty()
        {
            h.insert(HeaderName::from_static(VERSION_HEADER), v);
        }
        h
    }

    /// `req` with the sign-in's access token (refreshed first when `refresh`).
    async fn signed(
        &self,
        req: reqwest::RequestBuilder,
        refresh: bool,
    ) -> Result<reqwest::RequestBuilder, String> {
        let Some(bearer) = &self.bearer else {
            return Ok(req);
        };
        let token = if refresh {
            bearer.refresh().await
        } else {
            bearer.token().await
        };
        // Getting a token refreshes an expired one: any failure here is the sign-in failing.
        if let Err(e) = &token {
            self.auth_log.refresh_failed(&e.to_string());
        }
        match token {
            Ok(t) => Ok(req.bearer_auth(t)),
            Err(e) => Err(format!(
                "has no usable sign-in ({e})\nhint: run `mcp-broker auth login {}`",
                self.ctx.name
            )),
        }
    }

    /// Reads an SSE body and handles each message it carries.
    async fn read_events(&self, resp: reqwest::Response) -> Result<(), String> {
        self.read_events_from(resp, &mut Resume::default()).await
    }

    /// Reads an event stream, remembering the last event id and the server's `retry` so a
    /// stream that closes before its answer can be resumed (SEP-1699).
    async fn read_events_from(
        &self,
        resp: reqwest::Response,
        resume: &mut Resume,
    ) -> Result<(), String> {
        let mut events = SseByteStream::new(capped_events(resp, self.limit));
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| e.to_string())?;
            if let Some(id) = event.id.clone().filter(|i| !i.is_empty()) {
                resume.last_id = Some(id);
            }
            if let Some(ms) = event.retry {
                resume.retry = Some(Duration::from_millis(ms.min(60_000)));
            }
            if event.event.as_deref().is_some_and(|e| e != "message") {
                continue;
            }
            if let Some(data) = event.data.filter(|d| !d.trim().is_empty()) {
                if data.len() > self.limit {
                    tracing::warn!(upstream = %self.ctx.name, "upstream event over the frame cap; skipped");
                    continue;
                }
                dispatch(&self.ctx, data.as_bytes()).await;
            }
        }
        Ok(())
    }

    /// Streamable HTTP: one POST per message.
    async fn post(self: Arc<Self>, line: Vec<u8>) {
        let body = line.trim_ascii_end().to_vec();
        let mut refresh = false;
        let resp = loop {
            let req = self
                .client
                .post(self.url.clone())
                .headers(self.headers())
                .header(ACCEPT, "application/json, text/event-stream")
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
            let req = match self.signed(req, refresh).await {
                Ok(r) => r,
                Err(why) => return self.fail_request(&body, &why).await,
            };
            match req.send().await {
                // A refused token is refreshed once, then the request goes again.
                Ok(r)
                    if r.status() == reqwest::StatusCode::UNAUTHORIZED
                        && self.bearer.is_some()
                        && !refresh =>
                {
                    refresh = true;
                }
                Ok(r) => break r,
                Err(e) => {
                    self.fail_request(&body, &format!("is unreachable: {}", with_causes(&e)))
                        .await;
                    return;
                }
            }
        };
        if let Some(id) = resp
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            let mut s = self.session.lock();
            if s.is_none() {
                *s = Some(id.to_string());
            }
        }
        let status = resp.status();
        self.auth_log
            .answered(status.as_u16(), challenged(resp.headers()));
        if status == reqwest::StatusCode::ACCEPTED {
            return;
        }
        if status == reqwest::StatusCode::FORBIDDEN
            && let Some(scope) = insufficient_scope(resp.headers())
        {
            let hint = format!(
                "needs a sign-in with more scope ({scope})\nhint: run `mcp-broker auth login {} --scope {}`",
                self.ctx.name,
                scope
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" --scope ")
            );
            self.fail_request(&body, &hint).await;
            return;
        }
        if status == reqwest::StatusCode::UNAUTHORIZED {
            let why = if self.bearer.is_some() {
                "refused its sign-in (HTTP 401) even after a refresh"
            } else {
                "asks for a sign-in (HTTP 401)"
            };
            let hint = format!("{why}\nhint: run `mcp-broker auth login {}`", self.ctx.name);
            self.fail_request(&body, &hint).await;
            return;
        }
        if !status.is_success() {
            let (head, _) = read_capped(resp, 4096).await.unwrap_or_default();
            let excerpt: String = String::from_utf8_lossy(&head).chars().take(200).collect();
            if status == reqwest::StatusCode::NOT_FOUND && self.session.lock().is_some() {
                // The server forgot our session: this instance is over; the next call starts anew.
                self.ctx.alive.store(false, Ordering::SeqCst);
                self.ctx.stop.notify_one();
            }
            self.fail_request(&body, &format!("answered HTTP {status}: {excerpt}"))
                .await;
            return;
        }
        let is_stream = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_stream {
            let mut resume = Resume::default();
            if let Err(e) = self.read_events_from(resp, &mut resume).await {
                self.fail_request(&body, &format!("broke off its answer: {e}"))
                    .await;
                return;
            }
            self.resume_if_unanswered(&body, resume).await;
            return;
        }
        match read_capped(resp, self.limit).await {
            Ok((bytes, false)) => {
                let text = bytes.trim_ascii();
                if text.starts_with(b"[") {
                    if let Ok(items) = serde_json::from_slice::<Vec<serde_json::Value>>(text) {
                        for item in items {
                            dispatch(&self.ctx, item.to_string().as_bytes()).await;
                        }
                    }
                } else if !text.is_empty() {
                    dispatch(&self.ctx, text).await;
                }
            }
            Ok((_, true)) => {
                self.fail_request(&body, "answered with a body over the frame cap")
                    .await
            }
            Err(e) => {
                self.fail_request(&body, &format!("broke off its answer: {e}"))
                    .await
            }
        }
    }

    /// A POST's stream closed before its answer: after the server's `retry` the answer is
    /// awaited on a GET stream that names the last event seen (`Last-Event-ID`), a few times.
    async fn resume_if_unanswered(&self, body: &[u8], mut resume: Resume) {
        let Some(id) = Incoming::parse(body)
            .ok()
            .filter(|m| m.kind() == IncomingKind::Request)
            .and_then(|m| m.id.and_then(|i| i.get().parse::<u64>().ok()))
        else {
            return;
        };
        for _ in 0..3 {
            if !self.ctx.pending.lock().contains_key(&id) {
                return;
            }
            tokio::time::sleep(resume.retry.unwrap_or(Duration::from_secs(1))).await;
            let mut get = self
                .client
                .get(self.url.clone())
                .headers(self.headers())
                .header(ACCEPT, "text/event-stream");
            if let Some(last) = &resume.last_id {
                get = get.header("last-event-id", last.as_str());
            }
            let Ok(get) = self.signed(get, false).await else {
                break;
            };
            match get.send().await {
                Ok(r) if r.status().is_success() => {
                    if self.read_events_from(r, &mut resume).await.is_err() {
                        break;
                    }
                }
                _ => break,
            }
        }
        if self.ctx.pending.lock().contains_key(&id) {
            self.fail_request(body, "closed its answer's stream and did not resume it")
                .await;
        }
    }

    /// The optional GET stream for messages the server sends on its own (list changes).
    async fn listen(self: Arc<Self>) {
        let req = self
            .client
            .get(self.url.clone())
            .headers(self.headers())
            .header(ACCEPT, "text/event-stream");
        let Ok(req) = self.signed(req, false).await else {
            return;
        };
        let resp = req.send().await;
        match resp {
            Ok(r) if r.status().is_success() => {
                if let Err(e) = self.read_events(r).await {
                    tracing::debug!(upstream = %self.ctx.name, error = %e, "server event stream ended");
                }
            }
            Ok(r) => {
                tracing::debug!(upstream = %self.ctx.name, status = %r.status(), "server offers no event stream")
            }
            Err(e) => {
                tracing::debug!(upstream = %self.ctx.name, error = %e, "server event stream unavailable")
            }
        }
    }
}

/// The scope a 403's `WWW-Authenticate: Bearer error="insufficient_scope", scope="..."` asks
/// for.
fn insufficient_scope(headers: &HeaderMap) -> Option<String> {
    let challenge = headers.get("www-authenticate")?.to_str().ok()?;
    if !challenge.contains("insufficient_scope") {
        return None;
    }
    let rest = &challenge[challenge.find("scope=\"")? + 7..];
    let scope: String = rest.chars().take_while(|c| *c != '"').take(500).collect();
    (!scope.trim().is_empty()).then_some(scope)
}

/// Where a closed event stream left off.
#[derive(Default)]
struct Resume {
    last_id: Option<String>,
    retry: Option<Duration>,
}

impl Http {
    /// Connects to the remote upstream; no process is started.
    async fn connect(self, ch: Channels) -> Result<Peer, UpstreamError> {
        let launch = self;
        let name = launch.settings.name.clone();
        // reqwest is built without a bundled TLS provider; ring is ours. A second install fails
        // harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url_text = launch.settings.url.clone().unwrap_or_default();
        let url = reqwest::Url::parse(&url_text)
            .map_err(|e| unreachable_error(&name, format!("invalid url {url_text}: {e}")))?;
        let mut headers = HeaderMap::new();
        for (k, v) in &launch.headers {
            let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(v),
            ) else {
                return Err(unreachable_error(
                    &name,
                    format!("header {k} is not a valid HTTP header"),
                ));
            };
            headers.insert(k, v);
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(launch.settings.startup_timeout)
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| unreachable_error(&name, e))?;

        let Channels {
            mut inbox,
            read,
            exit: exit_tx,
            protocol_version,
            permits,
        } = ch;
        let (stop, alive, pending) = (read.stop.clone(), read.alive.clone(), read.pending.clone());
        let remote = Arc::new(Remote {
            client,
            url: url.clone(),
            session: Mutex::new(None),
            version: protocol_version,
            limit: read.limit,
            ctx: read,
            bearer: launch.bearer,
            auth_log: launch.auth_log,
        });

        // Legacy SSE: the stream must be open, and name its POST endpoint, before anything is sent.
        let mut post_url = None;
        let mut reader = None;
        if launch.settings.transport.posts_to_a_named_endpoint() {
            let (endpoint, task) =
                open_legacy_stream(&remote, launch.settings.startup_timeout).await?;
            post_url = Some(endpoint);
            reader = Some(task);
        }

        let sender_remote = remote.clone();
        let sender_stop = stop.clone();
        let sender_alive = alive.clone();
        let sender_pending = pending.clone();
        let sender_name = name.clone();
        tokio::spawn(async move {
            let mut listening = false;
            loop {
                tokio::select! {
                    line = inbox.recv() => {
                        let Some(line) = line else { break };
                        match &post_url {
                            Some(endpoint) => {
                                tokio::spawn(post_legacy(sender_remote.clone(), endpoint.clone(), line));
                            }
                            None => {
                                let initialized = !listening
                                    && line.windows(25).any(|w| w == b"notifications/initialized");
                                tokio::spawn(sender_remote.clone().post(line));
                                if initialized {
                                    listening = true;
                                    tokio::spawn(sender_remote.clone().listen());
                                }
                            }
                        }
                    }
                    _ = sender_stop.notified() => break,
                }
            }
            if let Some(task) = reader {
                task.abort();
            }
            let session = sender_remote.session.lock().clone();
            if post_url.is_none() && session.is_some() {
                // Tell the server the session is over; it may not care.
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    sender_remote
                        .client
                        .delete(sender_remote.url.clone())
                        .headers(sender_remote.headers())
                        .send(),
                )
                .await;
            }
            sender_alive.store(false, Ordering::SeqCst);
            drop(permits);
            tracing::info!(upstream = %sender_name, "remote upstream disconnected");
            let _ = exit_tx.send(Some("disconnected".into()));
            fail_all(&sender_pending);
        });

        Ok(Peer::Remote { url: url_text })
    }
}

/// Opens the 2024-11-05 event stream and waits for its `endpoint` event; the rest of the stream
/// is read by the returned task.
async fn open_legacy_stream(
    remote: &Arc<Remote>,
    timeout: Duration,
) -> Result<(reqwest::Url, tokio::task::JoinHandle<()>), UpstreamError> {
    let name = remote.ctx.name.clone();
    let resp = tokio::time::timeout(
        timeout,
        remote
            .client
            .get(remote.url.clone())
            .header(ACCEPT, "text/event-stream")
            .send(),
    )
    .await
    .map_err(|_| UpstreamError::StartTimeout {
        upstream: name.clone(),
        ms: timeout.as_millis() as u64,
    })?
    .map_err(|e| unreachable_error(&name, format!("cannot open the event stream: {e}")))?;
    remote
        .auth_log
        .answered(resp.status().as_u16(), challenged(resp.headers()));
    if !resp.status().is_success() {
        return Err(unreachable_error(
            &name,
            format!("the event stream answered HTTP {}", resp.status()),
        ));
    }
    let mut events = Box::pin(SseByteStream::new(capped_events(resp, remote.limit)));
    let endpoint = tokio::time::timeout(timeout, async {
        while let Some(event) = events.next().await {
            match event {
                Ok(e) if e.event.as_deref() == Some("endpoint") => return e.data,
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| unreachable_error(&name, "the event stream named no endpoint"))?;
    let post_url = remote
        .url
        .join(endpoint.trim())
        .map_err(|e| unreachable_error(&name, format!("bad endpoint {endpoint}: {e}")))?;
    // The configured headers (credentials) go only where the operator pointed them.
    if post_url.origin() != remote.url.origin() {
        return Err(unreachable_error(
            &name,
            format!(
                "the event stream named an endpoint on another origin ({}); refused so the configured headers never leave for it",
                post_url.origin().ascii_serialization()
            ),
        ));
    }
    let reader_remote = remote.clone();
    let task = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            if event.event.as_deref().is_some_and(|e| e != "message") {
                continue;
            }
            if let Some(data) = event.data.filter(|d| !d.trim().is_empty()) {
                dispatch(&reader_remote.ctx, data.as_bytes()).await;
            }
        }
        tracing::warn!(upstream = %reader_remote.ctx.name, "event stream closed");
        reader_remote.ctx.alive.store(false, Ordering::SeqCst);
        reader_remote.ctx.stop.notify_one();
    });
    Ok((post_url, task))
}

/// Legacy SSE: POST to the endpoint; the answer arrives on the event stream.
async fn post_legacy(remote: Arc<Remote>, endpoint: reqwest::Url, line: Vec<u8>) {
    let body = line.trim_ascii_end().to_vec();
    let sent = remote
        .client
        .post(endpoint)
        .header(CONTENT_TYPE, "application/json")
        .body(body.clone())
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => remote.auth_log.accepted(),
        Ok(r) => {
            let status = r.status();
            remote
                .auth_log
                .answered(status.as_u16(), challenged(r.headers()));
            remote
                .fail_request(&body, &format!("answered HTTP {status}"))
                .await;
        }
        Err(e) => {
            remote
                .fail_request(&body, &format!("is unreachable: {}", with_causes(&e)))
                .await
        }
    }
}

/// Whether an answer asks for credentials (`WWW-Authenticate`): what tells a 403 about the
/// sign-in from one about anything else (a rate limit).
fn challenged(headers: &HeaderMap) -> bool {
    headers.contains_key(reqwest::header::WWW_AUTHENTICATE)
}

/// Reads at most `limit` bytes of a body, chunk by chunk, so an endless or huge body is cut at
/// the cap instead of buffered whole. True when the body was longer than the cap.
async fn read_capped(
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    if resp
        .content_length()
        .is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX))
    {
        return Ok((Vec::new(), true));
    }
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if out.len() + chunk.len() > limit {
            let room = limit - out.len();
            out.extend_from_slice(&chunk[..room]);
            return Ok((out, true));
        }
        out.extend_from_slice(&chunk);
    }
    Ok((out, false))
}

/// Redirects are followed only within the configured origin (a few hops at most): the
/// configured headers carry credentials, and a redirect elsewhere would hand them over.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let home = attempt.previous().first().map(reqwest::Url::origin);
        if attempt.previous().len() > 5 {
            attempt.error("too many redirects")
        } else if home.as_ref() == Some(&attempt.url().origin()) {
            attempt.follow()
        } else {
            let to = attempt.url().origin().ascii_serialization();
            attempt.error(format!(
                "redirected to another origin ({to}); refused so the configured headers never leave for it"
            ))
        }
    })
}

/// An error with its causes, so a refusal of ours inside a reqwest error is seen.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// An event stream whose single event grew past the frame cap.
#[derive(Debug, thiserror::Error)]
enum EventStreamError {
    #[error("an event of the stream is over the {0}-byte frame cap")]
    TooLarge(usize),
    #[error(transparent)]
    Http(#[from] reqwest::Error),
}

/// The body of an event stream, cut with an error as soon as one event (the bytes since the
/// last blank line) grows past `limit`: the SSE parser would otherwise buffer it whole.
fn capped_events(
    resp: reqwest::Response,
    limit: usize,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, EventStreamError>> {
    use futures_util::StreamExt;
    // Bytes of the current event, whether the last byte ended a line, and whether the cap
    // was hit (then the stream ends after the error).
    let state = (0usize, false, false);
    resp.bytes_stream()
        .scan(state, move |(since, line_end, over), chunk| {
            if *over {
                return std::future::ready(None);
            }
            let out = match chunk {
                Err(e) => Err(EventStreamError::Http(e)),
                Ok(bytes) => {
                    for b in bytes.iter() {
                        match b {
                            b'\n' if *line_end => *since = 0,
                            b'\n' => *line_end = true,
                            b'\r' => {}
                            _ => {
                                *line_end = false;
                                *since += 1;
                            }
                        }
                    }
                    if *since > limit {
                        *over = true;
                        Err(EventStreamError::TooLarge(limit))
                    } else {
                        Ok(bytes)
                    }
                }
            };
            std::future::ready(Some(out))
        })
}
