//! Raw config -> Settings, collecting every semantic problem instead of stopping at the first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::duration::Millis;
use crate::error::ConfigIssue;
use crate::layout::{DEFAULT_ROOT, RuntimeLayout, expand_home};
use crate::located::Located;
use crate::raw::{NameStyle, RawBroker, RawConfig, RawProfile};
use crate::settings::{BrokerSettings, ConfigSource, ProfileSettings, Settings, UpstreamSettings};
use crate::template::{Template, looks_like_credential};

mod upstream;

/// What resolution needs from the outside world, passed in so tests control it.
#[derive(Debug, Clone, Default)]
pub struct ResolveContext {
    pub home: Option<PathBuf>,
    /// `$MCP_BROKER_HOME`, which overrides `runtime.root`.
    pub broker_home: Option<PathBuf>,
    /// This binary, for the `{broker.exe}` placeholder.
    pub exe: PathBuf,
    /// `$MCP_BROKER_UPSTREAM_SANDBOX`: `broker.upstream_sandbox` where the file does not say,
    /// so that a whole setup can be tried sandboxed without editing it.
    pub upstream_sandbox: Option<String>,
}

impl ResolveContext {
    pub fn from_env() -> Self {
        Self {
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            broker_home: std::env::var_os(crate::env::HOME)
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("mcp-broker")),
            upstream_sandbox: std::env::var(crate::env::UPSTREAM_SANDBOX)
                .ok()
                .filter(|v| !v.is_empty()),
        }
    }

    pub fn runtime_root(&self, configured: Option<&str>) -> PathBuf {
        if let Some(h) = &self.broker_home {
            return h.clone();
        }
        if let Some(root) = configured {
            return expand_home(root, self.home.as_deref());
        }
        match &self.home {
            Some(home) => home.join(DEFAULT_ROOT),
            None => PathBuf::from("/tmp").join(DEFAULT_ROOT),
        }
    }
}

/// Upstream, profile and client names become parts of tool names and file names.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("name is empty".into());
    }
    if name.len() > 48 {
        return Err(format!(
            "name is {} characters long; at most 48",
            name.len()
        ));
    }
    if name.contains('.') || name.contains("__") {
        return Err(format!(
            "name '{name}' contains a namespace separator ('.' or '__')"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !name.ends_with(|c: char| c.is_ascii_alphanumeric())
    {
        return Err(format!(
            "name '{name}' must start and end with a letter or digit"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!("name '{name}' contains '{c}'"));
    }
    Ok(())
}

struct Resolver<'a> {
    ctx: &'a ResolveContext,
    layout: RuntimeLayout,
    issues: Vec<ConfigIssue>,
}

impl Resolver<'_> {
    fn sandbox_from_env(&mut self) -> crate::sandbox::SandboxMode {
        use crate::sandbox::SandboxMode;
        match self.ctx.upstream_sandbox.as_deref() {
            None | Some("off") => SandboxMode::Off,
            Some("standard") => SandboxMode::Standard,
            Some(other) => {
                self.issues.push(ConfigIssue {
                    line: 0,
                    column: 0,
                    path: "$MCP_BROKER_UPSTREAM_SANDBOX".into(),
                    message: format!("'{other}' is not a sandbox mode"),
                    hint: Some("set it to off or standard, or unset it".into()),
                });
                SandboxMode::Off
            }
        }
    }

    fn issue<T>(&mut self, at: &Located<T>, path: String, message: String, hint: Option<&str>) {
        self.issues.push(ConfigIssue {
            line: at.line,
            column: at.column,
            path,
            message,
            hint: hint.map(str::to_string),
        });
    }

    fn placeholders(&self, text: &str) -> String {
        let dirs = [
            ("{runtime.root}", self.layout.root.clone()),
            ("{runtime.state_dir}", self.layout.state_dir()),
            ("{runtime.secrets_dir}", self.layout.secrets_dir()),
            ("{broker.exe}", self.ctx.exe.clone()),
        ];
        let mut out = text.to_string();
        for (key, path) in dirs {
            if out.contains(key) {
                out = out.replace(key, &path.display().to_string());
            }
        }
        out
    }

    fn oauth(
        &mut self,
        name: &Located<String>,
        raw: &crate::raw::RawOAuth,
    ) -> crate::settings::OAuthSettings {
        let n = name.value.as_str();
        let client_secret = raw.client_secret.as_ref().and_then(|secret| {
            let path = format!("upstreams.{n}.oauth.client_secret");
            match Template::parse(&self.placeholders(&secret.value)) {
                Ok(t) if t.has_reference() => Some(t),
                Ok(_) => {
                    self.issue(secret, path, "the client secret is written literally".into(),
                        Some("write it as a reference: ${ENV_NAME} or ${file:NAME} (a file in the secrets dir)"));
                    None
                }
                Err(e) => {
                    self.issue(secret, path, e.to_string(), None);
                    None
                }
            }
        });
        let client_credentials = raw.grant == crate::raw::OAuthGrant::ClientCredentials;
        if client_credentials && (raw.client_id.is_none() || raw.client_secret.is_none()) {
            self.issue(
                name,
                format!("upstreams.{n}.oauth.grant"),
                "the client_credentials grant needs a client_id and a client_secret".into(),
                Some("add client_id: and client_secret: ${ENV_NAME} under oauth:"),
            );
        }
        if let Some(u) = &raw.client_metadata_url
            && !u.starts_with("https://")
        {
            self.issue(
                name,
                format!("upstreams.{n}.oauth.client_metadata_url"),
                format!("'{u}' is not an https:// URL"),
                None,
            );
        }
        crate::settings::OAuthSettings {
            client_id: raw.client_id.clone(),
            client_secret,
            client_metadata_url: raw.client_metadata_url.clone(),
            scopes: raw.scopes.clone(),
            grant: raw.grant,
        }
    }

    fn templates(
        &mut self,
        upstream: &str,
        what: &str,
        map: &BTreeMap<Located<String>, Located<String>>,
    ) -> BTreeMap<String, Template> {
        let mut out = BTreeMap::new();
        for (key, value) in map {
            let path = format!("upstreams.{upstream}.{what}.{}", key.value);
            if what == "env" && !is_env_key(&key.value) {
                self.issue(
                    key,
                    path.clone(),
                    format!("'{}' is not a valid environment variable name", key.value),
                    None,
                );
            }
            let template = match Template::parse(&self.placeholders(&value.value)) {
                Ok(t) => t,
                Err(e) => {
                    self.issue(value, path, e.to_string(), None);
                    continue;
                }
            };
            if looks_like_credential(&key.value) && !template.has_reference() {
                self.issue(
                    value,
                    path,
                    format!("'{}' looks like a credential but its value is written literally", key.value),
                    Some("write it as a reference: ${ENV_NAME} (from the daemon's environment) or ${file:NAME} (a file in the secrets dir)"),
                );
                continue;
            }
            out.insert(key.value.clone(), template);
        }
        out
    }

    /// The HTTP front: tokens must be references and name profiles that exist.
    fn http(
        &mut self,
        raw: &crate::http::RawHttp,
        profiles: &BTreeMap<String, ProfileSettings>,
    ) -> crate::http::HttpSettings {
        let mut tokens = Vec::new();
        for (i, t) in raw.tokens.iter().enumerate() {
            let path = format!("http.tokens[{i}]");
            let template = match Template::parse(&t.token.value) {
                Ok(tpl) => tpl,
                Err(e) => {
                    self.issue(&t.token, format!("{path}.token"), e.to_string(), None);
                    continue;
                }
            };
            let only_reference = template.parts().len() == 1 && template.has_reference();
            if !only_reference {
                self.issue(
                    &t.token,
                    format!("{path}.token"),
                    "an HTTP token must be a reference, not written in the file".into(),
                    Some("write it as ${ENV_NAME} (from the daemon's environment) or ${file:NAME} (a file in the secrets dir)"),
                );
                continue;
            }
            if !profiles.contains_key(&t.profile.value) {
                let known: Vec<&str> = profiles.keys().map(String::as_str).collect();
                self.issue(
                    &t.profile,
                    format!("{path}.profile"),
                    format!("HTTP token {i} names unknown profile '{}'", t.profile.value),
                    Some(&format!("known profiles: {}", known.join(", "))),
                );
                continue;
            }
            tokens.push(crate::http::HttpToken {
                token: template,
                profile: t.profile.value.clone(),
                max_sessions: t.max_sessions.unwrap_or(64).max(1),
                max_in_flight: t.max_in_flight.unwrap_or(64).max(1),
            });
        }
        let path = raw.path.clone().unwrap_or_else(|| "/mcp".into());
        crate::http::HttpSettings {
            listen: raw
                .listen
                .clone()
                .unwrap_or_else(|| crate::http::DEFAULT_LISTEN.into()),
            path: if path.starts_with('/') {
                path
            } else {
                format!("/{path}")
            },
            tokens,
            allowed_origins: raw.allowed_origins.clone(),
            allow_loopback_origins: raw.allow_loopback_origins.unwrap_or(false),
            allowed_hosts: raw.allowed_hosts.clone(),
            session_idle_ms: raw.session_idle_ms.map_or(1_800_000, |m| m.0).max(1000),
        }
    }

    /// The console: on loopback only, whatever the file says.
    fn console(&mut self, raw: &crate::console::RawConsole) -> crate::console::ConsoleSettings {
        let mut console = crate::console::ConsoleSettings {
            enabled: raw.enabled.unwrap_or(true),
            ..Default::default()
        };
        if let Some(listen) = &raw.listen {
            if crate::console::is_loopback(&listen.value) {
                console.listen = listen.value.clone();
            } else {
                self.issue(
                    listen,
                    "console.listen".into(),
                    format!("'{}' is not a loopback address and port", listen.value),
                    Some("the console serves this machine only: use 127.0.0.1:PORT or [::1]:PORT (port 0: any free one)"),
                );
            }
        }
        console
    }
}

fn is_env_key(k: &str) -> bool {
    let mut chars = k.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The broker's settings: each key as written, or its default, held to its floor.
fn broker_settings(b: &RawBroker) -> BrokerSettings {
    let ms = Millis::duration;
    let defaults = BrokerSettings::default();
    BrokerSettings {
        max_clients: b
            .max_clients
            .map_or(defaults.max_clients, |n| n.max(1) as usize),
        call_timeout: b.call_timeout_ms.map_or(defaults.call_timeout, ms),
        max_call: b.max_call_ms.map_or(defaults.max_call, ms),
        startup_timeout: b.startup_timeout_ms.map_or(defaults.startup_timeout, ms),
        shutdown_grace: b.shutdown_grace_ms.map_or(defaults.shutdown_grace, ms),
        first_list_wait: b.first_list_wait_ms.map_or(defaults.first_list_wait, ms),
        client_write_timeout: b
            .client_write_timeout_ms
            .map_or(defaults.client_write_timeout, ms),
        max_processes: b
            .max_processes
            .map_or(defaults.max_processes, |n| n.max(1) as usize),
        max_frame_bytes: b.max_frame_bytes.map_or(defaults.max_frame_bytes, |n| {
            usize::try_from(n.max(4096)).unwrap_or(usize::MAX)
        }),
        env_passthrough: b.env_passthrough.clone(),
        max_tool_list_bytes: b
            .max_tool_list_bytes
            .map_or(defaults.max_tool_list_bytes, |n| {
                usize::try_from(n.max(4096)).unwrap_or(usize::MAX)
            }),
        max_tools_per_list: b
            .max_tools_per_list
            .map_or(defaults.max_tools_per_list, |n| n.max(1) as usize),
        max_outbound_bytes: b
            .max_outbound_bytes
            .map_or(defaults.max_outbound_bytes, |n| {
                usize::try_from(n.max(64 * 1024)).unwrap_or(usize::MAX)
            }),
        forward_meta_keys: b.forward_meta_keys.clone(),
        log_max_bytes: b
            .log_max_bytes
            .map_or(defaults.log_max_bytes, |n| n.max(64 * 1024)),
        artifact_ttl: b.artifact_ttl_ms.map_or(defaults.artifact_ttl, ms),
        artifact_max_bytes: b.artifact_max_bytes.unwrap_or(defaults.artifact_max_bytes),
        exec: crate::exec::BrokerExec::resolve(&b.exec),
        audit: crate::settings::AuditSettings {
            enabled: b.audit.enabled.unwrap_or(defaults.audit.enabled),
            arguments: b.audit.arguments.unwrap_or(defaults.audit.arguments),
        },
        search_model: b.search.model.unwrap_or(defaults.search_model),
        upstream_sandbox: b.upstream_sandbox.unwrap_or_default(),
    }
}

impl Resolver<'_> {
    /// `broker.exec.workspace_root`, `~` expanded; it must be absolute.
    fn workspace_root(&mut self, raw: &RawConfig) -> Option<PathBuf> {
        let written = raw.broker.exec.workspace_root.as_ref()?;
        let path = expand_home(&written.value, self.ctx.home.as_deref());
        if !path.is_absolute() {
            self.issue(
                written,
                "broker.exec.workspace_root".into(),
                format!("workspace_root {} is not an absolute path", written.value),
                Some("write an absolute path or one under ~/"),
            );
            return None;
        }
        Some(path)
    }

    fn schema_version(&mut self, raw: &RawConfig) {
        if raw.schema_version.value != 1 {
            self.issue(
                &raw.schema_version,
                "schema_version".into(),
                format!(
                    "schema_version {} is not supported",
                    raw.schema_version.value
                ),
                Some("this version of mcp-broker reads schema_version: 1"),
            );
        }
    }

    /// The upstreams a profile sees: its list (each name known, none twice), or every enabled
    /// upstream when it has none.
    fn profile_upstreams(
        &mut self,
        n: &str,
        list: Option<&Vec<Located<String>>>,
        upstreams: &BTreeMap<String, UpstreamSettings>,
    ) -> Vec<String> {
        let Some(list) = list else {
            return upstreams
                .values()
                .filter(|u| u.enabled())
                .map(|u| u.name.clone())
                .collect();
        };
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for (i, up) in list.iter().enumerate() {
            let path = format!("profiles.{n}.upstreams[{i}]");
            if !upstreams.contains_key(&up.value) {
                let known: Vec<&str> = upstreams.keys().map(String::as_str).collect();
                self.issue(
                    up,
                    path,
                    format!("profile '{n}' names unknown upstream '{}'", up.value),
                    Some(&format!("known upstreams: {}", listed(&known))),
                );
            } else if !seen.insert(up.value.clone()) {
                self.issue(
                    up,
                    path,
                    format!("profile '{n}' lists upstream '{}' twice", up.value),
                    None,
                );
            } else {
                out.push(up.value.clone());
            }
        }
        out
    }

    /// One profile, with every problem of its name, upstreams, namespace and pinned tools.
    fn profile(
        &mut self,
        name: &Located<String>,
        p: &RawProfile,
        upstreams: &BTreeMap<String, UpstreamSettings>,
        broker: &BrokerSettings,
    ) -> ProfileSettings {
        let n = &name.value;
        if let Err(e) = check_name(n) {
            self.issue(
                name,
                format!("profiles.{n}"),
                format!("invalid profile name: {e}"),
                None,
            );
        }
        let visible = self.profile_upstreams(n, p.upstreams.as_ref(), upstreams);
        // `<upstream>_<tool>` splits at the first `_`: an upstream name with one would be read
        // as another upstream's.
        if p.broker_tool_name_style == NameStyle::Underscore {
            for u in visible.iter().filter(|u| u.contains('_')) {
                self.issue(
                    name,
                    format!("profiles.{n}.broker_tool_name_style"),
                    format!(
                        "profile '{n}' names tools <upstream>_<tool>, but upstream '{u}' has '_' in its name"
                    ),
                    Some("rename the upstream (e.g. with '-'), or use broker_tool_name_style: double_underscore"),
                );
            }
        }
        if p.namespace == Some(false) && visible.len() != 1 {
            self.issue(
                name,
                format!("profiles.{n}.namespace"),
                format!(
                    "profile '{n}' has namespace: false but sees {} upstreams",
                    visible.len()
                ),
                Some("unprefixed names are only unambiguous for one upstream: list exactly one in `upstreams`"),
            );
        }
        for (i, pinned) in p.pinned_tools.iter().enumerate() {
            let known = pinned
                .split_once('.')
                .is_some_and(|(up, _)| visible.iter().any(|u| u == up));
            if !known {
                self.issue(
                    name,
                    format!("profiles.{n}.pinned_tools[{i}]"),
                    format!("pinned tool '{pinned}' is not of an upstream this profile sees"),
                    Some("write pinned tools as <upstream>.<tool> of an upstream in the profile's upstreams"),
                );
            }
        }
        ProfileSettings {
            name: n.clone(),
            description: p.description.clone(),
            upstreams: visible,
            compact_tools_enabled: p.compact_tools_enabled,
            max_tools: p.max_tools,
            tool_budget_tokens: p.tool_budget_tokens,
            allow_mutating_upstreams: p.allow_mutating_upstreams,
            mutating_allowlist: p.mutating_allowlist.clone(),
            pinned_tools: p.pinned_tools.clone(),
            broker_tool_name_style: p.broker_tool_name_style,
            facade_vocabulary: p.facade_vocabulary,
            result_budget_chars: p.result_budget_chars,
            result_size_chars: p.result_size_chars.map(|n| n.min(500_000)),
            mcp_allowed_servers: p.mcp_allowed_servers.clone(),
            namespace: p.namespace.unwrap_or(true),
            exec: p
                .exec
                .as_ref()
                .and_then(|e| crate::exec::ProfileExec::resolve(e, &broker.exec)),
        }
    }

    /// Each client's profile, which must exist.
    fn clients(
        &mut self,
        raw: &RawConfig,
        profiles: &BTreeMap<String, ProfileSettings>,
    ) -> BTreeMap<String, String> {
        let mut clients = BTreeMap::new();
        for (name, c) in &raw.clients {
            if !profiles.contains_key(&c.profile.value) {
                let known: Vec<&str> = profiles.keys().map(String::as_str).collect();
                self.issue(
                    &c.profile,
                    format!("clients.{}.profile", name.value),
                    format!(
                        "client '{}' uses unknown profile '{}'",
                        name.value, c.profile.value
                    ),
                    Some(&format!("known profiles: {}", listed(&known))),
                );
            }
            clients.insert(name.value.clone(), c.profile.value.clone());
        }
        clients
    }
}

/// Names for a hint, or "(none)".
fn listed(names: &[&str]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

/// Resolves a parsed file; every problem found is returned, not only the first.
pub fn resolve(
    raw: &RawConfig,
    source: ConfigSource,
    ctx: &ResolveContext,
) -> Result<Settings, Vec<ConfigIssue>> {
    let layout = RuntimeLayout::new(ctx.runtime_root(raw.runtime.root.as_deref()));
    let mut r = Resolver {
        ctx,
        layout,
        issues: Vec::new(),
    };
    r.schema_version(raw);
    let mut broker = broker_settings(&raw.broker);
    broker.exec.workspace_root = r.workspace_root(raw);
    if raw.broker.upstream_sandbox.is_none() {
        broker.upstream_sandbox = r.sandbox_from_env();
    }

    let mut upstreams = BTreeMap::new();
    for (name, up) in &raw.upstreams {
        let settings = r.upstream(name, up, &broker);
        upstreams.insert(name.value.clone(), settings);
    }

    let mut profiles = BTreeMap::new();
    for (name, p) in &raw.profiles {
        let profile = r.profile(name, p, &upstreams, &broker);
        profiles.insert(name.value.clone(), profile);
    }

    let clients = r.clients(raw, &profiles);

    let http = raw.http.as_ref().map(|h| r.http(h, &profiles));
    let console = r.console(&raw.console);

    if !r.issues.is_empty() {
        r.issues.sort_by_key(|i| (i.line, i.column));
        return Err(r.issues);
    }
    Ok(Settings {
        source,
        runtime: r.layout,
        broker,
        upstreams,
        profiles,
        clients,
        pins: raw.pins.mode,
        http,
        console,
    })
}
