//! How a session learns who its client is, for both eras of the protocol: the `initialize`
//! handshake (2024-11-05 to 2025-11-25), and `server/discover` with per-request `_meta`
//! (2026-07-28, stateless: no initialize, each request names its revision, client and
//! capabilities).

use mcpb_protocol::era::{
    CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY, SERVER_INFO_KEY,
};
use mcpb_protocol::message::error_line;
use mcpb_protocol::{Era, RpcCode, revision};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::Session;
use crate::error::json_line;

impl Session {
    pub(super) fn initialize(&mut self, id: &RawValue, params: Option<&RawValue>) -> Vec<u8> {
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        self.initialized = true;
        self.learn_client(params.get("clientInfo"), params.get("capabilities"));
        let result = json!({
            "protocolVersion": revision::negotiate(requested),
            "capabilities": self.capabilities(),
            "serverInfo": server_info(),
            "instructions": self.instructions(),
        });
        let mut out = json_line(id, &result);
        // A log message may come before `initialized`: the client hears it with the answer.
        if let Some(w) = self.broker.config_warning.lock().as_deref() {
            out.extend(super::log_notice("warning", w.to_string()));
        }
        out
    }

    /// `server/discover`: the revisions the broker speaks, at the revision the client asked for,
    /// or -32022 with the supported list when it asked for one the broker does not speak.
    pub(super) fn discover(&mut self, id: &RawValue, params: Option<&RawValue>) -> Vec<u8> {
        let meta = request_meta(params);
        let requested = meta.get(PROTOCOL_VERSION_KEY).and_then(Value::as_str);
        if let Some(v) = requested
            && !revision::is_modern(v)
        {
            let error = json!({
                "code": revision::UNSUPPORTED_PROTOCOL_VERSION,
                "message": format!("protocol revision {v} is not supported by server/discover"),
                "data": {"supported": revision::all(), "requested": v},
            });
            let error = RawValue::from_string(error.to_string()).ok();
            return match error {
                Some(e) => mcpb_protocol::message::raw_error_line(id, &e),
                None => error_line(Some(id), RpcCode::InternalError, "cannot build the error"),
            };
        }
        self.set_stateless();
        self.learn_client(meta.get(CLIENT_INFO_KEY), meta.get(CLIENT_CAPABILITIES_KEY));
        let result = json!({
            "supportedVersions": revision::all(),
            "capabilities": self.capabilities(),
            "instructions": self.instructions(),
            "_meta": {SERVER_INFO_KEY: server_info()},
        });
        let mut result = result;
        Era::Stateless.complete_listing(&mut result);
        json_line(id, &result)
    }

    /// A 2026-07-28 request carries the client's identity and capabilities itself.
    pub(super) fn adopt_request_meta(&mut self, params: Option<&RawValue>) {
        let stateless = self.link.as_ref().is_some_and(|l| l.era().is_stateless());
        if stateless && self.client_seen {
            return;
        }
        let meta = request_meta(params);
        let Some(version) = meta.get(PROTOCOL_VERSION_KEY).and_then(Value::as_str) else {
            return;
        };
        if Era::of_revision(version).is_stateless() {
            self.set_stateless();
            self.learn_client(meta.get(CLIENT_INFO_KEY), meta.get(CLIENT_CAPABILITIES_KEY));
        }
    }

    fn set_stateless(&self) {
        if let Some(link) = &self.link {
            link.set_era(Era::Stateless);
        }
    }

    /// Capabilities for routing upstream requests, and `clientInfo.name` to pick a profile when
    /// neither `--profile` nor `--client` chose one.
    fn learn_client(&mut self, info: Option<&Value>, capabilities: Option<&Value>) {
        if let (Some(link), Some(caps)) = (&self.link, capabilities) {
            link.set_capabilities(caps.clone());
        }
        let client = info.and_then(|c| c.get("name")).and_then(Value::as_str);
        if self.client.is_none() {
            self.client = client.map(std::sync::Arc::from);
        }
        if self.explicit || self.client_seen {
            return;
        }
        let Some(client) = client else { return };
        self.client_seen = true;
        let profile = self.broker.config().settings.clients.get(client).cloned();
        if let Some(p) = profile.and_then(|p| self.broker.profile(&p)) {
            tracing::info!(profile = %p.name, client, "profile chosen by clientInfo.name");
            self.set_profile(p);
        }
    }

    fn instructions(&self) -> String {
        format!(
            "Tools of several MCP servers, named <server>{}<tool>.",
            self.profile.broker_tool_name_style.separator()
        )
    }
}

fn server_info() -> Value {
    json!({"name": "mcp-broker", "version": env!("CARGO_PKG_VERSION")})
}

fn request_meta(params: Option<&RawValue>) -> Value {
    params
        .and_then(|p| mcpb_protocol::rewrite::member(p, "_meta"))
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or(Value::Null)
}

impl Session {
    /// What the broker serves: tools, and whatever else the profile's upstreams offer (the
    /// union of their own capabilities). An upstream never started yet may offer anything, so
    /// it counts as offering everything; what it turns out not to have lists as nothing.
    fn capabilities(&self) -> Value {
        let ups = self.broker.view(self.profile.clone(), 0).servers();
        let known: Vec<Option<Value>> = ups.iter().map(|u| u.capabilities()).collect();
        let offers = |key: &str, flag: Option<&str>| {
            known.iter().any(|c| match c {
                None => true,
                Some(c) => c.get(key).is_some_and(|v| {
                    flag.is_none_or(|f| v.get(f).and_then(Value::as_bool) == Some(true))
                }),
            })
        };
        let mut caps = json!({"tools": {"listChanged": true}});
        if offers("resources", None) {
            caps["resources"] = json!({
                "subscribe": offers("resources", Some("subscribe")),
                "listChanged": true,
            });
        }
        if offers("prompts", None) {
            caps["prompts"] = json!({"listChanged": true});
        }
        if offers("completions", None) {
            caps["completions"] = json!({});
        }
        // `logging/setLevel` is the broker's own (a threshold per session): always there.
        caps["logging"] = json!({});
        caps
    }
}
