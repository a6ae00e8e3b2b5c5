//! One connection to the daemon socket, up to what it is for: the hello line (bounded in time
//! and size), the connection pool of its kind, then one admin command or one MCP session with
//! the profile chosen (`--profile`, else the client's entry, else `default`) and a client slot.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use mcpb_config::ProfileSettings;
use mcpb_protocol::{BROKER_PROTOCOL_VERSION, FrameReader, Hello, HelloKind, HelloReply};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

use crate::broker::Broker;
use crate::handover;
use crate::session::{Session, SessionIo, until_set};

const HELLO_LIMIT: usize = 64 * 1024;
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a session over `broker.max_clients` waits for a slot before it is refused (the shim
/// waits 15 s for the daemon's answer).
const SLOT_WAIT: Duration = Duration::from_secs(5);

/// The connection pools: before the hello, then sessions or admin commands.
#[derive(Clone)]
pub(crate) struct ConnectionLimits {
    pub(crate) hello: Arc<Semaphore>,
    pub(crate) sessions: Arc<Semaphore>,
    pub(crate) admin: Arc<Semaphore>,
}

/// What a connection needs besides its stream.
pub(crate) struct Handler {
    pub(crate) broker: Arc<Broker>,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Notified by the admin `stop` command.
    pub(crate) stop: Arc<Notify>,
    pub(crate) limits: ConnectionLimits,
}

async fn refuse(frames: &mut Frames, reply: HelloReply) {
    let _ = frames.get_mut().write_all(&reply.to_line()).await;
}

type Frames = FrameReader<BufReader<UnixStream>>;

/// The connection's hello line, or `None` when it closed or was refused (a line that is not a
/// hello, or another broker protocol).
async fn read_hello(frames: &mut Frames) -> Option<Hello> {
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, frames.next_frame()).await {
        Ok(Ok(Some(line))) => serde_json::from_slice::<Hello>(line).map_err(|e| e.to_string()),
        Ok(Ok(None)) => return None,
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
            refuse(frames, reply).await;
            return None;
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
        refuse(frames, reply).await;
        return None;
    }
    Some(hello)
}

/// Says the session is accepted for `profile`, then takes over the client's stdio (the shim's
/// descriptors with `pass_fds`, else the socket itself); `None` when the client is gone.
async fn accept_session(mut frames: Frames, profile: &str, pass_fds: bool) -> Option<SessionIo> {
    let reply = HelloReply {
        ok: true,
        profile: Some(profile.to_string()),
        daemon_pid: std::process::id(),
        daemon_version: env!("CARGO_PKG_VERSION").to_string(),
        ..HelloReply::default()
    };
    if frames.get_mut().write_all(&reply.to_line()).await.is_err() {
        return None;
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
    match io {
        Ok(io) => Some(io),
        Err(e) => {
            tracing::warn!(error = %e, "session closed: cannot take over the client's stdio");
            None
        }
    }
}

impl Handler {
    pub(crate) async fn serve(mut self, stream: UnixStream, hello_permit: OwnedSemaphorePermit) {
        let mut frames = FrameReader::new(BufReader::with_capacity(64 * 1024, stream), HELLO_LIMIT);
        let Some(hello) = read_hello(&mut frames).await else {
            return;
        };
        drop(hello_permit);
        let pool = match hello.kind {
            HelloKind::Admin { .. } => &self.limits.admin,
            HelloKind::Session { .. } => &self.limits.sessions,
        };
        let Ok(_connection) = pool.clone().try_acquire_owned() else {
            tracing::warn!("connection refused: too many open connections of its kind");
            let reply = HelloReply::refuse(
                "mcp-broker has too many open connections",
                vec!["close clients you no longer use, or raise broker.max_clients".into()],
            );
            return refuse(&mut frames, reply).await;
        };
        match hello.kind {
            HelloKind::Admin {
                command,
                profile,
                upstream,
            } => {
                let about = crate::admin::About {
                    profile: profile.as_deref(),
                    upstream: upstream.as_deref(),
                };
                let reply =
                    crate::admin::handle(&self.broker, &command, about, &self.stop, &self.shutdown)
                        .await;
                let conn = frames.get_mut();
                let _ = conn.write_all(&reply.to_line()).await;
                let _ = conn.shutdown().await;
            }
            HelloKind::Session {
                profile,
                client,
                pass_fds,
                facade,
                cwd,
            } => {
                let chosen = choose_profile(&self.broker, profile.as_deref(), client.as_deref());
                let (profile, explicit) = match chosen {
                    Ok(p) => p,
                    Err(reply) => {
                        tracing::warn!(error = ?reply.error, "session refused");
                        return refuse(&mut frames, *reply).await;
                    }
                };
                let Some(_slot) = self.client_slot(&mut frames).await else {
                    return;
                };
                let Some(io) = accept_session(frames, &profile.name, pass_fds).await else {
                    return;
                };
                let broker = self.broker.clone();
                broker.sessions.fetch_add(1, Ordering::SeqCst);
                tracing::info!(profile = %profile.name, client = client.as_deref().unwrap_or("-"), pid = hello.pid, pass_fds, "session opened");
                let mut session = Session::new(broker.clone(), profile, explicit, facade)
                    .with_client(client.as_deref())
                    .with_cwd(cwd.as_deref());
                session.run(io, &mut self.shutdown).await;
                broker.sessions.fetch_sub(1, Ordering::SeqCst);
                tracing::info!(profile = %session.profile_name(), "session closed");
            }
        }
    }

    /// A slot among `max_clients` before the session is accepted; over the limit the client
    /// waits a bounded time, then hears why it was refused. `None` when refused or shutting down.
    async fn client_slot(&mut self, frames: &mut Frames) -> Option<OwnedSemaphorePermit> {
        self.broker.waiting_sessions.fetch_add(1, Ordering::SeqCst);
        let slot = tokio::select! {
            s = tokio::time::timeout(SLOT_WAIT, self.broker.session_slots.clone().acquire_owned()) => s,
            _ = until_set(&mut self.shutdown) => {
                self.broker.waiting_sessions.fetch_sub(1, Ordering::SeqCst);
                return None;
            }
        };
        self.broker.waiting_sessions.fetch_sub(1, Ordering::SeqCst);
        match slot {
            Ok(Ok(s)) => Some(s),
            Ok(Err(_)) => None,
            Err(_) => {
                refuse(frames, self.no_slot()).await;
                None
            }
        }
    }

    fn no_slot(&self) -> HelloReply {
        let max = self.broker.config().settings.broker.max_clients;
        tracing::warn!(
            max_clients = max,
            "session refused: every client slot is taken"
        );
        HelloReply::refuse(
            format!(
                "mcp-broker already serves broker.max_clients ({max}) sessions and none ended within {} s",
                SLOT_WAIT.as_secs()
            ),
            vec![
                "close a client you no longer use, or raise broker.max_clients and run `mcp-broker reload`".into(),
                "`mcp-broker status` shows the open sessions".into(),
            ],
        )
    }
}

async fn take_over_stdio(stream: UnixStream) -> std::io::Result<SessionIo> {
    let (input, output) = tokio::time::timeout(HELLO_TIMEOUT, handover::receive(&stream))
        .await
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "no descriptors from the shim")
        })??;
    Ok(SessionIo {
        reader: handover::reader(input)?,
        writer: handover::writer(output)?,
        control: Some(stream),
    })
}

/// `--profile`, else the client's entry in `clients`, else `default`. The flag says whether the
/// choice was explicit (`clientInfo.name` may only refine a default choice).
fn choose_profile(
    broker: &Broker,
    profile: Option<&str>,
    client: Option<&str>,
) -> Result<(Arc<ProfileSettings>, bool), Box<HelloReply>> {
    let config = broker.config();
    let profiles = &config.settings.profiles;
    let known = || {
        let names = config.profile_names();
        format!(
            "profiles in {}: {}",
            config.settings.source,
            if names.is_empty() { "(none)" } else { &names }
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
