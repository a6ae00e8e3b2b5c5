//! Resolved settings: defaults filled in, placeholders expanded, names checked. The daemon only
//! ever sees these, never the raw YAML types.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::layout::RuntimeLayout;
use crate::raw::{Lifecycle, NameStyle, PinModeSetting, RawSmoke, Transport};
use crate::template::Template;

/// Which of an upstream's tools (by their own names) or resources (by URI, or a template by its
/// `uriTemplate`) it offers at all: globs, where `*` runs over `/` too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NameFilter {
    allow: Vec<glob::Pattern>,
    deny: Vec<glob::Pattern>,
    /// The configuration keys the two lists came from, for `config show`.
    keys: (&'static str, &'static str),
}

/// `tools_allow` / `tools_deny`.
pub type ToolFilter = NameFilter;

impl NameFilter {
    /// Compiles both lists; the first pattern that is not a glob is the error.
    pub fn new(allow: &[String], deny: &[String]) -> Result<Self, (String, glob::PatternError)> {
        Self::keyed(("tools_allow", "tools_deny"), allow, deny)
    }

    /// `resources_allow` / `resources_deny`.
    pub fn resources(
        allow: &[String],
        deny: &[String],
    ) -> Result<Self, (String, glob::PatternError)> {
        Self::keyed(("resources_allow", "resources_deny"), allow, deny)
    }

    fn keyed(
        keys: (&'static str, &'static str),
        allow: &[String],
        deny: &[String],
    ) -> Result<Self, (String, glob::PatternError)> {
        let compile =
            |list: &[String]| -> Result<Vec<glob::Pattern>, (String, glob::PatternError)> {
                list.iter()
                    .map(|p| glob::Pattern::new(p).map_err(|e| (p.clone(), e)))
                    .collect()
            };
        Ok(Self {
            allow: compile(allow)?,
            deny: compile(deny)?,
            keys,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// The allow and deny patterns, as written.
    pub fn patterns(&self) -> (Vec<&str>, Vec<&str>) {
        fn names(l: &[glob::Pattern]) -> Vec<&str> {
            l.iter().map(glob::Pattern::as_str).collect()
        }
        (names(&self.allow), names(&self.deny))
    }

    /// The pattern that matches exactly `name`, whatever glob characters it holds.
    pub fn exact(name: &str) -> String {
        glob::Pattern::escape(name)
    }

    /// Whether the upstream offers `name`.
    pub fn admits(&self, name: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|p| p.matches(name)))
            && !self.deny.iter().any(|p| p.matches(name))
    }
}

impl Serialize for NameFilter {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        fn names(l: &[glob::Pattern]) -> Vec<&str> {
            l.iter().map(glob::Pattern::as_str).collect()
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry(self.keys.0, &names(&self.allow))?;
        m.serialize_entry(self.keys.1, &names(&self.deny))?;
        m.end()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "path")]
pub enum ConfigSource {
    File(PathBuf),
    Embedded,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::File(p) => write!(f, "{}", p.display()),
            ConfigSource::Embedded => f.write_str("<embedded default>"),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub source: ConfigSource,
    pub runtime: RuntimeLayout,
    pub broker: BrokerSettings,
    pub upstreams: BTreeMap<String, UpstreamSettings>,
    pub profiles: BTreeMap<String, ProfileSettings>,
    /// Client name -> profile name.
    pub clients: BTreeMap<String, String>,
    pub pins: PinModeSetting,
    /// None: no HTTP front.
    pub http: Option<crate::http::HttpSettings>,
    pub console: crate::console::ConsoleSettings,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BrokerSettings {
    pub max_clients: usize,
    #[serde(serialize_with = "as_ms", rename = "call_timeout_ms")]
    pub call_timeout: Duration,
    #[serde(serialize_with = "as_ms", rename = "max_call_ms")]
    pub max_call: Duration,
    #[serde(serialize_with = "as_ms", rename = "startup_timeout_ms")]
    pub startup_timeout: Duration,
    #[serde(serialize_with = "as_ms", rename = "shutdown_grace_ms")]
    pub shutdown_grace: Duration,
    #[serde(serialize_with = "as_ms", rename = "first_list_wait_ms")]
    pub first_list_wait: Duration,
    #[serde(serialize_with = "as_ms", rename = "client_write_timeout_ms")]
    pub client_write_timeout: Duration,
    pub max_frame_bytes: usize,
    pub max_processes: usize,
    pub env_passthrough: Vec<String>,
    pub max_tool_list_bytes: usize,
    pub max_tools_per_list: usize,
    pub max_outbound_bytes: usize,
    pub forward_meta_keys: Vec<String>,
    pub log_max_bytes: u64,
    #[serde(serialize_with = "as_ms", rename = "artifact_ttl_ms")]
    pub artifact_ttl: Duration,
    pub artifact_max_bytes: u64,
    pub exec: crate::exec::BrokerExec,
    pub audit: AuditSettings,
    pub search_model: crate::raw::SearchModel,
    pub upstream_sandbox: crate::sandbox::SandboxMode,
}

/// The audit log of tool calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditSettings {
    pub enabled: bool,
    pub arguments: bool,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            arguments: false,
        }
    }
}

/// How long a shared local server that starts on first use runs without calls before it is
/// stopped. Long enough that a model working through a task (turns seconds to minutes apart)
/// never waits on a restart; short enough that servers used once in a morning give their
/// memory back by lunch. A restart costs one cold start (1-3 s for a package runner).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

impl Default for BrokerSettings {
    fn default() -> Self {
        Self {
            max_clients: 256,
            call_timeout: Duration::from_millis(60_000),
            max_call: Duration::from_millis(600_000),
            startup_timeout: Duration::from_millis(30_000),
            shutdown_grace: Duration::from_millis(5_000),
            first_list_wait: Duration::from_millis(3_000),
            client_write_timeout: Duration::from_millis(10_000),
            max_frame_bytes: 16 * 1024 * 1024,
            max_processes: 128,
            env_passthrough: Vec::new(),
            max_tool_list_bytes: 4 * 1024 * 1024,
            max_tools_per_list: 5000,
            max_outbound_bytes: 32 * 1024 * 1024,
            forward_meta_keys: Vec::new(),
            log_max_bytes: 10 * 1024 * 1024,
            artifact_ttl: Duration::from_millis(3_600_000),
            artifact_max_bytes: 256 * 1024 * 1024,
            exec: crate::exec::BrokerExec::default(),
            audit: AuditSettings::default(),
            search_model: crate::raw::SearchModel::Static,
            upstream_sandbox: crate::sandbox::SandboxMode::Off,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpstreamSettings {
    pub name: String,
    pub transport: Transport,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// Shown only to sessions started in this folder or below.
    pub project: Option<PathBuf>,
    /// Values keep their `${...}` references; they are resolved only when the process starts.
    pub env: BTreeMap<String, Template>,
    pub url: Option<String>,
    pub headers: BTreeMap<String, Template>,
    pub lifecycle: Lifecycle,
    pub start: crate::raw::StartMode,
    #[serde(serialize_with = "as_opt_ms", rename = "idle_timeout_ms")]
    pub idle_timeout: Option<Duration>,
    pub max_instances: usize,
    pub max_concurrency: Option<usize>,
    #[serde(serialize_with = "as_ms", rename = "queue_timeout_ms")]
    pub queue_timeout: Duration,
    #[serde(serialize_with = "as_ms", rename = "startup_timeout_ms")]
    pub startup_timeout: Duration,
    #[serde(serialize_with = "as_ms", rename = "call_timeout_ms")]
    pub call_timeout: Duration,
    #[serde(serialize_with = "as_ms", rename = "max_call_ms")]
    pub max_call: Duration,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub trust_annotations: bool,
    /// `redact_results`: secrets are taken out of ordinary tool results too.
    pub redact_results: bool,
    pub read_only_tools: Vec<String>,
    /// `tools_allow` / `tools_deny`, compiled.
    #[serde(flatten, skip_serializing_if = "NameFilter::is_empty")]
    pub tool_filter: ToolFilter,
    /// `resources_allow` / `resources_deny`, compiled: URIs (and templates) the upstream's
    /// resources may have; reads, subscriptions and completions of any other are unknown.
    #[serde(flatten, skip_serializing_if = "NameFilter::is_empty")]
    pub resource_filter: NameFilter,
    /// The safe probe `mcp-broker profile validate` runs (search, describe, and a call when
    /// `call: true`) through a profile's view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smoke: Option<SmokeSettings>,
    /// The sandbox this stdio server runs in; `None`: none.
    pub sandbox: Option<crate::sandbox::SandboxPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthSettings>,
}

/// `upstreams.<name>.oauth`, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OAuthSettings {
    pub client_id: Option<String>,
    /// Kept as a reference; resolved only when it is used.
    pub client_secret: Option<Template>,
    pub client_metadata_url: Option<String>,
    pub scopes: Vec<String>,
    pub grant: crate::raw::OAuthGrant,
}

impl UpstreamSettings {
    pub fn enabled(&self) -> bool {
        self.lifecycle != Lifecycle::Disabled
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SmokeSettings {
    pub query: Option<String>,
    pub tool: Option<String>,
    pub arguments: Option<serde_json::Value>,
    pub call: bool,
    pub allow_mutating: bool,
}

impl From<RawSmoke> for SmokeSettings {
    fn from(r: RawSmoke) -> Self {
        Self {
            query: r.query,
            tool: r.tool,
            arguments: r.arguments,
            call: r.call,
            allow_mutating: r.allow_mutating,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileSettings {
    pub name: String,
    pub description: Option<String>,
    /// Visible upstreams, in the order the file lists them.
    pub upstreams: Vec<String>,
    pub compact_tools_enabled: bool,
    pub max_tools: Option<u32>,
    pub tool_budget_tokens: Option<u32>,
    pub allow_mutating_upstreams: bool,
    pub mutating_allowlist: Vec<String>,
    pub pinned_tools: Vec<String>,
    pub broker_tool_name_style: NameStyle,
    pub facade_vocabulary: crate::raw::Vocabulary,
    pub result_budget_chars: Option<u64>,
    pub result_size_chars: Option<u64>,
    pub mcp_allowed_servers: Option<Vec<String>>,
    /// false: names as the profile's one upstream writes them (transparent mode).
    pub namespace: bool,
    /// None: code execution is off for this profile.
    pub exec: Option<crate::exec::ProfileExec>,
}

impl Settings {
    /// Where code runs' workspaces live: `broker.exec.workspace_root`, else `state/exec`.
    pub fn exec_root(&self) -> PathBuf {
        self.broker
            .exec
            .workspace_root
            .clone()
            .unwrap_or_else(|| self.runtime.exec_dir())
    }
}

impl NameStyle {
    pub fn separator(self) -> &'static str {
        match self {
            NameStyle::Dotted => ".",
            NameStyle::DoubleUnderscore => "__",
            NameStyle::Underscore => "_",
        }
    }
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn as_opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => as_ms(d, s),
        None => s.serialize_none(),
    }
}

impl Settings {
    /// The environment variables the daemon needs from whoever starts it: those the config
    /// references (`${NAME}` in upstream env and headers) and `broker.env_passthrough`. The
    /// daemon gets these plus a base allowlist, never the starting client's whole environment.
    pub fn daemon_env_names(&self) -> Vec<String> {
        let mut names: std::collections::BTreeSet<String> =
            self.broker.env_passthrough.iter().cloned().collect();
        let tokens = self
            .http
            .iter()
            .flat_map(|h| h.tokens.iter().map(|t| &t.token));
        for template in tokens {
            for part in template.parts() {
                if let crate::template::Part::Env(name) = part {
                    names.insert(name.clone());
                }
            }
        }
        for up in self.upstreams.values() {
            let secret = up.oauth.as_ref().and_then(|o| o.client_secret.as_ref());
            for template in up.env.values().chain(up.headers.values()).chain(secret) {
                for part in template.parts() {
                    if let crate::template::Part::Env(name) = part {
                        names.insert(name.clone());
                    }
                }
            }
        }
        names.into_iter().collect()
    }
}
