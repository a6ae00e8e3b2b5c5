//! The `http` part of the contract: the daemon's streamable HTTP front. It listens on loopback
//! unless told otherwise; every request carries a bearer token, each token names one profile,
//! and tokens are secret references (`${ENV}` or `${file:NAME}`), never literals.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::located::Located;
use crate::template::Template;

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// Address and port to listen on. Default 127.0.0.1:8766; anything but loopback makes the
    /// broker reachable from the network (put TLS in front).
    #[serde(default)]
    pub listen: Option<String>,
    /// Path of the MCP endpoint. Default /mcp.
    #[serde(default)]
    pub path: Option<String>,
    /// Bearer tokens, each for one profile.
    #[serde(default)]
    pub tokens: Vec<RawHttpToken>,
    /// Origins browsers may call from (e.g. http://localhost:5173). Default none: a request
    /// with an Origin header is refused unless listed.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Also accept any Origin on this machine's loopback (http(s)://localhost, 127.0.0.1 or
    /// [::1], any port): local tools' web pages. Default false: list them in allowed_origins.
    #[serde(default)]
    pub allow_loopback_origins: Option<bool>,
    /// Host header values accepted besides localhost, 127.0.0.1 and [::1] at the port (for a
    /// reverse proxy's name). A request with another Host is refused (DNS rebinding).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// A session without requests for this long is closed. Default 1800000 (30 min).
    #[serde(default)]
    pub session_idle_ms: Option<crate::duration::Millis>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHttpToken {
    /// The token, as a reference: ${ENV_NAME} or ${file:NAME} (a file in the secrets dir).
    pub token: Located<String>,
    /// The profile requests with this token get.
    pub profile: Located<String>,
    /// Sessions open at once with this token. Default 64.
    #[serde(default)]
    pub max_sessions: Option<u32>,
    /// Requests in flight at once with this token. Default 64.
    #[serde(default)]
    pub max_in_flight: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpSettings {
    pub listen: String,
    pub path: String,
    pub tokens: Vec<HttpToken>,
    pub allowed_origins: Vec<String>,
    pub allow_loopback_origins: bool,
    pub allowed_hosts: Vec<String>,
    pub session_idle_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpToken {
    /// The reference, resolved by the daemon when it starts.
    pub token: Template,
    pub profile: String,
    pub max_sessions: u32,
    pub max_in_flight: u32,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8766";
