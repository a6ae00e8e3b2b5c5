//! The `console` part of the contract: the daemon's web console. It starts when
//! `mcp-broker console` asks for it (nothing listens before), on loopback only, and each start
//! has its own secret.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::located::Located;

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawConsole {
    /// Whether `mcp-broker console` may start the console. Default true; false keeps it off.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Loopback address and port to listen on. Default 127.0.0.1:0 (a free port, chosen at
    /// start). Only 127.0.0.1 or [::1]: the console serves this machine.
    #[serde(default)]
    pub listen: Option<Located<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsoleSettings {
    pub enabled: bool,
    pub listen: String,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:0";

impl Default for ConsoleSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: DEFAULT_LISTEN.into(),
        }
    }
}

/// Whether `listen` is 127.0.0.1 or [::1] with a port (the rest of 127/8 is loopback too,
/// but browsers and the console's Host check know these two).
pub fn is_loopback(listen: &str) -> bool {
    listen.parse::<std::net::SocketAddr>().is_ok_and(|a| {
        a.ip() == std::net::Ipv4Addr::LOCALHOST || a.ip() == std::net::Ipv6Addr::LOCALHOST
    })
}
