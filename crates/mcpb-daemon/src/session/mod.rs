//! One client connection: the hello exchange, then an MCP session in the profile's passthrough
//! view. Requests that reach upstreams run as tasks so a slow call never blocks the next frame.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpb_config::ProfileSettings;
use mcpb_protocol::message::error_line;
use mcpb_protocol::{
    BROKER_PROTOCOL_VERSION, BrokerRpcError, FrameError, FrameReader, Hello, HelloKind, HelloReply,
    Incoming, IncomingKind, RpcCode,
};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;

use crate::link::SessionLink;
use crate::stdio::{Reader, Writer};
use mcpb_upstream::ClientLink;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};

use crate::broker::{Broker, json_line};

mod handshake;
mod queue;

pub(crate) use queue::ClientQueue;

const HELLO_LIMIT: usize = 64 * 1024;
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a session over `broker.max_clients` waits for a slot before it is refused (the shim
/// waits 15 s for the daemon's answer).
const SLOT_WAIT: Duration = Duration::from_secs(5);
const LINGER: Duration = Duration::from_secs(1);
/// Requests of one session running at once; past this its input waits.
const MAX_RUNNING: usize = 64;
const LINGER_BYTES: usize = 1024 * 1024;

type Running = Arc<Mutex<HashMap<String, AbortHandle>>>;

/// The session's queue of frames to the client (see `queue`).
type Outbox = Arc<ClientQueue>;

pub async fn serve(
    broker: Arc<Broker>,
    stream: UnixStream,
    mut shutdown: watch::Receiver<bool>,
    stop: Arc<Notify>,
    limits: crate::listener::ConnectionLimits,
    hello_permit: tokio::sync::OwnedSemaphorePermit,
) {
    let mut frames = FrameReader::new(BufReader::with_capacity(64 * 1024, stream), HELLO_LIMIT);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, frames.next_frame()).await {
        Ok(Ok(Some(line))) => serde_json::from_slice::<Hello>(line).map_err(|e| e.to_string()),
        Ok(Ok(None)) => return,
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no hello line within 10 s".to_string()),
    };
    let hello = match hello {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(error = %e, "connection closed: bad hello");
            let reply = HelloReply::refuse(
                format!(
                    "this is the mcp-broker daemon socket; the first line was not a hello ({e})"
                ),
                vec!["MCP clients connect through `mcp-broker stdio`, not to the socket".into()],
            );
            let _ = frames.get_mut().write_all(&reply.to_line()).await;
            return;
        }
    };
    if hello.mcp_broker != BROKER_PROTOCOL_VERSION {
        let reply = HelloReply::refuse(
            format!(
                "broker protocol mismatch: client speaks {}, daemon {} (version {})",
                hello.mcp_broker,
                BROKER_PROTOCOL_VERSION,
                env!("CARGO_PKG_VERSION")
            ),
            vec!["restart the daemon with the same binary: `mcp-broker stop`, then retry".into()],
        );
        let _ = frames.get_mut().write_all(&reply.to_line()).await;
        return;
    }
    drop(hello_permit);
    let pool = match hello.kind {
        HelloKind::Admin { .. } => &limits.admin,
        HelloKind::Session { .. } => &limits.sessions,
    };
    let Ok(_connection) = pool.clone().try_acquire_owned() else {
        tracing::warn!("connection refused: too many open connections of its kind");
        let reply = HelloReply::refuse(
            "mcp-broker has too many open connections",
            vec!["close clients you no longer use, or raise broker.max_clients".into()],
        );
        let _ = frames.get_mut().write_all(&reply.to_line()).await;
        return;
    };
    match hello.kind {
        HelloKind::Admin { command, profile } => {
            let reply = crate::admin::handle(&broker, &command, profile.as_deref(), &stop).await;
            let conn = frames.get_mut();
            let _ = conn.write_all(&reply.to_line()).await;
            let _ = conn.shutdown().await;
        }
        HelloKind::Session {
            profile,
            client,
            pass_fds,
            facade,
            ..
        } => {
            let chosen = choose_profile(&broker, profile.as_deref(), client.as_deref());
            let (profile, explicit) = match chosen {
                Ok(p) => p,
                Err(reply) => {
                    tracing::warn!(error = ?reply.error, "session refused");
                    let _ = frames.get_mut().write_all(&reply.to_line()).await;
                    return;
                }
            };
            // A slot among `max_clients` before the session is accepted; over the limit the
            // client waits a bounded time, then hears why it was refused.
            let slot = tokio::select! {
                s = tokio::time::timeout(SLOT_WAIT, broker.session_slots.clone().acquire_owned()) => s,
                _ = until_set(&mut shutdown) => return,
            };
            let _slot = match slot {
                Ok(Ok(s)) => s,
                Ok(Err(_)) => return,
                Err(_) => {
                    let max = broker.config().settings.broker.max_clients;
                    tracing::warn!(
                        max_clients = max,
                        "session refused: every client slot is taken"
                    );
                    let reply = HelloReply::refuse(
                        format!(
                            "mcp-broker already serves broker.max_clients ({max}) sessions and none ended within {} s",
                            SLOT_WAIT.as_secs()
                        ),
                        vec![
                            "close a client you no longer use, or raise broker.max_clients and run `mcp-broker reload`".into(),
                            "`mcp-broker status` shows the open sessions".into(),
                        ],
                    );
                    let _ = frames.get_mut().write_all(&reply.to_line()).await;
                    return;
                }
            };
            let reply = HelloReply {
                ok: true,
                profile: Some(profile.name.clone()),
                daemon_pid: std::process::id(),
                daemon_version: env!("CARGO_PKG_VERSION").to_string(),
                ..HelloReply::default()
            };
            if frames.get_mut().write_all(&reply.to_line()).await.is_err() {
                return;
            }
            let io = if pass_fds {
                take_over_stdio(frames.into_inner().into_inner()).await
            } else {
                let (r, w) = tokio::io::split(frames.into_inner());
                Ok(SessionIo {
                    reader: Box::pin(r),
                    writer: Box::pin(w),
                    control: None,
                })
            };
            let io = match io {
                Ok(io) => io,
                Err(e) => {
                    tracing::warn!(error = %e, "session closed: cannot take over the client's stdio");
                    return;
                }
            };
            broker.sessions.fetch_add(1, Ordering::SeqCst);
            tracing::info!(profile = %profile.name, client = ?client, pid = hello.pid, pass_fds, "session opened");
            let mut session = Session {
                broker: broker.clone(),
                link: None,
                profile,
                explicit,
                client_seen: false,
                modern: false,
                initialized: false,
                seen_config: broker.config(),
                running: Arc::default(),
                facade,
            };
            let frames = FrameReader::new(
                BufReader::with_capacity(64 * 1024, io.reader),
                broker.config().settings.broker.max_frame_bytes,
            );
            let (control_read, control_write) = match io.control {
                Some(c) => {
                    let (r, w) = c.into_split();
                    (Some(r), Some(w))
                }
                None => (None, None),
            };
            let ended = session
                .run(frames, io.writer, control_read, &mut shutdown)
                .await;
            if let Some(mut w) = control_write {
                let done = match ended {
                    Ended::InputClosed => HelloReply {
                        ok: true,
                        exit: Some(0),
                        ..HelloReply::default()
                    },
                    Ended::Shutdown => HelloReply {
                        exit: Some(1),
                        ..HelloReply::refuse(
                            "the daemon is shutting down",
                            vec!["the next client start brings it back".into()],
                        )
                    },
                    Ended::Fault(why) => HelloReply {
                        exit: Some(1),
                        ..HelloReply::refuse(why, vec![])
                    },
                };
                let _ = w.write_all(&done.to_line()).await;
            }
            broker.sessions.fetch_sub(1, Ordering::SeqCst);
            tracing::info!(profile = %session.profile.name, "session closed");
        }
    }
}

/// Why a session ended, reported to a shim that handed over its stdio.
enum Ended {
    InputClosed,
    Shutdown,
    Fault(String),
}

struct SessionIo {
    reader: Reader,
    writer: Writer,
    /// The shim's connection, kept when the shim handed over its stdio: its end means the shim
    /// is gone, and the session's end is reported on it.
    control: Option<UnixStream>,
}

async fn take_over_stdio(stream: UnixStream) -> std::io::Result<SessionIo> {
    let (input, output) = tokio::time::timeout(HELLO_TIMEOUT, crate::stdio::receive(&stream))
        .await
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "no descriptors from the shim")
        })??;
    Ok(SessionIo {
        reader: crate::stdio::reader(input)?,
        writer: crate::stdio::writer(output)?,
        control: Some(stream),
    })
}

/// `--profile`, else the client's entry in `clients`, else `default`.
fn choose_profile(
    broker: &Broker,
    profile: Option<&str>,
    client: Option<&str>,
) -> Result<(Arc<ProfileSettings>, bool), Box<HelloReply>> {
    let config = broker.config();
    let profiles = &config.settings.profiles;
    let known = || {
        let names: Vec<&str> = profiles.keys().map(String::as_str).collect();
        format!(
            "profiles in {}: {}",
            config.settings.source,
            if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            }
        )
    };
    if let Some(name) = profile {
        return match profiles.get(name) {
            Some(p) => Ok((Arc::new(p.clone()), true)),
            None => Err(Box::new(HelloReply::refuse(
                format!("unknown profile '{name}'"),
                vec![known(), "pass one of them with --profile".into()],
            ))),
        };
    }
    if let Some(p) = client
        .and_then(|c| config.settings.clients.get(c))
        .and_then(|p| profiles.get(p))
    {
        return Ok((Arc::new(p.clone()), true));
    }
    match profiles.get("default") {
        Some(p) => Ok((Arc::new(p.clone()), false)),
        None => Err(Box::new(HelloReply::refuse(
            "no --profile given and the config has no 'default' profile",
            vec![
                known(),
                "pass --profile NAME, or add a `default` profile".into(),
            ],
        ))),
    }
}

struct Session {
    broker: Arc<Broker>,
    link: Option<Arc<SessionLink>>,
    profile: Arc<ProfileSettings>,
    /// Chosen by flag or client entry; `clientInfo.name` may only refine a default choice.
    explicit: bool,
    /// The client's name was looked up once already.
    client_seen: bool,
    /// The client speaks 2026-07-28 (per-request `_meta`, no initialize).
    modern: bool,
    /// The client completed `initialize`: its requests carry no envelope to read.
    initialized: bool,
    /// The configuration generation the profile was last taken from.
    seen_config: Arc<crate::broker::Config>,
    running: Running,
    /// The facade tools answer even in a raw profile (the CLI's `tools` commands ask for it).
    facade: bool,
}

impl Session {
    async fn run(
        &mut self,
        mut frames: FrameReader<BufReader<Reader>>,
        write: Writer,
        mut control: Option<OwnedReadHalf>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Ended {
        let limits = &self.broker.config().settings.broker;
        let (out, outbox) = ClientQueue::new(
            limits.max_outbound_bytes,
            limits.client_write_timeout,
            Some(self.broker.config().settings.runtime.run_dir()),
        );
        let link = Arc::new(SessionLink::new(
            self.broker.registry.next_id(),
            out.clone(),
            self.profile.upstreams.clone(),
        ));
        self.broker.registry.add(link.clone());
        self.link = Some(link.clone());
        let gone = out.gone.clone();
        let writer = tokio::spawn(write_loop(write, outbox, out.clone()));
        let mut tasks = JoinSet::new();
        let mut linger = false;
        let mut ended = Ended::InputClosed;
        loop {
            // Backpressure: a client that does not read its answers, or has many requests
            // running, is not read from until that changes, so it cannot make the daemon hold
            // an unbounded number of answers.
            let accepting = out.has_room() && tasks.len() < MAX_RUNNING;
            tokio::select! {
                _ = out.until_room(), if !out.has_room() => {}
                frame = frames.next_frame(), if accepting => match frame {
                    Ok(Some(frame)) => self.handle(frame, &out, &mut tasks).await,
                    Ok(None) => break,
                    Err(FrameError::TooLarge { limit }) => {
                        tracing::warn!(limit, "client frame over the limit; closing the session");
                        let msg = format!("frame exceeds the {limit}-byte limit; closing the connection");
                        out.push(error_line(None, RpcCode::ParseError, &msg)).await;
                        tasks.abort_all();
                        linger = true;
                        ended = Ended::Fault(msg);
                        break;
                    }
                    Err(FrameError::Io(e)) => {
                        tracing::debug!(error = %e, "client read failed");
                        ended = Ended::Fault(format!("reading from the client failed: {e}"));
                        break;
                    }
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                _ = gone.notified() => {
                    // The client cannot receive answers any more: withdraw its calls upstream.
                    tasks.abort_all();
                    ended = Ended::Fault("the client stopped reading its answers".into());
                    break;
                }
                _ = closed(&mut control), if control.is_some() => {
                    tasks.abort_all();
                    break;
                }
                _ = until_set(shutdown) => {
                    tasks.abort_all();
                    ended = Ended::Shutdown;
                    if let Some(end) = link.end_listen() {
                        out.push(end).await;
                    }
                    break;
                }
            }
        }
        // Input ended: answer what is still running, then close our side.
        loop {
            tokio::select! {
                next = tasks.join_next() => if next.is_none() { break },
                _ = gone.notified() => { tasks.abort_all(); break }
                _ = until_set(shutdown) => { tasks.abort_all(); ended = Ended::Shutdown; break }
            }
        }
        self.broker.registry.remove(link.session_id());
        link.close();
        self.broker.release_session(link.session_id());
        self.link = None;
        drop(link);
        if out.abandoned.load(Ordering::SeqCst) {
            writer.abort();
        } else {
            out.close();
            let _ = writer.await;
        }
        if linger {
            // Closing with unread input makes the kernel report a reset instead of a clean end
            // of stream. Discard a little more input so a client that overshot slightly sees
            // the error and then EOF; a client that keeps sending gets the reset.
            let mut rest = frames.into_inner();
            let mut scratch = vec![0u8; 64 * 1024];
            let mut budget = LINGER_BYTES;
            let _ = tokio::time::timeout(LINGER, async {
                while let Ok(n) = tokio::io::AsyncReadExt::read(&mut rest, &mut scratch).await {
                    if n == 0 || n >= budget {
                        break;
                    }
                    budget -= n;
                }
            })
            .await;
        }
        ended
    }

    async fn handle(&mut self, frame: &[u8], out: &Outbox, tasks: &mut JoinSet<()>) {
        let msg = match Incoming::parse(frame) {
            Ok(m) => m,
            Err(e) => {
                let err = if e.is_syntax() {
                    BrokerRpcError::Parse(e.to_string())
                } else {
                    BrokerRpcError::InvalidRequest(e.to_string())
                };
                out.push(err.to_line(None)).await;
                return;
            }
        };
        match msg.kind() {
            IncomingKind::Request => {}
            IncomingKind::Notification => {
                self.notification(&msg);
                return;
            }
            IncomingKind::Response => {
                if let (Some(link), Some(id)) = (&self.link, msg.id)
                    && !link.complete(id, msg.result, msg.error)
                {
                    tracing::debug!("client answered a request the broker never sent; dropped");
                }
                return;
            }
            IncomingKind::Invalid => {
                let err = BrokerRpcError::InvalidRequest("not a JSON-RPC 2.0 request".into());
                out.push(err.to_line(msg.id)).await;
                return;
            }
        }
        let Some(id) = msg.id else { return };
        let line = match msg.method() {
            "initialize" => self.initialize(id, msg.params),
            "server/discover" => self.discover(id, msg.params),
            "subscriptions/listen" if self.modern => {
                let wants_tools = msg
                    .params
                    .and_then(|p| mcpb_protocol::rewrite::member(p, "notifications"))
                    .and_then(|n| mcpb_protocol::rewrite::member(n, "toolsListChanged"))
                    .is_some_and(|v| v.get() == "true");
                match &self.link {
                    // The request stays open; its answer comes when the stream ends.
                    Some(link) => link.listen(id, wants_tools),
                    None => return,
                }
            }
            "ping" => json_line(id, &serde_json::json!({})),
            "tools/list" | "tools/call" => {
                if !self.initialized {
                    self.adopt_request_meta(msg.params);
                }
                self.refresh_profile();
                if self.broker.draining.load(Ordering::SeqCst) {
                    BrokerRpcError::Overloaded("mcp-broker is shutting down".into())
                        .to_line(Some(id))
                } else {
                    self.spawn_call(&msg, id, out, tasks);
                    return;
                }
            }
            other => BrokerRpcError::MethodNotFound(other.to_string()).to_line(Some(id)),
        };
        out.push(line).await;
    }

    /// Picks up the session's profile from the current configuration (it may have been
    /// reloaded). A profile that a reload removed keeps its last definition.
    fn refresh_profile(&mut self) {
        let config = self.broker.config();
        if Arc::ptr_eq(&config, &self.seen_config) {
            return;
        }
        self.seen_config = config.clone();
        if let Some(current) = config.settings.profiles.get(&self.profile.name).cloned()
            && current != *self.profile
        {
            if let Some(link) = &self.link {
                link.set_upstreams(current.upstreams.clone());
            }
            self.profile = Arc::new(current);
        }
    }

    fn spawn_call(&self, msg: &Incoming<'_>, id: &RawValue, out: &Outbox, tasks: &mut JoinSet<()>) {
        let broker = self.broker.clone();
        let profile = self.profile.clone();
        let out = out.clone();
        let id: Box<RawValue> = id.to_owned();
        let key = id_key(id.get());
        let params: Option<Box<RawValue>> = msg.params.map(ToOwned::to_owned);
        let is_list = msg.method() == "tools/list";
        let modern = self.modern;
        let facade = self.facade || profile.compact_tools_enabled;
        let running = self.running.clone();
        let link: Option<Arc<dyn ClientLink>> = self.link.clone().map(|l| l as Arc<dyn ClientLink>);
        let guard = broker.begin();
        let task_key = key.clone();
        let sid = link.as_ref().map_or(0, |l| l.session_id());
        tracing::debug!(session = sid, id = %key, list = is_list, "request");
        let handle = tasks.spawn(async move {
            let _guard = guard;
            let line = if is_list {
                let session = link.as_ref().map_or(0, |l| l.session_id());
                let listed = broker.list_tools(&profile, session, facade).await;
                // Say which servers the list is missing, and why: a silent gap reads as
                // "this server has no tools".
                for (upstream, error) in broker.unavailable(&profile) {
                    out.push(unavailable_notice(&upstream, &error)).await;
                }
                match listed {
                    Ok(mut list) => {
                        if modern {
                            // Required on the 2026-07-28 wire; older clients never see them.
                            list["resultType"] = "complete".into();
                            list["ttlMs"] = 0.into();
                            list["cacheScope"] = "private".into();
                        }
                        json_line(&id, &list)
                    }
                    Err(e) => e.to_line(Some(&id)),
                }
            } else {
                match link {
                    Some(link) => {
                        broker
                            .call_tool(&profile, &id, params.as_deref(), link, modern, facade)
                            .await
                    }
                    None => {
                        BrokerRpcError::Internal("session without a link".into()).to_line(Some(&id))
                    }
                }
            };
            if let Ok(mut r) = running.lock() {
                r.remove(&task_key);
            }
            tracing::debug!(session = sid, id = %task_key, bytes = line.len(), "answer queued");
            out.push(line).await;
        });
        if let Ok(mut r) = self.running.lock() {
            r.insert(key, handle);
        }
    }

    fn notification(&self, msg: &Incoming<'_>) {
        if msg.method() != "notifications/cancelled" {
            return;
        }
        let Some(params) = msg.params else { return };
        let Ok(v) = serde_json::from_str::<Value>(params.get()) else {
            return;
        };
        let Some(request_id) = v.get("requestId") else {
            return;
        };
        let key = request_id.to_string();
        if let Some(handle) = self.running.lock().ok().and_then(|mut r| r.remove(&key)) {
            // Aborting drops the upstream request, which withdraws it and cancels it upstream.
            handle.abort();
        }
    }
}

async fn write_loop(write: Writer, mut outbox: mpsc::Receiver<Vec<u8>>, queue: Outbox) {
    let mut w = BufWriter::with_capacity(64 * 1024, write);
    while let Some(line) = outbox.recv().await {
        let mut ok = w.write_all(&line).await.is_ok();
        queue.written(line.len());
        while ok {
            match outbox.try_recv() {
                Ok(more) => {
                    ok = w.write_all(&more).await.is_ok();
                    queue.written(more.len());
                }
                Err(_) => break,
            }
        }
        if !ok || w.flush().await.is_err() {
            queue.gone.notify_one();
            return;
        }
    }
    let _ = w.shutdown().await;
}

/// A `notifications/message` warning that an upstream is left out of a listing.
fn unavailable_notice(upstream: &str, error: &str) -> Vec<u8> {
    let params = serde_json::json!({
        "level": "warning",
        "logger": "mcp-broker",
        "data": format!("upstream '{upstream}' is unavailable and its tools may be missing: {error}; it is retried in the background"),
    });
    match mcpb_protocol::message::to_raw(&params) {
        Ok(p) => mcpb_protocol::message::notification_line("notifications/message", Some(&p)),
        Err(_) => Vec::new(),
    }
}

/// One spelling per id, whatever whitespace or escapes the client used.
pub(crate) fn id_key(raw: &str) -> String {
    serde_json::from_str::<Value>(raw)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| raw.to_string())
}

/// Resolves when the shim's control connection ends (it sends nothing after the descriptors).
async fn closed(control: &mut Option<OwnedReadHalf>) {
    let Some(c) = control else {
        return std::future::pending().await;
    };
    let mut buf = [0u8; 64];
    loop {
        match tokio::io::AsyncReadExt::read(c, &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

async fn until_set(flag: &mut watch::Receiver<bool>) {
    // The guard returned by wait_for is not Send; drop it here, inside.
    let _ = flag.wait_for(|s| *s).await.map(|_| ());
}
