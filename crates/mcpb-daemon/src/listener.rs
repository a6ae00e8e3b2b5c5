//! The daemon's life as four steps: bind (single-instance lock, leftovers of a dead daemon
//! reaped, socket), accept (a `Handler` task per connection, bounded pools), drain (no new
//! requests; running ones finish until the grace deadline) and stop (upstreams stopped, socket
//! and pid file removed).
//!
//! Runtime: the daemon runs on tokio's current-thread runtime (`mcp-broker daemon` builds it).
//! Two things rely on that: PR_SET_PDEATHSIG fires when the *thread* that spawned a child exits,
//! so children are spawned from the one thread that lives as long as the daemon; and heavy work
//! (cataloguing a new list) is sent to a thread of its own so the event loop stays responsive.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use mcpb_config::Settings;
use mcpb_config::layout::RuntimeLayout;
use tokio::net::UnixListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, Semaphore, watch};

use crate::DaemonError;
use crate::broker::Broker;
use crate::connection::{ConnectionLimits, Handler};

/// Session connections beyond `max_clients`: those waiting for a slot.
const CONNECTION_HEADROOM: usize = 64;
/// Connections that have not sent their hello yet (each has 10 s to do so).
const HELLO_CONNECTIONS: usize = 256;
/// Admin commands served at once.
const ADMIN_CONNECTIONS: usize = 32;
/// How often the daemon checks that its socket file is still its own.
const SOCKET_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// The daemon's socket with everything it holds for its life: the single-instance lock, the pid
/// file, the signals it answers, the broker state and the connection pools.
struct Listener {
    /// Closed when the drain starts, so a client connecting then hears at once.
    socket: Option<UnixListener>,
    socket_path: std::path::PathBuf,
    /// The socket file's inode: the daemon stops when the file at its path is gone or another
    /// (its runtime dir deleted, or replaced), and never removes a file that is not its own.
    socket_ino: u64,
    pid_path: std::path::PathBuf,
    /// Held until the daemon has stopped: a second daemon for the same root refuses to start.
    _lock: File,
    signals: Signals,
    broker: Arc<Broker>,
    limits: ConnectionLimits,
    stop: Arc<Notify>,
    shutdown: watch::Sender<bool>,
    /// `broker.shutdown_grace_ms` as the daemon started with it (read once, like the other
    /// broker settings).
    grace: std::time::Duration,
    my_uid: u32,
}

struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

/// Runs the daemon until SIGTERM/SIGINT or an admin `stop`: bind, accept, drain, stop.
pub async fn run(settings: Settings) -> Result<(), DaemonError> {
    run_with(settings, None).await
}

/// `run`, on the last valid copy of a config file that does not load now (`warning` says why):
/// `status`, the log and each session's client are told, until a reload reads the file.
pub async fn run_with(settings: Settings, warning: Option<String>) -> Result<(), DaemonError> {
    match &warning {
        Some(w) => tracing::warn!("{w}"),
        None => {
            if let Err(e) = mcpb_config::last_good::remember_file(&settings) {
                tracing::warn!(error = %e, "cannot keep a copy of the config file under state/");
            }
        }
    }
    let mut listener = Listener::bind(settings)?;
    *listener.broker.config_warning.lock() = warning;
    let heartbeat = tokio::spawn(heartbeat(listener.broker.clone()));
    start_eager(&listener.broker);
    listener.accept().await;
    let now = listener.drain().await;
    listener.stop(now).await;
    heartbeat.abort();
    listener.finish().await;
    Ok(())
}

/// Makes the runtime dir and takes its lock: one daemon per runtime dir.
fn take_lock(layout: &RuntimeLayout) -> Result<File, DaemonError> {
    layout.ensure().map_err(|e| DaemonError::Runtime {
        path: layout.root.clone(),
        source: e,
    })?;
    let lock_path = layout.lock_path();
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| DaemonError::Runtime {
            path: lock_path.clone(),
            source: e,
        })?;
    if lock.try_lock().is_err() {
        return Err(DaemonError::AlreadyRunning {
            root: layout.root.clone(),
        });
    }
    Ok(lock)
}

/// Kills the process groups a daemon that died left behind, and adopts orphans from now on.
fn reap_previous(layout: &RuntimeLayout) {
    // We hold the lock: every group in the ledger was left by a daemon that died.
    let reaped =
        mcpb_upstream::Ledger::new(mcpb_upstream::ledger_dir(&layout.state_dir())).reap(false);
    let killed: usize = reaped.iter().map(|r| r.killed).sum();
    if killed > 0 {
        tracing::warn!(
            groups = reaped.len(),
            processes = killed,
            "killed processes left by a previous daemon"
        );
    }
    // Processes that leave their upstream's group (setsid) become ours, not init's, so they
    // can be reaped as they exit and stopped with the daemon.
    mcpb_upstream::adopt_orphans();
}

/// Binds the daemon socket, owner-only, in place of a stale one; gives it and its inode.
fn bind_socket(socket_path: &Path) -> Result<(UnixListener, u64), DaemonError> {
    let len = socket_path.as_os_str().len();
    if len > 107 {
        return Err(DaemonError::SocketPathTooLong {
            path: socket_path.to_path_buf(),
            len,
        });
    }
    // We hold the lock, so any socket file here was left by a daemon that died.
    if socket_path.exists() {
        tracing::info!(path = %socket_path.display(), "replacing a stale socket");
        let _ = fs::remove_file(socket_path);
    }
    let socket = UnixListener::bind(socket_path).map_err(|e| DaemonError::Bind {
        path: socket_path.to_path_buf(),
        source: e,
    })?;
    let _ = fs::set_permissions(socket_path, fs::Permissions::from_mode(0o600));
    let socket_ino =
        fs::symlink_metadata(socket_path).map_or(0, |m| std::os::unix::fs::MetadataExt::ino(&m));
    Ok((socket, socket_ino))
}

impl Listener {
    /// Takes the lock, clears what a dead daemon left (process groups, socket), binds.
    fn bind(settings: Settings) -> Result<Self, DaemonError> {
        let layout = settings.runtime.clone();
        let lock = take_lock(&layout)?;
        reap_previous(&layout);
        let pid_path = layout.pid_path();
        let _ = File::create(&pid_path).and_then(|mut f| writeln!(f, "{}", std::process::id()));

        let socket_path = layout.socket_path();
        let (socket, socket_ino) = bind_socket(&socket_path)?;
        let signals = Signals {
            term: signal(SignalKind::terminate()).map_err(DaemonError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?,
            hup: signal(SignalKind::hangup()).map_err(DaemonError::Signals)?,
        };
        let max_clients = settings.broker.max_clients;
        let grace = settings.broker.shutdown_grace;
        let http = settings.http.clone();
        let broker = Arc::new(Broker::new(settings));
        let shutdown = watch::channel(false).0;
        if let Some(http) = &http {
            let front = match crate::http::bind(http, broker.clone(), shutdown.subscribe()) {
                Ok(f) => f,
                Err(e) => {
                    // Nothing of this daemon may outlive it: a socket nobody answers on.
                    let _ = fs::remove_file(&socket_path);
                    let _ = fs::remove_file(&pid_path);
                    return Err(DaemonError::Http(e));
                }
            };
            tokio::spawn(front);
        }
        // Sessions wait a bounded time for one of `max_clients` slots after their hello; these
        // outer bounds only keep the number of open connections finite.
        let limits = ConnectionLimits {
            hello: Arc::new(Semaphore::new(HELLO_CONNECTIONS)),
            sessions: Arc::new(Semaphore::new(max_clients + CONNECTION_HEADROOM)),
            admin: Arc::new(Semaphore::new(ADMIN_CONNECTIONS)),
        };
        tracing::info!(
            pid = std::process::id(),
            socket = %socket_path.display(),
            config = %broker.config().settings.source,
            upstreams = broker.config().upstreams.len(),
            "daemon listening"
        );
        notify_ready();
        Ok(Self {
            socket: Some(socket),
            socket_path,
            socket_ino,
            pid_path,
            _lock: lock,
            signals,
            broker,
            limits,
            stop: Arc::new(Notify::new()),
            shutdown,
            grace,
            my_uid: rustix::process::getuid().as_raw(),
        })
    }

    /// Accepts connections, each served by its own `Handler` task, until a stop is asked for.
    async fn accept(&mut self) {
        let Some(socket) = self.socket.as_ref() else {
            return;
        };
        let mut watch = tokio::time::interval(SOCKET_CHECK);
        loop {
            let stream = tokio::select! {
                _ = watch.tick() => {
                    if self.socket_is_ours() {
                        continue;
                    }
                    // Nobody can reach this daemon any more, and a new one would start beside
                    // it holding the same upstreams and port: it stops, with its upstreams.
                    tracing::error!(
                        socket = %self.socket_path.display(),
                        "the socket file is gone or replaced (was the runtime dir deleted?); stopping"
                    );
                    return;
                }
                r = socket.accept() => match r {
                    Ok((s, _)) => s,
                    Err(e) => {
                        // Out of fds, most likely: wait for some to close instead of spinning.
                        tracing::warn!(error = %e, "accept failed; pausing accepts for 100 ms");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = self.signals.term.recv() => return,
                _ = self.signals.int.recv() => return,
                _ = self.stop.notified() => return,
                _ = self.signals.hup.recv() => { on_hangup(&self.broker); continue }
            };
            match stream.peer_cred() {
                Ok(cred) if cred.uid() == self.my_uid => {}
                Ok(cred) => {
                    tracing::warn!(
                        peer_uid = cred.uid(),
                        "connection from another user refused"
                    );
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read peer credentials; connection refused");
                    continue;
                }
            }
            // Never wait for room before accepting; connections that have not said hello yet
            // are bounded on their own, and sessions and admin commands each have their own
            // pool after it, so waiting sessions never keep `status` or `stop` from being heard.
            let Ok(hello) = self.limits.hello.clone().try_acquire_owned() else {
                tracing::warn!("connection refused: too many connections before their hello");
                tokio::spawn(refuse_connection(stream));
                continue;
            };
            let handler = Handler {
                broker: self.broker.clone(),
                shutdown: self.shutdown.subscribe(),
                stop: self.stop.clone(),
                limits: self.limits.clone(),
            };
            tokio::spawn(handler.serve(stream, hello));
        }
    }

    fn socket_is_ours(&self) -> bool {
        fs::symlink_metadata(&self.socket_path)
            .is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == self.socket_ino)
    }

    /// No new connections; in-flight requests may finish until the grace deadline. Returns
    /// true when a second signal asked to stop now.
    async fn drain(&mut self) -> bool {
        let drain = self.broker.drain.clone();
        tracing::info!(inflight = drain.inflight(), "shutting down");
        drain.start();
        self.socket = None;
        if self.socket_is_ours() {
            let _ = fs::remove_file(&self.socket_path);
        }
        let mut now = false;
        tokio::select! {
            drained = drain.wait(self.grace) => if !drained {
                tracing::warn!("grace period over; cancelling the calls still running");
            },
            _ = self.signals.term.recv() => now = true,
            _ = self.signals.int.recv() => now = true,
        }
        // Kept even with no connection open now: every handler subscribes to this value.
        self.shutdown.send_replace(true);
        now
    }

    /// Stops every upstream: with the stop ladder, or at once after a second signal (a third
    /// signal during the ladder kills what is left).
    async fn stop(&mut self, now: bool) {
        if now {
            tracing::warn!("second signal: killing upstreams now");
            for up in self.broker.all_upstreams() {
                up.kill_now();
            }
            return;
        }
        let mut stops = tokio::task::JoinSet::new();
        for up in self.broker.all_upstreams() {
            stops.spawn(async move { up.stop().await });
        }
        tokio::select! {
            _ = async { while stops.join_next().await.is_some() {} } => {}
            _ = self.signals.term.recv() => {
                for up in self.broker.all_upstreams() {
                    up.kill_now();
                }
            }
        }
    }

    /// The audit log's last lines are written; whatever escaped its upstream's process group
    /// goes now; then the pid file.
    async fn finish(self) {
        self.broker.stop_code_pool().await;
        let calls = self.broker.calls.clone();
        let _ = tokio::task::spawn_blocking(move || calls.flush()).await;
        let adopted = tokio::task::spawn_blocking(mcpb_upstream::kill_adopted)
            .await
            .unwrap_or(0);
        if adopted > 0 {
            tracing::warn!(
                processes = adopted,
                "stopped processes that had left their upstream's process group"
            );
        }
        let mine = fs::read_to_string(&self.pid_path)
            .is_ok_and(|p| p.trim() == std::process::id().to_string());
        if mine {
            let _ = fs::remove_file(&self.pid_path);
        }
        tracing::info!("daemon stopped");
    }
}

/// Upstreams that start `eager` are started with the daemon, each on its own task; the others
/// wait for their first use.
fn start_eager(broker: &Arc<Broker>) {
    for up in broker.config().upstreams.values() {
        let s = up.settings();
        if s.start == mcpb_config::StartMode::Eager && s.enabled() {
            let up = up.clone();
            tokio::spawn(async move {
                if let Err(e) = up.tools(0).await {
                    tracing::warn!(upstream = up.name(), error = %e, "eager start failed");
                }
            });
        }
    }
}

/// A one-second heartbeat stops idle upstreams and reaps adopted orphans. It also keeps the
/// timer wheel's next wake-up close, so the call timeouts registered on every request never have
/// to wake the event loop through its eventfd.
async fn heartbeat(broker: Arc<Broker>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    let mut beats = 0u32;
    loop {
        tick.tick().await;
        for up in broker.config().upstreams.values() {
            up.stop_idle(broker.subscriptions.any_for(up.name())).await;
        }
        beats = beats.wrapping_add(1);
        if beats.is_multiple_of(10) {
            // Adopted orphans that exited: reaped here, since nobody else waits for them.
            let spawned: Vec<u32> = broker
                .ctx
                .ledger
                .as_ref()
                .map(|l| l.entries().iter().map(|e| e.pgid).collect())
                .unwrap_or_default();
            mcpb_upstream::reap_adopted(&spawned);
        }
    }
}

/// Tells a connection over the limit why it is closed, without reading its hello.
async fn refuse_connection(mut stream: tokio::net::UnixStream) {
    use tokio::io::AsyncWriteExt;
    let reply = mcpb_protocol::HelloReply::refuse(
        "mcp-broker has too many connections that have not said hello",
        vec!["retry in a few seconds".into()],
    );
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        stream.write_all(&reply.to_line()),
    )
    .await;
}

fn on_hangup(broker: &Arc<Broker>) {
    if let Err(errors) = crate::reload::reload(broker) {
        tracing::error!(
            "SIGHUP: the new configuration is invalid; keeping the current one\n{errors}"
        );
    }
}

/// Tells systemd the daemon is ready (`Type=notify`) once its socket answers, when it runs
/// under systemd; elsewhere there is no NOTIFY_SOCKET and nothing to do.
fn notify_ready() {
    use std::os::unix::net::UnixDatagram;
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sender) = UnixDatagram::unbound() else {
        return;
    };
    let path = std::path::PathBuf::from(&socket);
    let sent = match path.to_str().and_then(|p| p.strip_prefix('@')) {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                .and_then(|addr| sender.send_to_addr(b"READY=1", &addr))
        }
        None => sender.send_to(b"READY=1", &path),
    };
    if let Err(e) = sent {
        tracing::warn!(error = %e, "could not tell systemd the daemon is ready");
    }
}
