//! The YAML contract exactly as users write it. Every struct rejects unknown keys; spelling here is
//! public API (scripts and users depend on it): add fields, never rename one.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::located::Located;

/// mcp-broker configuration file (broker.yaml).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Version of this file format. Only 1 exists.
    pub schema_version: Located<u32>,
    #[serde(default)]
    pub runtime: RawRuntime,
    #[serde(default)]
    pub broker: RawBroker,
    /// Which upstreams each client profile sees and how.
    #[serde(default)]
    pub profiles: BTreeMap<Located<String>, RawProfile>,
    /// Client names (as sent by the shim's `--client` or the client's own `clientInfo.name`)
    /// mapped to profiles.
    #[serde(default)]
    pub clients: BTreeMap<Located<String>, RawClient>,
    /// Upstream MCP servers, by name. The name prefixes every tool the upstream exposes.
    #[serde(default)]
    pub upstreams: BTreeMap<Located<String>, RawUpstream>,
    /// Approval of tool definitions (pins).
    #[serde(default)]
    pub pins: RawPins,
    /// The streamable HTTP front (off unless present).
    #[serde(default)]
    pub http: Option<crate::http::RawHttp>,
    /// The web console (`mcp-broker console`).
    #[serde(default)]
    pub console: crate::console::RawConsole,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PinModeSetting {
    /// Approve each upstream's first tool list as seen; quarantine later changes.
    #[default]
    Tofu,
    /// Quarantine every tool until `mcp-broker pins approve`.
    RequireApproval,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPins {
    /// `tofu` (default) or `require_approval`. A changed, renamed or new tool is quarantined
    /// (hidden and uncallable) until `mcp-broker pins approve`.
    #[serde(default)]
    pub mode: PinModeSetting,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRuntime {
    /// Runtime root (sockets, state, logs, secrets). `$MCP_BROKER_HOME` overrides it.
    /// Default `~/mcp/mcp-broker`.
    #[serde(default)]
    pub root: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBroker {
    /// Most client sessions served at once; further connections wait.
    #[serde(default)]
    pub max_clients: Option<u32>,
    /// How long a tool call may go without an answer or a progress notification, in
    /// milliseconds; progress restarts it.
    #[serde(default)]
    pub call_timeout_ms: Option<crate::duration::Millis>,
    /// Hard limit for one tool call whatever progress it reports.
    #[serde(default)]
    pub max_call_ms: Option<crate::duration::Millis>,
    /// How long an upstream may take to start and answer its handshake (each may set its own).
    #[serde(default)]
    pub startup_timeout_ms: Option<crate::duration::Millis>,
    /// How long shutdown waits for in-flight calls before cancelling them.
    #[serde(default)]
    pub shutdown_grace_ms: Option<crate::duration::Millis>,
    /// How long a raw `tools/list` waits for upstreams whose tools the catalog does not know
    /// yet (never listed, or their command changed) before it answers with what is known; the
    /// rest follow as `notifications/tools/list_changed`.
    #[serde(default)]
    pub first_list_wait_ms: Option<crate::duration::Millis>,
    /// A client whose answers cannot be delivered for this long (it stopped reading) is
    /// disconnected.
    #[serde(default)]
    pub client_write_timeout_ms: Option<crate::duration::Millis>,
    /// Largest single JSON-RPC frame accepted from a client or an upstream.
    #[serde(default)]
    pub max_frame_bytes: Option<u64>,
    /// Largest tool list one upstream may send, all pages together; a larger list is refused
    /// and the upstream reported as failed.
    #[serde(default)]
    pub max_tool_list_bytes: Option<u64>,
    /// Most tools one upstream's list may hold; a longer list is refused and the upstream
    /// reported as failed.
    #[serde(default)]
    pub max_tools_per_list: Option<u32>,
    /// Bytes of answers queued for one client that is slow to read them; past this the session
    /// waits (and is disconnected after client_write_timeout_ms).
    #[serde(default)]
    pub max_outbound_bytes: Option<u64>,
    /// `_meta` keys of a client's request forwarded to upstreams besides those MCP defines
    /// (`progressToken`); a client's other `_meta` keys stay with the broker.
    #[serde(default)]
    pub forward_meta_keys: Vec<String>,
    /// Size at which logs/daemon.log is rotated (daemon.log.1 .. .3 kept).
    #[serde(default)]
    pub log_max_bytes: Option<u64>,
    /// Upstream processes running at once, all upstreams together.
    #[serde(default)]
    pub max_processes: Option<u32>,
    /// Extra variables passed from the daemon's environment to every upstream, beside the
    /// built-in allowlist (PATH, HOME, LANG, TZ, TMPDIR, ...).
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// How long a stored oversized result (artifact) stays readable, in milliseconds.
    #[serde(default)]
    pub artifact_ttl_ms: Option<crate::duration::Millis>,
    /// Disk space all artifacts may take together; the oldest go first.
    #[serde(default)]
    pub artifact_max_bytes: Option<u64>,
    /// Code execution for every profile: ceilings, the Python interpreter.
    #[serde(default)]
    pub exec: crate::exec::RawBrokerExec,
    /// The audit log of tool calls (logs/audit.jsonl, rotated like the daemon's log).
    #[serde(default)]
    pub audit: RawAudit,
    /// How `broker.search_tools` ranks.
    #[serde(default)]
    pub search: RawSearch,
    /// Whether stdio upstreams that do not say run in the sandbox: `off` (the default, so an
    /// existing config keeps working as it did) or `standard`. Absent:
    /// `$MCP_BROKER_UPSTREAM_SANDBOX`, else `off`.
    #[serde(default)]
    pub upstream_sandbox: Option<crate::sandbox::SandboxMode>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSearch {
    /// `static` (default): BM25F over the tools' words fused with the small static embedding
    /// model shipped in the binary (finds tools by meaning as well as by word; about 2 MB more
    /// memory once the first search runs, tool vectors kept in the catalog directory); `off`:
    /// BM25F alone; `minilm`: `static`, then the best 30
    /// candidates reranked by all-MiniLM-L6-v2 (a binary built with `--features
    /// semantic-minilm`, weights installed by `scripts/install-minilm` under
    /// `{runtime.root}/models/all-MiniLM-L6-v2`; otherwise `static` with a warning).
    #[serde(default)]
    pub model: Option<SearchModel>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchModel {
    Off,
    #[default]
    Static,
    Minilm,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAudit {
    /// Write a JSON line per tool call (time, session, client, profile, tool, duration,
    /// outcome, result size).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Also write each call's argument values (they may hold personal data).
    #[serde(default)]
    pub arguments: Option<bool>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    #[default]
    Stdio,
    StreamableHttp,
    Sse,
}

/// What callers ask of a transport, answered here once for every kind: nobody else matches on
/// it.
impl Transport {
    /// A process of ours, started with a command: what is sandboxed, counted against the
    /// process caps, probed for its protocol era, and given an environment.
    pub fn is_local_process(self) -> bool {
        match self {
            Transport::Stdio => true,
            Transport::StreamableHttp | Transport::Sse => false,
        }
    }

    /// A server reached over HTTP: what takes headers, OAuth and a URL.
    pub fn is_remote(self) -> bool {
        !self.is_local_process()
    }

    /// Legacy SSE: a stream opened first, which names where messages are posted.
    pub fn posts_to_a_named_endpoint(self) -> bool {
        match self {
            Transport::Sse => true,
            Transport::Stdio | Transport::StreamableHttp => false,
        }
    }

    /// The config's own word for it.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::StreamableHttp => "streamable_http",
            Transport::Sse => "sse",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// One instance serves every session.
    #[default]
    Shared,
    /// One instance per client session.
    PerSession,
    /// One instance per call or tools listing.
    PerCall,
    /// Kept in the file, never started, never listed.
    Disabled,
}

/// When a local server's process starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartMode {
    /// On its first call, resource read, prompt or subscription: a listing, a search or a
    /// describe answers from the catalog without it. A shared one stops again after
    /// `idle_timeout_ms` without use (10 minutes unless set) once no open session has used it.
    #[default]
    OnFirstUse,
    /// With the daemon, and kept running (no idle stop unless `idle_timeout_ms` is set): for a
    /// server that must run all the time (one that watches something, or is slow to start).
    Eager,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    #[serde(default)]
    pub transport: Transport,
    /// Program to run (stdio). Looked up on PATH when it has no slash.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// A project's server: its tools are shown only to sessions whose client was started in
    /// this folder or below it (the shim says where); sessions that name no folder (the CLI,
    /// the HTTP front) see it too.
    #[serde(default)]
    pub project: Option<String>,
    /// Environment for the process. Credentials only as `${ENV_NAME}` (read from the daemon's
    /// environment) or `${file:NAME}` (a file under the secrets dir); plain settings as literals.
    #[serde(default)]
    pub env: BTreeMap<Located<String>, Located<String>>,
    /// Endpoint (streamable_http, sse).
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers (streamable_http, sse); credentials by reference as in `env`.
    #[serde(default)]
    pub headers: BTreeMap<Located<String>, Located<String>>,
    #[serde(default)]
    pub lifecycle: Lifecycle,
    /// When its process starts: `on_first_use` (default) or `eager`.
    #[serde(default)]
    pub start: StartMode,
    /// Stop a shared or per-session instance after this long without calls (and, for a shared
    /// one, once no open session has used it). A shared local server that starts on first use
    /// stops after 10 minutes unless this is set.
    #[serde(default)]
    pub idle_timeout_ms: Option<crate::duration::Millis>,
    /// Processes of this upstream running at once (per_session, per_call). Default 16.
    #[serde(default)]
    pub max_instances: Option<u32>,
    /// Calls in flight on this upstream at once; further calls queue. Default: no limit.
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// How long a call may wait in that queue before failing. Default 5000.
    #[serde(default)]
    pub queue_timeout_ms: Option<crate::duration::Millis>,
    #[serde(default)]
    pub startup_timeout_ms: Option<crate::duration::Millis>,
    #[serde(default)]
    pub call_timeout_ms: Option<crate::duration::Millis>,
    #[serde(default)]
    pub max_call_ms: Option<crate::duration::Millis>,
    /// One line shown to people and models.
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Believe this upstream's `readOnlyHint` annotations. Without it every tool counts as mutating.
    #[serde(default)]
    pub trust_annotations: bool,
    /// Take the secrets the broker resolved (`${ENV}`, `${file:}`, OAuth tokens) out of this
    /// upstream's ordinary tool results too. Everything else it sends (definitions, resources,
    /// prompts, completions, errors, logs) is always redacted; a result is passed as written
    /// unless this is set.
    #[serde(default)]
    pub redact_results: bool,
    /// Tools of this upstream known to be read-only whatever their annotations say.
    #[serde(default)]
    pub read_only_tools: Vec<String>,
    /// Only this upstream's tools whose own names match one of these globs (`*`, `?`, `[abc]`)
    /// are offered, on every path (lists, calls, search, code runs). Empty: every tool.
    #[serde(default)]
    pub tools_allow: Vec<String>,
    /// This upstream's tools whose names match one of these globs are never offered, even when
    /// `tools_allow` matches them.
    #[serde(default)]
    pub tools_deny: Vec<String>,
    /// Only this upstream's resources whose URIs match one of these globs are listed, read,
    /// subscribed to or completed (`*` runs over `/` too); a template is listed when its
    /// `uriTemplate` text matches. Empty: every resource.
    #[serde(default)]
    pub resources_allow: Vec<String>,
    /// This upstream's resources whose URIs match one of these globs are never offered, even
    /// when `resources_allow` matches them.
    #[serde(default)]
    pub resources_deny: Vec<String>,
    /// A safe probe used by `profile validate`.
    #[serde(default)]
    pub smoke: Option<RawSmoke>,
    /// Run this stdio server in the broker's sandbox: `standard`, `off`, or the standard
    /// policy with settings (`fs: {read, write}`, `network: host | none`, `memory_mb`,
    /// `processes`).
    /// Absent: `broker.upstream_sandbox`.
    #[serde(default)]
    pub sandbox: Option<crate::sandbox::RawSandbox>,
    /// OAuth for a remote upstream. Without it, a server that asks for sign-in still gets it
    /// through `mcp-broker auth login NAME` (dynamic registration); this names a client
    /// registered beforehand, the scopes, or the client-credentials grant.
    #[serde(default)]
    pub oauth: Option<RawOAuth>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOAuth {
    /// A client registered with the authorization server beforehand.
    #[serde(default)]
    pub client_id: Option<String>,
    /// Its secret, by reference (`${ENV}` or `${file:NAME}`), never written literally.
    #[serde(default)]
    pub client_secret: Option<Located<String>>,
    /// An HTTPS URL of this client's metadata document, used as its id where the
    /// authorization server takes one (client ID metadata documents).
    #[serde(default)]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; empty: what the server says it needs.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `authorization_code` (a person signs in once with `auth login`; the default) or
    /// `client_credentials` (no person: the daemon gets its token with the client's secret).
    #[serde(default)]
    pub grant: OAuthGrant,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    #[default]
    AuthorizationCode,
    ClientCredentials,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSmoke {
    #[serde(default)]
    pub query: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub arguments: Option<serde_json::Value>,
    #[serde(default)]
    pub call: bool,
    /// Call the tool even when it may change something (without it, such a call is refused).
    #[serde(default)]
    pub allow_mutating: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Vocabulary {
    /// `broker<sep><verb>`: list_servers, search_tools, describe_tool, call_tool, get_artifact,
    /// status, close_session (and the exec tools).
    #[default]
    Broker,
    /// The MCP Exec Broker's tools: discovery by server, then code runs.
    ExecBroker,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NameStyle {
    /// `<upstream>.<tool>`
    #[default]
    Dotted,
    /// `<upstream>__<tool>`, for clients that reject dots in tool names.
    DoubleUnderscore,
    /// `<upstream>_<tool>` and `broker_search_tools`: the names the daemon's design and Codex
    /// prompts use. The upstreams the profile sees may not have `_` in their names.
    Underscore,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    #[serde(default)]
    pub description: Option<String>,
    /// Upstreams this profile can see. Omitted: all enabled upstreams.
    #[serde(default)]
    pub upstreams: Option<Vec<Located<String>>>,
    /// Show the compact broker_* facade instead of raw tools.
    #[serde(default)]
    pub compact_tools_enabled: bool,
    /// Most tools the profile lists, the facade's included: when its visible tools are more,
    /// it lists the facade plus, within this count, its `pinned_tools` and its most called
    /// tools (as `tool_budget_tokens` does by tokens).
    #[serde(default)]
    pub max_tools: Option<u32>,
    /// Tokens (o200k, estimated) the profile's tool definitions may take in a client's context:
    /// when its visible tools fit, they are listed raw; when not, the facade is listed plus,
    /// within the budget, its `pinned_tools` and then the tools its clients call most.
    #[serde(default)]
    pub tool_budget_tokens: Option<u32>,
    /// Show and allow tools not known to be read-only.
    #[serde(default)]
    pub allow_mutating_upstreams: bool,
    /// Mutating tools allowed even when `allow_mutating_upstreams` is false.
    #[serde(default)]
    pub mutating_allowlist: Vec<String>,
    /// Tools exposed raw beside the facade (dotted names, e.g. `github.search_issues`); in a
    /// budgeted profile, the tools shown first within the budget. Also spelt `always_show`.
    #[serde(default, alias = "always_show")]
    pub pinned_tools: Vec<String>,
    #[serde(default)]
    pub broker_tool_name_style: NameStyle,
    /// The names of the compact facade's tools: `broker` (broker.search_tools, ...) or
    /// `exec_broker` (servers_list, server_tools_list, tool_info, exec_open, exec_run,
    /// exec_close, exec_get_artifact: the MCP Exec Broker's names).
    #[serde(default)]
    pub facade_vocabulary: Vocabulary,
    /// Largest result (in characters) handed to the client whole; a larger one is stored as an
    /// artifact and the client gets a preview. Also sent upstream as
    /// `_meta["mcp-broker/result_budget_chars"]`.
    #[serde(default)]
    pub result_budget_chars: Option<u64>,
    /// Declared to the client as `anthropic/maxResultSizeChars` on broker_call_tool (≤ 500000).
    #[serde(default)]
    pub result_size_chars: Option<u64>,
    /// For clients with a server allowlist: the server names this profile's client may use.
    #[serde(default)]
    pub mcp_allowed_servers: Option<Vec<String>>,
    /// Prefix tool and prompt names with their upstream's name (default true). false exposes
    /// them as the upstream names them: only for a profile of exactly one upstream, so the
    /// broker can stand in front of one server without renaming anything.
    #[serde(default)]
    pub namespace: Option<bool>,
    /// Code execution (broker.run_code and the exec_* tools) for this profile's clients.
    #[serde(default)]
    pub exec: Option<crate::exec::RawProfileExec>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawClient {
    pub profile: Located<String>,
}
