//! The broker's own first line on a daemon connection.
//!
//! The shim sends one `Hello` line, the daemon answers one `HelloReply` line, and from then on the
//! connection carries plain MCP frames (sessions) or one admin answer (admin commands).

use serde::{Deserialize, Serialize};

/// Bumped when the hello exchange or the session framing changes incompatibly.
/// The client name of the broker's own checks (the import's parity calls): their calls are
/// not a client's, so a budgeted profile does not learn its favourites from them.
pub const CHECK_CLIENT: &str = "mcp-broker-check";

pub const BROKER_PROTOCOL_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hello {
    /// Broker protocol version the sender speaks.
    pub mcp_broker: u32,
    #[serde(flatten)]
    pub kind: HelloKind,
    /// Version of the binary that sent the hello, for diagnostics.
    #[serde(default)]
    pub sender_version: String,
    #[serde(default)]
    pub pid: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HelloKind {
    /// A client session relayed by the shim.
    Session {
        #[serde(default)]
        profile: Option<String>,
        #[serde(default)]
        client: Option<String>,
        #[serde(default)]
        cwd: Option<String>,
        /// The shim will hand its stdin and stdout to the daemon (SCM_RIGHTS) after the reply,
        /// so the daemon talks to the client directly and the shim only waits for the end.
        #[serde(default)]
        pass_fds: bool,
        /// Answer the broker_* facade tools even when the profile shows raw tools.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        facade: bool,
    },
    /// A one-shot command from the CLI (see [`AdminCommand`]). Carried as text, so a command
    /// this daemon does not know gets a clear refusal rather than a bad-hello error.
    Admin {
        command: String,
        /// The profile a command is about (`measure`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
        /// The upstream a command is about (`upstream-start`, `-stop`, `-restart`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        upstream: Option<String>,
    },
}

/// The admin commands a daemon answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminCommand {
    Ping,
    Status,
    Reload,
    Stop,
    /// Tool counts and definitions of a profile, raw and exposed; starts upstreams whose lists
    /// are unknown.
    Measure,
    /// The pin store changed on disk (`mcp-broker pins approve`).
    PinsReload,
    /// Start the web console if it is not running; answers its address.
    Console,
    /// Start, stop or restart one upstream's processes (`mcp-broker upstream ...`).
    UpstreamStart,
    UpstreamStop,
    UpstreamRestart,
}

impl AdminCommand {
    pub const ALL: [AdminCommand; 10] = [
        AdminCommand::Ping,
        AdminCommand::Status,
        AdminCommand::Reload,
        AdminCommand::Stop,
        AdminCommand::Measure,
        AdminCommand::PinsReload,
        AdminCommand::Console,
        AdminCommand::UpstreamStart,
        AdminCommand::UpstreamStop,
        AdminCommand::UpstreamRestart,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AdminCommand::Ping => "ping",
            AdminCommand::Status => "status",
            AdminCommand::Reload => "reload",
            AdminCommand::Stop => "stop",
            AdminCommand::Measure => "measure",
            AdminCommand::PinsReload => "pins-reload",
            AdminCommand::Console => "console",
            AdminCommand::UpstreamStart => "upstream-start",
            AdminCommand::UpstreamStop => "upstream-stop",
            AdminCommand::UpstreamRestart => "upstream-restart",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// Every command's name, for a hint.
    pub fn names() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct HelloReply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default)]
    pub daemon_pid: u32,
    #[serde(default)]
    pub daemon_version: String,
    /// Sent as a last line on the control connection of a session whose stdio the daemon took
    /// over: the exit code the shim should end with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// Admin answers carry their payload here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl HelloReply {
    pub fn refuse(error: impl Into<String>, hints: Vec<String>) -> Self {
        Self {
            ok: false,
            error: Some(error.into()),
            hints,
            ..Self::default()
        }
    }

    pub fn to_line(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
        out.push(b'\n');
        out
    }
}

impl Hello {
    pub fn to_line(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_commands_round_trip_by_name() {
        for c in AdminCommand::ALL {
            assert_eq!(AdminCommand::parse(c.as_str()), Some(c));
        }
        assert_eq!(AdminCommand::parse("pins_reload"), None);
        assert!(AdminCommand::names().contains("pins-reload"));
    }

    #[test]
    fn session_hello_round_trips_as_one_flat_object() {
        let hello = Hello {
            mcp_broker: BROKER_PROTOCOL_VERSION,
            kind: HelloKind::Session {
                profile: Some("codex".into()),
                client: None,
                cwd: Some("/tmp".into()),
                pass_fds: true,
                facade: false,
            },
            sender_version: "0.1.0".into(),
            pid: 42,
        };
        let line = hello.to_line();
        let text = std::str::from_utf8(&line).unwrap();
        assert!(text.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["kind"], "session");
        assert_eq!(v["profile"], "codex");
        let back: Hello = serde_json::from_str(text).unwrap();
        assert_eq!(back, hello);
    }
}
