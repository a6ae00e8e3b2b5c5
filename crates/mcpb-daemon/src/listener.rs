//! The daemon's life: single-instance lock, socket, accept loop with a bounded number of
//! connections, and the shutdown sequence (drain, cancel, stop upstreams, remove the socket).

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use mcpb_config::Settings;
use tokio::net::UnixListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, Semaphore, watch};

use crate::DaemonError;
use crate::broker::Broker;

/// Session connections beyond `max_clients`: those waiting for a slot.
const CONNECTION_HEADROOM: usize = 64;
/// Connections that have not sent their hello yet (each has 10 s to do so).
const HELLO_CONNECTIONS: usize = 256;
/// Admin commands served at once.
const ADMIN_CONNECTIONS: usize = 32;

/// The connection pools: before the hello, then sessions or admin commands.
#[derive(Clone)]
pub struct ConnectionLimits {
    pub hello: Arc<Semaphore>,
    pub sessions: Arc<Semaphore>,
    pub admin: Arc<Semaphore>,
}

/// Runs the daemon until SIGTERM/SIGINT or an admin `stop`.
pub async fn run(settings: Settings) -> Result<(), DaemonError> {
    let layout = settings.runtime.clone();
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
    let pid_path = layout.pid_path();
    let _ = File::create(&pid_path).and_then(|mut f| writeln!(f, "{}", std::process::id()));

    let socket_path = layout.socket_path();
    let len = socket_path.as_os_str().len();
    if len > 107 {
        return Err(DaemonError::SocketPathTooLong {
            path: socket_path,
            len,
        });
    }
    // We hold the lock, so any socket file here was left by a daemon that died.
    if socket_path.exists() {
        tracing::info!(path = %socket_path.display(), "replacing a stale socket");
        let _ = fs::remove_file(&socket_path);
    }
    let listener = UnixListener::bind(&socket_path).map_err(|e| DaemonError::Bind {
        path: socket_path.clone(),
        source: e,
    })?;
    let _ = fs::set_permissions(&socket_path, fs::Permissions::from_mode(0o600));

    let mut term = signal(SignalKind::terminate()).map_err(DaemonError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?;
    let mut hup = signal(SignalKind::hangup()).map_err(DaemonError::Signals)?;

    let max_clients = settings.broker.max_clients;
    let grace = settings.broker.shutdown_grace;
    let broker = Arc::new(Broker::new(settings));
    let stop = Arc::new(Notify::new());
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    // Sessions wait a bounded time for one of `max_clients` slots after their hello; these
    // outer bounds only keep the number of open connections finite.
    let limits = ConnectionLimits {
        hello: Arc::new(Semaphore::new(HELLO_CONNECTIONS)),
        sessions: Arc::new(Semaphore::new(max_clients + CONNECTION_HEADROOM)),
        admin: Arc::new(Semaphore::new(ADMIN_CONNECTIONS)),
    };
    let my_uid = rustix::process::getuid().as_raw();
    tracing::info!(
        pid = std::process::id(),
        socket = %socket_path.display(),
        config = %broker.config().settings.source,
        upstreams = broker.config().upstreams.len(),
        "daemon listening"
    );

    // A one-second heartbeat stops idle upstreams. It also keeps the timer wheel's next
    // wake-up close, so the call timeouts registered on every request never have to wake the
    // event loop through its eventfd.
    let sweeper = broker.clone();
    let heartbeat = tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        let mut beats = 0u32;
        loop {
            tick.tick().await;
            for up in sweeper.config().upstreams.values() {
                up.stop_idle().await;
            }
            beats = beats.wrapping_add(1);
            if beats.is_multiple_of(10) {
                // Adopted orphans that exited: reaped here, since nobody else waits for them.
                let spawned: Vec<u32> = sweeper
                    .ctx
                    .ledger
                    .as_ref()
                    .map(|l| l.entries().iter().map(|e| e.pgid).collect())
                    .unwrap_or_default();
                mcpb_upstream::reap_adopted(&spawned);
            }
        }
    });

    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => { tracing::warn!(error = %e, "accept failed"); continue }
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = stop.notified() => break,
            _ = hup.recv() => { on_hangup(&broker); continue }
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == my_uid => {}
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
        // Never wait for room before accepting; connections that have not said hello yet are
        // bounded on their own, and sessions and admin commands each have their own pool after
        // it, so waiting sessions never keep `status` or `stop` from being heard.
        let Ok(hello) = limits.hello.clone().try_acquire_owned() else {
            tracing::warn!("connection refused: too many connections before their hello");
            tokio::spawn(refuse_connection(stream));
            continue;
        };
        let broker = broker.clone();
        let shutdown = shutdown_rx.clone();
        let stop = stop.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            crate::session::serve(broker, stream, shutdown, stop, limits, hello).await;
        });
    }

    // Shutdown: no new connections, let in-flight calls finish until the grace deadline.
    tracing::info!(
        inflight = broker.inflight.load(Ordering::SeqCst),
        "shutting down"
    );
    broker.draining.store(true, Ordering::SeqCst);
    drop(listener);
    let _ = fs::remove_file(&socket_path);
    let mut now = false;
    let drained = async {
        while broker.inflight.load(Ordering::SeqCst) > 0 {
            let idle = broker.idle.notified();
            if broker.inflight.load(Ordering::SeqCst) == 0 {
                break;
            }
            idle.await;
        }
    };
    tokio::select! {
        _ = drained => {}
        _ = tokio::time::sleep(grace) => tracing::warn!("grace period over; cancelling the calls still running"),
        _ = term.recv() => now = true,
        _ = int.recv() => now = true,
    }
    let _ = shutdown_tx.send(true);
    if now {
        tracing::warn!("second signal: killing upstreams now");
        for up in broker.all_upstreams() {
            up.kill_now();
        }
    } else {
        let mut stops = tokio::task::JoinSet::new();
        for up in broker.all_upstreams() {
            let up = up.clone();
            stops.spawn(async move { up.stop().await });
        }
        tokio::select! {
            _ = async { while stops.join_next().await.is_some() {} } => {}
            _ = term.recv() => {
                for up in broker.all_upstreams() {
                    up.kill_now();
                }
            }
        }
    }
    heartbeat.abort();
    // Whatever escaped its upstream's process group and is still running goes now.
    let adopted = tokio::task::spawn_blocking(mcpb_upstream::kill_adopted)
        .await
        .unwrap_or(0);
    if adopted > 0 {
        tracing::warn!(
            processes = adopted,
            "stopped processes that had left their upstream's process group"
        );
    }
    let _ = fs::remove_file(&pid_path);
    tracing::info!("daemon stopped");
    drop(lock);
    Ok(())
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
