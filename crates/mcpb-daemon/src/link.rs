//! A session as upstreams see it: where their progress and their requests to the client go, and
//! the registry of sessions that `tools/list_changed` is announced to.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mcpb_protocol::RpcCode;
use mcpb_protocol::message::{notification_line, request_line_with_id};
use mcpb_upstream::{ClientLink, Responder};
use serde_json::Value;
use serde_json::value::RawValue;

pub struct SessionLink {
    id: u64,
    out: Arc<crate::session::ClientQueue>,
    /// Upstreams the session's profile sees.
    upstreams: Mutex<Vec<String>>,
    /// The client's declared capabilities, from `initialize`.
    capabilities: Mutex<Value>,
    waiting: Mutex<HashMap<String, Responder>>,
    next: AtomicU64,
    /// A 2026-07-28 client takes no requests from the server over the stream.
    modern: std::sync::atomic::AtomicBool,
    /// A 2026-07-28 client's open `subscriptions/listen` request, if it asked for tool list
    /// changes: their notifications carry its id.
    listen: Mutex<Option<Box<RawValue>>>,
}

const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

impl SessionLink {
    pub fn new(id: u64, out: Arc<crate::session::ClientQueue>, upstreams: Vec<String>) -> Self {
        Self {
            id,
            out,
            upstreams: Mutex::new(upstreams),
            capabilities: Mutex::new(Value::Null),
            waiting: Mutex::default(),
            next: AtomicU64::new(1),
            modern: std::sync::atomic::AtomicBool::new(false),
            listen: Mutex::new(None),
        }
    }

    /// The tool list may have changed: a handshake-era client is told at once; a 2026-07-28
    /// client only on its `subscriptions/listen` stream, if it opened one for tools.
    pub fn tools_changed(&self) {
        if !self.modern.load(Ordering::SeqCst) {
            self.notify(notification_line("notifications/tools/list_changed", None));
            return;
        }
        let listen = self.listen.lock().ok().and_then(|l| l.clone());
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
    pub fn listen(&self, id: &RawValue, wants_tools: bool) -> Vec<u8> {
        if let Ok(mut l) = self.listen.lock() {
            *l = wants_tools.then(|| id.to_owned());
        }
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
    pub fn end_listen(&self) -> Option<Vec<u8>> {
        let id = self.listen.lock().ok().and_then(|mut l| l.take())?;
        let result = format!(
            "{{\"resultType\":\"complete\",\"_meta\":{{\"{SUBSCRIPTION_ID_KEY}\":{}}}}}",
            id.get()
        );
        let result = RawValue::from_string(result).ok()?;
        Some(mcpb_protocol::message::response_line(&id, &result))
    }

    pub fn set_modern(&self) {
        self.modern.store(true, Ordering::SeqCst);
    }

    pub fn set_capabilities(&self, caps: Value) {
        if let Ok(mut c) = self.capabilities.lock() {
            *c = caps;
        }
    }

    pub fn set_upstreams(&self, upstreams: Vec<String>) {
        if let Ok(mut u) = self.upstreams.lock() {
            *u = upstreams;
        }
    }

    pub fn sees(&self, upstream: &str) -> bool {
        self.upstreams
            .lock()
            .is_ok_and(|u| u.iter().any(|x| x == upstream))
    }

    /// The client's answer to a request an upstream sent it. Returns false for an id the broker
    /// did not send.
    pub fn complete(
        &self,
        id: &RawValue,
        result: Option<&RawValue>,
        error: Option<&RawValue>,
    ) -> bool {
        let key = crate::session::id_key(id.get());
        let Some(responder) = self.waiting.lock().ok().and_then(|mut w| w.remove(&key)) else {
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
    pub fn close(&self) {
        if let Ok(mut w) = self.waiting.lock() {
            w.clear();
        }
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
        if self.modern.load(Ordering::SeqCst) {
            reply.refuse(
                RpcCode::MethodNotFound,
                &format!("the client speaks 2026-07-28, where '{method}' cannot be sent to it mid-call; mcp-broker does not translate it yet"),
            );
            return;
        }
        if let Some(cap) = required_capability(method) {
            let declared = self.capabilities.lock().is_ok_and(|c| c.get(cap).is_some());
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
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(id.clone(), reply);
        }
        let line = request_line_with_id(&id, method, params);
        if !self.out.try_push(line) {
            // Dropping the responder answers the upstream with an error.
            if let Ok(mut w) = self.waiting.lock() {
                w.remove(&id);
            }
        }
    }
}

/// Every open session, for announcements that concern all who see an upstream.
#[derive(Default)]
pub struct Registry {
    sessions: Mutex<HashMap<u64, Arc<SessionLink>>>,
    next: AtomicU64,
}

impl Registry {
    pub fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn add(&self, link: Arc<SessionLink>) {
        if let Ok(mut s) = self.sessions.lock() {
            s.insert(link.id, link);
        }
    }

    pub fn remove(&self, id: u64) {
        if let Ok(mut s) = self.sessions.lock() {
            s.remove(&id);
        }
    }

    /// After a reload: every session's view may have changed.
    pub fn all_lists_changed(&self) {
        if let Ok(s) = self.sessions.lock() {
            for link in s.values() {
                link.tools_changed();
            }
        }
    }

    pub fn list_changed(&self, upstream: &str) {
        if let Ok(s) = self.sessions.lock() {
            for link in s.values().filter(|l| l.sees(upstream)) {
                link.tools_changed();
            }
        }
    }
}
