//! A session as upstreams see it: where their progress and their requests to the client go, and
//! the registry of sessions that `tools/list_changed` is announced to.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mcpb_protocol::era::SUBSCRIPTION_ID_KEY;
use mcpb_protocol::message::{id_key, notification_line, request_line_with_id};
use mcpb_protocol::{Era, RpcCode};
use mcpb_upstream::{ClientLink, Responder};
use parking_lot::Mutex;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::outbox::ClientQueue;

pub(crate) struct SessionLink {
    id: u64,
    out: Arc<ClientQueue>,
    /// Upstreams the session's profile sees.
    upstreams: Mutex<Vec<String>>,
    /// The client's declared capabilities, from `initialize`.
    capabilities: Mutex<Value>,
    waiting: Mutex<HashMap<String, Responder>>,
    next: AtomicU64,
    /// The client's era, learnt from its first request: a stateless client takes no requests
    /// from the server over the stream, and hears of list changes only on its subscription.
    era: Mutex<Era>,
    /// A 2026-07-28 client's open `subscriptions/listen` request, if it asked for tool list
    /// changes: their notifications carry its id.
    listen: Mutex<Option<Box<RawValue>>>,
    /// The least severe log level the client asked for (`logging/setLevel`); none: whatever
    /// the upstreams send.
    log_level: Mutex<Option<u8>>,
}

impl SessionLink {
    pub(crate) fn new(id: u64, out: Arc<ClientQueue>, upstreams: Vec<String>) -> Self {
        Self {
            id,
            out,
            upstreams: Mutex::new(upstreams),
            capabilities: Mutex::new(Value::Null),
            waiting: Mutex::default(),
            next: AtomicU64::new(1),
            era: Mutex::default(),
            listen: Mutex::new(None),
            log_level: Mutex::new(None),
        }
    }

    pub(crate) fn log_level(&self) -> Option<u8> {
        *self.log_level.lock()
    }

    pub(crate) fn set_log_level(&self, rank: u8) {
        *self.log_level.lock() = Some(rank);
    }

    /// The tool list may have changed: a handshake-era client is told at once; a 2026-07-28
    /// client only on its `subscriptions/listen` stream, if it opened one for tools.
    pub(crate) fn tools_changed(&self) {
        if !self.era().is_stateless() {
            self.notify(notification_line("notifications/tools/list_changed", None));
            return;
        }
        let listen = self.listen.lock().clone();
        if let Some(id) = listen {
            let params = format!("{{\"_meta\":{{\"{SUBSCRIPTION_ID_KEY}\":{}}}}}", id.get());
            if let Ok(params) = RawValue::from_string(params) {
                self.notify(notification_line(
                    "notifications/tools/list_changed",
                    Some(&params),
                ));
            }
        }
    }

    /// Opens the session's subscription stream; returns the acknowledgement to send. Only tool
    /// list changes are offered: the broker exposes tools, not prompts or resources.
    pub(crate) fn listen(&self, id: &RawValue, wants_tools: bool) -> Vec<u8> {
        *self.listen.lock() = wants_tools.then(|| id.to_owned());
        let honored = if wants_tools {
            "{\"toolsListChanged\":true}"
        } else {
            "{}"
        };
        let params = format!(
            "{{\"notifications\":{honored},\"_meta\":{{\"{SUBSCRIPTION_ID_KEY}\":{}}}}}",
            id.get()
        );
        match RawValue::from_string(params) {
            Ok(p) => notification_line("notifications/subscriptions/acknowledged", Some(&p)),
            Err(_) => Vec::new(),
        }
    }

    /// The end of an open subscription stream (shutdown), as its final result.
    pub(crate) fn end_listen(&self) -> Option<Vec<u8>> {
        let id = self.listen.lock().take()?;
        let result = format!(
            "{{\"resultType\":\"complete\",\"_meta\":{{\"{SUBSCRIPTION_ID_KEY}\":{}}}}}",
            id.get()
        );
        let result = RawValue::from_string(result).ok()?;
        Some(mcpb_protocol::message::response_line(&id, &result))
    }

    pub(crate) fn era(&self) -> Era {
        *self.era.lock()
    }

    pub(crate) fn set_era(&self, era: Era) {
        *self.era.lock() = era;
    }

    pub(crate) fn set_capabilities(&self, caps: Value) {
        *self.capabilities.lock() = caps;
    }

    pub(crate) fn set_upstreams(&self, upstreams: Vec<String>) {
        *self.upstreams.lock() = upstreams;
    }

    pub(crate) fn sees(&self, upstream: &str) -> bool {
        self.upstreams.lock().iter().any(|x| x == upstream)
    }

    /// The client's answer to a request an upstream sent it. Returns false for an id the broker
    /// did not send.
    pub(crate) fn complete(
        &self,
        id: &RawValue,
        result: Option<&RawValue>,
        error: Option<&RawValue>,
    ) -> bool {
        let key = id_key(id.get());
        let Some(responder) = self.waiting.lock().remove(&key) else {
            return false;
        };
        match (result, error) {
            (Some(r), _) => responder.result(r),
            (None, Some(e)) => responder.error(e),
            (None, None) => responder.refuse(
                RpcCode::InvalidRequest,
                "the client answered with neither result nor error",
            ),
        }
        true
    }

    /// Ends the session's side of pending server requests: dropping them tells each upstream.
    pub(crate) fn close(&self) {
        self.waiting.lock().clear();
    }
}

/// Capability a client must declare before it is sent this server-to-client request.
fn required_capability(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

impl ClientLink for SessionLink {
    fn session_id(&self) -> u64 {
        self.id
    }

    fn notify(&self, line: Vec<u8>) {
        // Progress is advisory: a client that does not read loses it rather than stalling the
        // upstream's reader for everyone.
        let _ = self.out.try_push(line);
    }

    fn forward_request(&self, method: &str, params: Option<&RawValue>, reply: Responder) {
        if self.era().is_stateless() {
            reply.refuse(
                RpcCode::MethodNotFound,
                &format!("the client speaks 2026-07-28, where '{method}' cannot be sent to it mid-call; mcp-broker does not translate it yet"),
            );
            return;
        }
        if let Some(cap) = required_capability(method) {
            let declared = self.capabilities.lock().get(cap).is_some();
            if !declared {
                reply.refuse(
                    RpcCode::MethodNotFound,
                    &format!("the client did not declare the '{cap}' capability"),
                );
                return;
            }
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = Value::String(format!("mcpb-s{n}")).to_string();
        self.waiting.lock().insert(id.clone(), reply);
        let line = request_line_with_id(&id, method, params);
        if !self.out.try_push(line) {
            // Dropping the responder answers the upstream with an error.
            self.waiting.lock().remove(&id);
        }
    }
}

/// Every open session, for announcements that concern all who see an upstream.
#[derive(Default)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<u64, Arc<SessionLink>>>,
    next: AtomicU64,
}

impl Registry {
    pub(crate) fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn add(&self, link: Arc<SessionLink>) {
        self.sessions.lock().insert(link.id, link);
    }

    pub(crate) fn remove(&self, id: u64) {
        self.sessions.lock().remove(&id);
    }

    pub(crate) fn is_open(&self, id: u64) -> bool {
        self.sessions.lock().contains_key(&id)
    }

    /// After a reload: every session's view may have changed.
    pub(crate) fn all_lists_changed(&self) {
        for link in self.sessions.lock().values() {
            link.tools_changed();
        }
    }

    pub(crate) fn list_changed(&self, upstream: &str) {
        for link in self.sessions.lock().values().filter(|l| l.sees(upstream)) {
            link.tools_changed();
        }
    }

    /// Runs `f` on every session whose profile sees `upstream`.
    pub(crate) fn each_seeing(&self, upstream: &str, mut f: impl FnMut(&SessionLink)) {
        for link in self.sessions.lock().values().filter(|l| l.sees(upstream)) {
            f(link);
        }
    }

    /// Queues a notification for one session, if it is still open.
    pub(crate) fn send(&self, session: u64, line: Vec<u8>) {
        if let Some(link) = self.sessions.lock().get(&session) {
            notify(link, line);
        }
    }
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;

/// A notification for the client; like progress, dropped rather than waited for when the
/// client does not read.
pub(crate) fn notify(link: &SessionLink, line: Vec<u8>) {
    ClientLink::notify(link, line);
}
