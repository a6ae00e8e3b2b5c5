//! One MCP session in a profile's view: frames read with backpressure, requests that reach
//! upstreams run as tasks (so a slow call never blocks the next frame), cancellation by id, and
//! the end of the session (its calls withdrawn, its per-session upstreams released, the shim
//! told how it ended).
//!
//! Runtime: the daemon runs on tokio's current-thread runtime. The running-request map is only
//! touched from this session's task and the tasks it spawned, never while awaiting, so a plain
//! lock is enough; a multi-threaded runtime would keep it correct, only slower.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mcpb_config::ProfileSettings;
use mcpb_protocol::message::{error_line, id_key};
use mcpb_protocol::{
    BrokerRpcError, FrameError, FrameReader, HelloReply, Incoming, IncomingKind, RpcCode,
};
use mcpb_upstream::ClientLink;
use parking_lot::Mutex;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};

use crate::broker::Broker;
use crate::error::json_line;
use crate::generation::Generation;
use crate::handover::{Reader, Writer};
use crate::link::SessionLink;
use crate::outbox::ClientQueue;
use crate::view::View;

mod handshake;

const LINGER: Duration = Duration::from_secs(1);
/// Requests of one session running at once; past this its input waits.
const MAX_RUNNING: usize = 64;
const LINGER_BYTES: usize = 1024 * 1024;

type Running = Arc<Mutex<HashMap<String, AbortHandle>>>;

/// The session's queue of frames to the client (see `outbox`).
type Outbox = Arc<ClientQueue>;

/// Why a session ended, reported to a shim that handed over its stdio.
#[derive(Debug)]
enum Ended {
    InputClosed,
    Shutdown,
    Fault(String),
}

impl Ended {
    fn report(self) -> HelloReply {
        match self {
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
        }
    }
}

pub(crate) struct SessionIo {
    pub(crate) reader: Reader,
    pub(crate) writer: Writer,
    /// The shim's connection, kept when the shim handed over its stdio: its end means the shim
    /// is gone, and the session's end is reported on it.
    pub(crate) control: Option<UnixStream>,
}

pub(crate) struct Session {
    broker: Arc<Broker>,
    link: Option<Arc<SessionLink>>,
    profile: Arc<ProfileSettings>,
    /// Raw, compact or raw with the broker tools: from the profile and the hello.
    view: View,
    /// The hello asked for the broker tools (the CLI's `tools` commands).
    facade_asked: bool,
    /// Chosen by flag or client entry; `clientInfo.name` may only refine a default choice.
    explicit: bool,
    /// The client's name was looked up once already.
    client_seen: bool,
    /// The client's name: `--client` of the shim, else `clientInfo.name`.
    client: Option<Arc<str>>,
    /// The client completed `initialize`: its requests carry no envelope to read.
    initialized: bool,
    /// Where the client was started (see `with_cwd`).
    cwd: Option<Arc<std::path::Path>>,
    /// The configuration generation the profile was last taken from.
    seen_config: Arc<Generation>,
    running: Running,
}

impl Session {
    pub(crate) fn new(
        broker: Arc<Broker>,
        profile: Arc<ProfileSettings>,
        explicit: bool,
        facade_asked: bool,
    ) -> Self {
        Self {
            seen_config: broker.config(),
            broker,
            link: None,
            view: View::choose(&profile, facade_asked),
            profile,
            facade_asked,
            explicit,
            client_seen: false,
            client: None,
            initialized: false,
            cwd: None,
            running: Arc::default(),
        }
    }

    /// Names the client (the shim's `--client`), before `clientInfo.name` could.
    pub(crate) fn with_client(mut self, client: Option<&str>) -> Self {
        self.client = client.map(Arc::from);
        self
    }

    /// The folder the client was started in (the shim's working folder), which a project's
    /// upstreams are shown in.
    pub(crate) fn with_cwd(mut self, cwd: Option<&str>) -> Self {
        self.cwd = cwd
            .filter(|c| c.starts_with('/'))
            .map(|c| Arc::from(std::path::Path::new(c)));
        self
    }

    pub(crate) fn profile_name(&self) -> &str {
        &self.profile.name
    }

    /// Serves the session until its input ends, its client goes, or the daemon shuts down.
    pub(crate) async fn run(&mut self, io: SessionIo, shutdown: &mut watch::Receiver<bool>) {
        let max_frame = self.broker.config().settings.broker.max_frame_bytes;
        let frames = FrameReader::new(BufReader::with_capacity(64 * 1024, io.reader), max_frame);
        let (control_read, control_write) = match io.control {
            Some(c) => {
                let (r, w) = c.into_split();
                (Some(r), Some(w))
            }
            None => (None, None),
        };
        let ended = self.serve(frames, io.writer, control_read, shutdown).await;
        if let Some(mut w) = control_write {
            let _ = w.write_all(&ended.report().to_line()).await;
        }
    }

    fn set_profile(&mut self, profile: ProfileSettings) {
        if let Some(link) = &self.link {
            link.set_upstreams(profile.upstreams.clone());
        }
        self.view = View::choose(&profile, self.facade_asked);
        self.profile = Arc::new(profile);
    }

    async fn serve(
        &mut self,
        mut frames: FrameReader<BufReader<Reader>>,
        write: Writer,
        mut control: Option<OwnedReadHalf>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Ended {
        let (out, outbox, link) = self.open_link();
        let writer = tokio::spawn(write_loop(write, outbox, out.clone()));
        let mut tasks = JoinSet::new();
        let (mut ended, linger) = self
            .read_input(&mut frames, &out, &link, &mut tasks, &mut control, shutdown)
            .await;
        // Input ended: answer what is still running, then close our side.
        if finish_running(&mut tasks, &out, shutdown).await {
            ended = Ended::Shutdown;
        }
        self.close_link(link);
        if out.abandoned.load(std::sync::atomic::Ordering::SeqCst) {
            writer.abort();
        } else {
            out.close();
            let _ = writer.await;
        }
        if linger {
            discard_some_input(frames).await;
        }
        ended
    }

    /// The client's queue of answers (and what the writer drains it from), and the session's
    /// link, registered with the broker.
    fn open_link(&mut self) -> (Outbox, mpsc::Receiver<Vec<u8>>, Arc<SessionLink>) {
        let config = self.broker.config();
        let limits = &config.settings.broker;
        let (out, outbox) = ClientQueue::new(
            limits.max_outbound_bytes,
            limits.client_write_timeout,
            Some(config.settings.runtime.run_dir()),
        );
        let link = Arc::new(SessionLink::new(
            self.broker.registry.next_id(),
            out.clone(),
            self.profile.upstreams.clone(),
        ));
        self.broker.registry.add(link.clone());
        self.link = Some(link.clone());
        (out, outbox, link)
    }

    /// Reads and handles the client's messages until its input ends, it stops reading, or the
    /// daemon shuts down; gives why, and whether to discard some input before closing.
    async fn read_input(
        &mut self,
        frames: &mut FrameReader<BufReader<Reader>>,
        out: &Outbox,
        link: &SessionLink,
        tasks: &mut JoinSet<()>,
        control: &mut Option<OwnedReadHalf>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> (Ended, bool) {
        let client_gone = out.gone.clone();
        // The ends a session waits for are made once, not at each message: each would register
        // its waker again per loop.
        let gone = client_gone.notified();
        let control_closed = closed(control);
        let shutdown_set = until_set(shutdown);
        tokio::pin!(gone, control_closed, shutdown_set);
        loop {
            // Finished requests are reaped here rather than woken for: a request's end then
            // costs this task no wake-up of its own.
            while tasks.try_join_next().is_some() {}
            // Backpressure: a client that does not read its answers, or has many requests
            // running, is not read from until that changes, so it cannot make the daemon hold
            // an unbounded number of answers.
            let full = tasks.len() >= MAX_RUNNING;
            let accepting = out.has_room() && !full;
            tokio::select! {
                _ = out.until_room(), if !out.has_room() => {}
                frame = frames.next_frame(), if accepting => match frame {
                    Ok(Some(frame)) => self.handle(frame, out, tasks).await,
                    Ok(None) => return (Ended::InputClosed, false),
                    Err(FrameError::TooLarge { limit }) => {
                        tracing::warn!(limit, "client frame over the limit; closing the session");
                        let msg = format!("frame exceeds the {limit}-byte limit; closing the connection");
                        out.push(error_line(None, RpcCode::ParseError, &msg)).await;
                        tasks.abort_all();
                        return (Ended::Fault(msg), true);
                    }
                    Err(FrameError::Io(e)) => {
                        tracing::debug!(error = %e, "client read failed");
                        return (Ended::Fault(format!("reading from the client failed: {e}")), false);
                    }
                },
                Some(_) = tasks.join_next(), if full => {}
                _ = &mut gone => {
                    // The client cannot receive answers any more: withdraw its calls upstream.
                    tasks.abort_all();
                    return (Ended::Fault("the client stopped reading its answers".into()), false);
                }
                _ = &mut control_closed => {
                    tasks.abort_all();
                    return (Ended::InputClosed, false);
                }
                _ = &mut shutdown_set => {
                    tasks.abort_all();
                    if let Some(end) = link.end_listen() {
                        out.push(end).await;
                    }
                    return (Ended::Shutdown, false);
                }
            }
        }
    }

    /// Takes the session out of the broker: its registration, subscriptions and link.
    fn close_link(&mut self, link: Arc<SessionLink>) {
        self.broker.registry.remove(link.session_id());
        let orphaned = self.broker.subscriptions.drop_session(link.session_id());
        self.broker.unsubscribe_orphans(link.session_id(), orphaned);
        link.close();
        let check = self.client.as_deref() == Some(mcpb_protocol::CHECK_CLIENT);
        self.broker.release_session(link.session_id(), check);
        self.link = None;
        drop(link);
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
        if let Some(line) = self.answer(&msg, id, out, tasks).await {
            out.push(line).await;
        }
    }

    /// The answer to a request, or `None` when it is answered later (a call spawned, a stream
    /// held open) or not at all.
    async fn answer(
        &mut self,
        msg: &Incoming<'_>,
        id: &RawValue,
        out: &Outbox,
        tasks: &mut JoinSet<()>,
    ) -> Option<Vec<u8>> {
        // A 2026-07-28 client may open with its subscription stream (over HTTP, the stream is
        // the POST's answer): the request's own `_meta` says which era it speaks.
        if !self.initialized && msg.method() == "subscriptions/listen" {
            self.adopt_request_meta(msg.params);
        }
        let stateless = self.link.as_ref().is_some_and(|l| l.era().is_stateless());
        let line = match msg.method() {
            "initialize" => self.initialize(id, msg.params),
            "server/discover" => self.discover(id, msg.params),
            "subscriptions/listen" if stateless => {
                let wants_tools = msg
                    .params
                    .and_then(|p| mcpb_protocol::rewrite::member(p, "notifications"))
                    .and_then(|n| mcpb_protocol::rewrite::member(n, "toolsListChanged"))
                    .is_some_and(|v| v.get() == "true");
                match &self.link {
                    // The request stays open; its answer comes when the stream ends.
                    Some(link) => link.listen(id, wants_tools),
                    None => return None,
                }
            }
            "ping" => json_line(id, &serde_json::json!({})),
            "logging/setLevel" => {
                let link = self.link.clone()?;
                let view = self.broker.view(self.profile.clone(), link.session_id());
                match view.set_log_level(msg.params, &link).await {
                    Ok(v) => json_line(id, &v),
                    Err(e) => e.to_line(Some(id)),
                }
            }
            // The method is read once: what it routes to travels with the request.
            other => match crate::route::Method::of(other) {
                Some(method) => {
                    if !self.initialized {
                        self.adopt_request_meta(msg.params);
                    }
                    self.refresh_profile();
                    if self.broker.drain.is_draining() {
                        BrokerRpcError::Overloaded("mcp-broker is shutting down".into())
                            .to_line(Some(id))
                    } else {
                        self.spawn_request(msg, method, id, out, tasks);
                        return None;
                    }
                }
                None => BrokerRpcError::MethodNotFound(other.to_string()).to_line(Some(id)),
            },
        };
        Some(line)
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
            self.set_profile(current);
        }
    }

    fn spawn_request(
        &self,
        msg: &Incoming<'_>,
        method: crate::route::Method,
        id: &RawValue,
        out: &Outbox,
        tasks: &mut JoinSet<()>,
    ) {
        let Some(link) = self.link.clone() else {
            return;
        };
        let sid = link.session_id();
        let view = self
            .broker
            .view(self.profile.clone(), sid)
            .with_client(self.client.clone())
            .with_cwd(self.cwd.clone());
        let kind = self.view;
        let era = link.era();
        let out = out.clone();
        let id: Box<RawValue> = id.to_owned();
        let key = id_key(id.get());
        let params: Option<Box<RawValue>> = msg.params.map(ToOwned::to_owned);
        let running = self.running.clone();
        let guard = self.broker.drain.begin();
        let task_key = key.clone();
        tracing::debug!(session = sid, id = %key, ?method, "request");
        // The routes' futures are boxed: the task is then a few words, where the whole call
        // path inline made it kilobytes, copied at each move of a spawn (a tenth of the
        // daemon's instructions per call went to those copies).
        let handle = tasks.spawn(async move {
            let _guard = guard;
            let line = answer(&view, method, kind, era, &id, params.as_deref(), link, &out).await;
            running.lock().remove(&task_key);
            tracing::debug!(session = sid, id = %task_key, bytes = line.len(), "answer queued");
            out.push(line).await;
        });
        self.running.lock().insert(key, handle);
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
        let handle = self.running.lock().remove(&key);
        if let Some(handle) = handle {
            // Aborting drops the upstream request, which withdraws it and cancels it upstream.
            handle.abort();
        }
    }
}

/// A request's answer line. The routes' futures are boxed: the task is then a few words, where
/// the whole call path inline made it kilobytes, copied at each move of a spawn (a tenth of the
/// daemon's instructions per call went to those copies).
#[allow(clippy::too_many_arguments)]
async fn answer(
    view: &crate::view::ProfileView,
    method: crate::route::Method,
    kind: View,
    era: mcpb_protocol::Era,
    id: &RawValue,
    params: Option<&RawValue>,
    link: Arc<dyn ClientLink>,
    out: &Outbox,
) -> Vec<u8> {
    match method {
        crate::route::Method::ToolsList => {
            let line = Box::pin(crate::route::list(view, kind, era, id)).await;
            // Say which servers the list is missing, and why: a silent gap reads as "this
            // server has no tools".
            for (upstream, error) in view.unavailable() {
                out.push(unavailable_notice(&upstream, &error)).await;
            }
            for upstream in view.still_starting() {
                out.push(starting_notice(&upstream)).await;
            }
            line
        }
        crate::route::Method::ToolsCall => {
            Box::pin(crate::route::call(view, kind, era, id, params, link)).await
        }
        crate::route::Method::ResourcesList
        | crate::route::Method::ResourceTemplatesList
        | crate::route::Method::ResourcesRead
        | crate::route::Method::PromptsList
        | crate::route::Method::PromptsGet
        | crate::route::Method::Complete
        | crate::route::Method::Subscribe
        | crate::route::Method::Unsubscribe => {
            Box::pin(crate::route::content(view, method, era, id, params, link)).await
        }
    }
}

/// Waits for the requests still running to be answered; all are dropped when the client stops
/// reading or the daemon shuts down (then `true`).
async fn finish_running(
    tasks: &mut JoinSet<()>,
    out: &Outbox,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    loop {
        tokio::select! {
            next = tasks.join_next() => if next.is_none() { return false },
            _ = out.gone.notified() => { tasks.abort_all(); return false }
            _ = until_set(shutdown) => { tasks.abort_all(); return true }
        }
    }
}

/// Reads and drops a little more of the client's input, for a bounded time.
async fn discard_some_input(frames: FrameReader<BufReader<Reader>>) {
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
    log_notice(
        "warning",
        format!(
            "upstream '{upstream}' is unavailable and its tools may be missing: {error}; it is retried in the background"
        ),
    )
}

fn starting_notice(upstream: &str) -> Vec<u8> {
    log_notice(
        "info",
        format!(
            "upstream '{upstream}' is still starting; its tools follow with notifications/tools/list_changed when it is up"
        ),
    )
}

pub(super) fn log_notice(level: &str, data: String) -> Vec<u8> {
    let params = serde_json::json!({"level": level, "logger": "mcp-broker", "data": data});
    match mcpb_protocol::message::to_raw(&params) {
        Ok(p) => mcpb_protocol::message::notification_line("notifications/message", Some(&p)),
        Err(_) => Vec::new(),
    }
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

pub(crate) async fn until_set(flag: &mut watch::Receiver<bool>) {
    // The guard returned by wait_for is not Send; drop it here, inside.
    let _ = flag.wait_for(|s| *s).await.map(|_| ());
}
