//! What an upstream sends, whatever the transport: answers go to the request that waits for
//! them, progress to the session that made the call, requests to the client that owns them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use mcpb_protocol::message::notification_line;
use mcpb_protocol::{Incoming, IncomingKind};
use serde_json::value::RawValue;
use tokio::sync::{Notify, mpsc, oneshot, watch};

use crate::link::{ClientLink, Responder};

/// What the broker remembers about one request it sent upstream.
/// An upstream's answer, kept as raw JSON so it reaches the client exactly as sent.
#[derive(Debug)]
pub enum Reply {
    Result(Box<RawValue>),
    Error(Box<RawValue>),
}

pub(crate) struct PendingCall {
    pub tx: oneshot::Sender<Reply>,
    /// The session the request came from, for progress and server-to-client requests.
    pub link: Option<Arc<dyn ClientLink>>,
    /// The client's own progress token, given back on progress notifications.
    pub client_token: Option<Box<RawValue>>,
    /// Woken by progress, to restart the call's idle timeout.
    pub activity: Arc<Notify>,
    /// Progress forwarded to the client in the current one-second window.
    pub progress: ProgressWindow,
    /// Redact the whole result: every answer but an ordinary tool result (unless the upstream's
    /// `redact_results` says so too).
    pub redact_all: bool,
}

/// Progress notifications one call may forward per second; the rest still keep the call alive
/// but are not relayed, so a flooding upstream cannot flood the client.
pub(crate) const PROGRESS_PER_SEC: u32 = 20;

#[derive(Debug, Default)]
pub(crate) struct ProgressWindow {
    start: Option<std::time::Instant>,
    sent: u32,
}

impl ProgressWindow {
    /// Whether one more notification may be forwarded now.
    pub(crate) fn admit(&mut self, now: std::time::Instant) -> bool {
        if self
            .start
            .is_none_or(|s| now.duration_since(s) >= std::time::Duration::from_secs(1))
        {
            self.start = Some(now);
            self.sent = 0;
        }
        if self.sent >= PROGRESS_PER_SEC {
            return false;
        }
        self.sent += 1;
        true
    }
}

pub(crate) type Pending = Mutex<HashMap<u64, PendingCall>>;

/// Progress tokens the broker puts on forwarded calls: unique per instance, mapped back to the
/// client's own token.
pub(crate) const TOKEN_PREFIX: &str = "mcpb-";

/// Called (without blocking) when an upstream announces a changed tool list.
pub type ListChanged = Arc<dyn Fn(&str) + Send + Sync>;

/// Called (without blocking) with the upstream's name, the method and the params of a
/// notification meant for its clients: resources updated or changed, prompts changed, a log
/// message. The daemon decides which sessions get it.
pub type Notice = Arc<dyn Fn(&str, &str, Option<&RawValue>) + Send + Sync>;

/// The upstream notifications that travel on to clients.
const FOR_CLIENTS: &[&str] = &[
    "notifications/resources/updated",
    "notifications/resources/list_changed",
    "notifications/prompts/list_changed",
    "notifications/message",
];

pub(crate) struct ReadCtx {
    pub name: String,
    pub limit: usize,
    pub pending: Arc<Pending>,
    pub outbox: mpsc::Sender<Vec<u8>>,
    pub alive: Arc<AtomicBool>,
    pub exit: watch::Receiver<Option<String>>,
    pub tools_stale: Arc<AtomicBool>,
    pub stop: Arc<Notify>,
    pub on_list_changed: Option<ListChanged>,
    pub on_notice: Option<Notice>,
}

/// Handles one message; false when it was not JSON-RPC at all (the caller counts those).
pub(crate) async fn dispatch(ctx: &ReadCtx, frame: &[u8]) -> bool {
    let msg = match Incoming::parse(frame) {
        Ok(m) => m,
        Err(e) => {
            let shown = String::from_utf8_lossy(&frame[..frame.len().min(200)]);
            tracing::warn!(upstream = %ctx.name, error = %e, line = %shown, "upstream wrote a line that is not JSON-RPC; ignored");
            return false;
        }
    };
    match msg.kind() {
        IncomingKind::Response => route_response(ctx, &msg),
        IncomingKind::Request => answer_server_request(ctx, &msg).await,
        IncomingKind::Notification => match msg.method() {
            "notifications/tools/list_changed" => {
                ctx.tools_stale.store(true, Ordering::SeqCst);
                if let Some(cb) = &ctx.on_list_changed {
                    cb(&ctx.name);
                }
            }
            "notifications/progress" => route_progress(ctx, &msg),
            m if FOR_CLIENTS.contains(&m) => {
                if let Some(cb) = &ctx.on_notice {
                    cb(&ctx.name, m, msg.params);
                }
            }
            other => tracing::trace!(upstream = %ctx.name, method = other, "upstream notification"),
        },
        IncomingKind::Invalid => {
            tracing::warn!(upstream = %ctx.name, "upstream sent an invalid JSON-RPC message; ignored");
        }
    }
    true
}

/// Wakes every waiter at once with "exited" by dropping their senders.
pub(crate) fn fail_all(pending: &Pending) {
    pending.lock().clear();
}

/// Answers one of our own requests with an error of the broker's, as if the upstream had sent
/// it (a remote request that could not be delivered).
pub(crate) fn fail_request(ctx: &ReadCtx, id: u64, code: mcpb_protocol::RpcCode, message: &str) {
    let Some(waiter) = ctx.pending.lock().remove(&id) else {
        return;
    };
    let error = serde_json::json!({"code": code.code(), "message": message});
    if let Ok(raw) = mcpb_protocol::message::to_raw(&error) {
        let _ = waiter.tx.send(Reply::Error(raw));
    }
}

fn route_response(ctx: &ReadCtx, msg: &Incoming<'_>) {
    let Some(id) = msg.id.and_then(|id| id.get().parse::<u64>().ok()) else {
        tracing::warn!(upstream = %ctx.name, "response with an id the broker never sent; dropped");
        return;
    };
    let waiter = ctx.pending.lock().remove(&id);
    let Some(waiter) = waiter else {
        tracing::debug!(upstream = %ctx.name, id, "late or unknown response; dropped");
        return;
    };
    // An error result is the upstream's words, which may echo what it was given; every answer
    // but an ordinary tool result is redacted whole (see `PendingCall::redact_all`).
    let whole = |r: &RawValue| {
        waiter.redact_all || mcpb_protocol::scan::member_text(r.get(), "isError") == Some("true")
    };
    if let Some(r) = msg.result
        && mcpb_redact::any()
        && r.get().len() >= OFF_LOOP_BYTES
        && whole(r)
    {
        // A large answer is redacted on a blocking thread: the daemon's one event loop serves
        // every session and upstream, and must not wait for it.
        let raw = r.to_owned();
        let tx = waiter.tx;
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(Reply::Result(redacted(&raw)));
        });
        return;
    }
    let reply = match (msg.result, msg.error) {
        (Some(r), _) if mcpb_redact::any() && whole(r) => Reply::Result(redacted(r)),
        // A result's `_meta` is the upstream's words about the call, not the tool's data.
        (Some(r), _) if mcpb_redact::any() && r.get().contains("\"_meta\"") => {
            Reply::Result(with_meta_redacted(r))
        }
        (Some(r), _) => Reply::Result(r.to_owned()),
        // An upstream's error may echo what it was given (a token in its environment).
        (None, Some(e)) => Reply::Error(redacted(e)),
        (None, None) => return,
    };
    let _ = waiter.tx.send(reply);
}

/// Answers from this size on are redacted off the event loop (a 1 MiB answer takes about 20 ms).
const OFF_LOOP_BYTES: usize = 64 << 10;

/// `raw` with every secret the daemon resolved taken out of its strings (see mcpb-redact).
fn redacted(raw: &RawValue) -> Box<RawValue> {
    match mcpb_redact::redact_json(raw.get()) {
        std::borrow::Cow::Borrowed(_) => raw.to_owned(),
        std::borrow::Cow::Owned(t) => RawValue::from_string(t).unwrap_or_else(|_| raw.to_owned()),
    }
}

/// `result` with secrets taken out of its top-level `_meta` (the rest as written).
fn with_meta_redacted(result: &RawValue) -> Box<RawValue> {
    let Some(meta) = mcpb_protocol::rewrite::member(result, "_meta") else {
        return result.to_owned();
    };
    let clean = redacted(meta);
    if clean.get() == meta.get() {
        return result.to_owned();
    }
    mcpb_protocol::rewrite::with_members(result, &[("_meta", clean.get())])
        .unwrap_or_else(|_| result.to_owned())
}

/// Progress for a forwarded call goes to the session that made it, with the client's own token.
fn route_progress(ctx: &ReadCtx, msg: &Incoming<'_>) {
    let Some(params) = msg.params else { return };
    let params = &*redacted(params);
    let Some(id) = mcpb_protocol::rewrite::member(params, "progressToken")
        .and_then(|t| serde_json::from_str::<String>(t.get()).ok())
        .and_then(|t| {
            t.strip_prefix(TOKEN_PREFIX)
                .and_then(|n| n.parse::<u64>().ok())
        })
    else {
        tracing::debug!(upstream = %ctx.name, "progress with a token the broker never gave; dropped");
        return;
    };
    let now = std::time::Instant::now();
    let target = ctx.pending.lock().get_mut(&id).map(|c| {
        let forward = c.progress.admit(now);
        (
            c.link.clone(),
            c.client_token.clone(),
            c.activity.clone(),
            forward,
        )
    });
    let Some((link, client_token, activity, forward)) = target else {
        return;
    };
    activity.notify_one();
    if !forward {
        return;
    }
    let (Some(link), Some(client_token)) = (link, client_token) else {
        return;
    };
    match mcpb_protocol::rewrite::with_members(params, &[("progressToken", client_token.get())]) {
        Ok(p) => link.notify(notification_line("notifications/progress", Some(&p))),
        Err(e) => tracing::debug!(upstream = %ctx.name, error = %e, "unreadable progress; dropped"),
    }
}

/// Server-to-client requests. `ping` is answered here; the others (sampling, elicitation,
/// roots) go to the one session with calls in flight on this instance. With none, or several,
/// the broker cannot tell whose request it is and refuses it.
async fn answer_server_request(ctx: &ReadCtx, msg: &Incoming<'_>) {
    let Some(id) = msg.id else { return };
    if msg.method() == "ping" {
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\n",
            id.get()
        )
        .into_bytes();
        let _ = ctx.outbox.send(line).await;
        return;
    }
    let responder = Responder::new(ctx.outbox.clone(), id.to_owned());
    let owners: Vec<Arc<dyn ClientLink>> = ctx
        .pending
        .lock()
        .values()
        .filter_map(|c| c.link.clone())
        .filter({
            let mut seen = std::collections::BTreeSet::new();
            move |l| seen.insert(l.session_id())
        })
        .collect();
    // Sampling and elicitation reach the client's model and user: secrets out.
    let params = msg.params.map(redacted);
    match owners.as_slice() {
        [owner] => owner.forward_request(msg.method(), params.as_deref(), responder),
        [] => responder.refuse(
            mcpb_protocol::RpcCode::InvalidRequest,
            &format!(
                "mcp-broker has no client call in progress to send '{}' to",
                msg.method()
            ),
        ),
        _ => responder.refuse(
            mcpb_protocol::RpcCode::InvalidRequest,
            &format!(
                "mcp-broker cannot tell which of several clients '{}' is for",
                msg.method()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn progress_is_forwarded_at_most_so_many_times_a_second() {
        let mut w = ProgressWindow::default();
        let t0 = Instant::now();
        let sent = (0..100).filter(|_| w.admit(t0)).count();
        assert_eq!(sent, PROGRESS_PER_SEC as usize);
        assert!(w.admit(t0 + Duration::from_secs(1)));
    }
}
