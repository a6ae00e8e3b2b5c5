//! The clients, where each keeps its servers, and the entry the broker puts there.

use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::Scope;

/// The name of the broker's entry in every client's server list.
pub(crate) const ENTRY_NAME: &str = "mcp-broker";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Codex,
    Gemini,
    Cursor,
    Vscode,
    /// Antigravity's `agy`, which keeps its servers apart from Gemini CLI's.
    Agy,
}

/// How a client's file holds its servers.
pub(crate) enum Format {
    /// A JSON (with comments) object of servers under `key`; `typed` entries say
    /// `"type": "stdio"`.
    Json { key: &'static str, typed: bool },
    /// Codex's TOML: `[mcp_servers.<name>]` tables.
    Toml,
}

/// What the client is to start: the broker's absolute path and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub command: String,
    pub args: Vec<String>,
    /// Set when the broker runs from a non-default home or config: a client started from a
    /// desktop has none of the shell's variables and would reach another daemon.
    pub env: Vec<(String, String)>,
    /// The servers a client with an allowlist (Gemini CLI's and AGY's `mcp.allowed`) may start:
    /// the profile's `mcp_allowed_servers`; the broker's entry is always among them.
    pub allowed_servers: Option<Vec<String>>,
}

impl Entry {
    /// `<exe> stdio --client <client> [--profile P]`.
    pub fn for_client(exe: &Path, client: Client, profile: Option<&str>) -> Self {
        let mut args = vec!["stdio".to_string(), "--client".into(), client.name().into()];
        if let Some(p) = profile {
            args.extend(["--profile".to_string(), p.to_string()]);
        }
        Self {
            command: exe.display().to_string(),
            args,
            env: Vec::new(),
            allowed_servers: None,
        }
    }
}

impl Client {
    pub const ALL: [Client; 7] = [
        Client::ClaudeDesktop,
        Client::ClaudeCode,
        Client::Codex,
        Client::Gemini,
        Client::Cursor,
        Client::Vscode,
        Client::Agy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Agy => "agy",
        }
    }

    pub fn parse(name: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|c| c.name() == name)
    }

    pub(crate) fn format(self) -> Format {
        match self {
            Client::Codex => Format::Toml,
            Client::Vscode => Format::Json {
                key: "servers",
                typed: true,
            },
            Client::ClaudeCode => Format::Json {
                key: "mcpServers",
                typed: true,
            },
            Client::ClaudeDesktop | Client::Gemini | Client::Cursor | Client::Agy => Format::Json {
                key: "mcpServers",
                typed: false,
            },
        }
    }

    /// Whether the client has a project-scoped file.
    pub fn has_project_scope(self) -> bool {
        !matches!(self, Client::ClaudeDesktop | Client::Agy)
    }

    /// The client's file for `scope`, under `home` (the user's) or `cwd` (the project's).
    pub fn config_path(self, scope: Scope, home: &Path, cwd: &Path) -> PathBuf {
        match (self, scope) {
            (Client::ClaudeDesktop, _) => {
                let mac =
                    home.join("Library/Application Support/Claude/claude_desktop_config.json");
                if cfg!(target_os = "macos") {
                    mac
                } else {
                    home.join(".config/Claude/claude_desktop_config.json")
                }
            }
            (Client::ClaudeCode, Scope::User | Scope::Local) => home.join(".claude.json"),
            (Client::ClaudeCode, Scope::Project) => nearest_in_repo(cwd, ".mcp.json", None),
            (Client::Codex, Scope::User | Scope::Local) => home.join(".codex/config.toml"),
            // Codex reads a trusted repository's file from any folder inside it; the user's own
            // file (a home kept in git) is never taken for the project's.
            (Client::Codex, Scope::Project) => nearest_in_repo(
                cwd,
                ".codex/config.toml",
                Some(&home.join(".codex/config.toml")),
            ),
            (Client::Gemini, Scope::User | Scope::Local) => home.join(".gemini/settings.json"),
            (Client::Gemini, Scope::Project) => cwd.join(".gemini/settings.json"),
            (Client::Cursor, Scope::User | Scope::Local) => home.join(".cursor/mcp.json"),
            (Client::Cursor, Scope::Project) => cwd.join(".cursor/mcp.json"),
            (Client::Vscode, Scope::User | Scope::Local) => home.join(".config/Code/User/mcp.json"),
            (Client::Vscode, Scope::Project) => cwd.join(".vscode/mcp.json"),
            (Client::Agy, _) => home.join(".gemini/config/mcp_config.json"),
        }
    }
}

/// A project's file `rel` as Claude Code and Codex find it: in the folder, else in the nearest
/// enclosing folder up to the git work tree's root (where a repository keeps it); `not` is
/// never the answer. With none found, the folder's own (where one would be written).
fn nearest_in_repo(cwd: &Path, rel: &str, not: Option<&Path>) -> PathBuf {
    let own = cwd.join(rel);
    let usable = |p: &Path| p.exists() && Some(p) != not;
    if usable(&own) {
        return own;
    }
    if let Some(root) = cwd.ancestors().find(|a| a.join(".git").exists()) {
        for dir in cwd.ancestors() {
            if usable(&dir.join(rel)) {
                return dir.join(rel);
            }
            if dir == root {
                break;
            }
        }
    }
    own
}

/// Whether a server entry runs the broker's shim (`…/mcp-broker stdio …`), whatever its key.
pub fn runs_broker(server: &Value) -> bool {
    let command = server.get("command").and_then(Value::as_str).unwrap_or("");
    let file = Path::new(command)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or("");
    let first = server
        .get("args")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str);
    file == "mcp-broker" && first == Some("stdio")
}

/// The key of the broker's entry in an object of servers: `mcp-broker`, or the first entry
/// that runs the broker under another name (a hand-written `"broker"`).
pub(crate) fn broker_key(servers: &serde_json::Map<String, Value>) -> Option<String> {
    if servers.contains_key(ENTRY_NAME) {
        return Some(ENTRY_NAME.to_string());
    }
    servers
        .iter()
        .find(|(_, v)| runs_broker(v))
        .map(|(k, _)| k.clone())
}
