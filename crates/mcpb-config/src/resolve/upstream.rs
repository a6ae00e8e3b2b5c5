//! One upstream's settings from its raw entry, every problem with it said as an issue.

use std::time::Duration;

use super::{Resolver, check_name};
use crate::duration::Millis;
use crate::layout::expand_home;
use crate::located::Located;
use crate::raw::{Lifecycle, RawUpstream, StartMode, Transport};
use crate::sandbox::SandboxPolicy;
use crate::settings::{BrokerSettings, NameFilter, SmokeSettings, ToolFilter, UpstreamSettings};

impl Resolver<'_> {
    pub(super) fn upstream(
        &mut self,
        name: &Located<String>,
        raw: &RawUpstream,
        broker: &BrokerSettings,
    ) -> UpstreamSettings {
        let n = name.value.as_str();
        let (tool_filter, resource_filter) = self.filters(name, raw);
        if let Err(e) = check_name(n) {
            self.issue(name, format!("upstreams.{n}"), format!("invalid upstream name: {e}"),
                Some("use letters, digits, '-' and single '_'; the name prefixes every tool as <upstream>.<tool>"));
        }
        self.check_transport(name, raw);
        let env = self.templates(n, "env", &raw.env);
        let headers = self.templates(n, "headers", &raw.headers);
        let oauth = raw.oauth.as_ref().map(|o| self.oauth(name, o));
        if oauth.is_some() && raw.transport.is_local_process() {
            self.issue(
                name,
                format!("upstreams.{n}.oauth"),
                "oauth is for remote upstreams; a local process gets its credentials in env:"
                    .into(),
                Some("remove oauth:, or set transport: streamable_http with a url:"),
            );
        }
        let sandbox = self.sandbox(name, raw, broker);
        let ms = Millis::duration;
        UpstreamSettings {
            name: n.to_string(),
            transport: raw.transport,
            command: raw.command.as_deref().map(|c| self.placeholders(c)),
            args: raw.args.iter().map(|a| self.placeholders(a)).collect(),
            cwd: raw
                .cwd
                .as_deref()
                .map(|c| expand_home(&self.placeholders(c), self.ctx.home.as_deref())),
            project: raw
                .project
                .as_deref()
                .map(|c| expand_home(c, self.ctx.home.as_deref())),
            env,
            url: raw.url.as_deref().map(|u| self.placeholders(u)),
            headers,
            lifecycle: raw.lifecycle,
            start: raw.start,
            idle_timeout: raw.idle_timeout_ms.map(ms).or_else(|| {
                let lazy_shared = raw.start == StartMode::OnFirstUse
                    && raw.lifecycle == Lifecycle::Shared
                    && raw.transport.is_local_process();
                lazy_shared.then_some(crate::settings::DEFAULT_IDLE_TIMEOUT)
            }),
            max_instances: raw.max_instances.map_or(16, |n| n.max(1) as usize),
            max_concurrency: raw.max_concurrency.map(|n| n.max(1) as usize),
            queue_timeout: raw.queue_timeout_ms.map_or(Duration::from_millis(5000), ms),
            startup_timeout: raw.startup_timeout_ms.map_or(broker.startup_timeout, ms),
            call_timeout: raw.call_timeout_ms.map_or(broker.call_timeout, ms),
            max_call: raw.max_call_ms.map_or(broker.max_call, ms),
            description: raw.description.clone(),
            tags: raw.tags.clone(),
            trust_annotations: raw.trust_annotations,
            redact_results: raw.redact_results,
            read_only_tools: raw.read_only_tools.clone(),
            tool_filter,
            resource_filter,
            oauth,
            smoke: raw.smoke.clone().map(SmokeSettings::from),
            sandbox,
        }
    }

    /// The upstream's tool and resource filters; one whose glob does not parse lets all through.
    fn filters(&mut self, name: &Located<String>, raw: &RawUpstream) -> (ToolFilter, NameFilter) {
        let n = name.value.as_str();
        let tool_filter = match ToolFilter::new(&raw.tools_allow, &raw.tools_deny) {
            Ok(f) => f,
            Err((pattern, e)) => {
                self.issue(
                    name,
                    format!("upstreams.{n}.tools_allow"),
                    format!("'{pattern}' is not a tool name glob: {e}"),
                    Some("globs take * (any run of characters), ? (one character) and [abc] (one of them)"),
                );
                ToolFilter::default()
            }
        };
        let resource_filter = match NameFilter::resources(&raw.resources_allow, &raw.resources_deny)
        {
            Ok(f) => f,
            Err((pattern, e)) => {
                self.issue(
                    name,
                    format!("upstreams.{n}.resources_allow"),
                    format!("'{pattern}' is not a URI glob: {e}"),
                    Some("globs take * (any run of characters, '/' too), ? (one character) and [abc] (one of them)"),
                );
                NameFilter::default()
            }
        };
        (tool_filter, resource_filter)
    }

    /// Says what the transport lacks or has too many of: a command, a url, a process's settings.
    fn check_transport(&mut self, name: &Located<String>, raw: &RawUpstream) {
        let n = name.value.as_str();
        match (raw.transport, &raw.command, &raw.url) {
            (Transport::Stdio, None, _) => self.issue(name, format!("upstreams.{n}.command"),
                "a stdio upstream needs a command".into(), Some("add `command:` (and `args:`), or set `transport:` to streamable_http or sse with a `url:`")),
            (Transport::Stdio, Some(_), Some(_)) => self.issue(name, format!("upstreams.{n}.url"),
                "a stdio upstream takes no url".into(), None),
            (Transport::StreamableHttp | Transport::Sse, _, None) => self.issue(name, format!("upstreams.{n}.url"),
                format!("transport {} needs a url", raw.transport.name()), Some("e.g. url: http://127.0.0.1:8931/mcp")),
            (Transport::StreamableHttp | Transport::Sse, Some(_), _) => self.issue(name, format!("upstreams.{n}.command"),
                format!("transport {} takes no command (the server runs elsewhere)", raw.transport.name()), None),
            (Transport::StreamableHttp | Transport::Sse, None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    self.issue(name, format!("upstreams.{n}.url"), format!("'{url}' is not an http:// or https:// url"), None);
                }
                if matches!(raw.lifecycle, Lifecycle::PerSession | Lifecycle::PerCall) {
                    self.issue(name, format!("upstreams.{n}.lifecycle"),
                        "a remote upstream is shared: per_session and per_call need a process to start".into(),
                        Some("use lifecycle: shared (or disabled)"));
                }
                if raw.cwd.is_some() {
                    self.issue(name, format!("upstreams.{n}.cwd"),
                        "a remote upstream runs elsewhere: a folder means nothing to it".into(),
                        Some("remove cwd:"));
                }
            }
            _ => {}
        }
    }

    /// The sandbox a local upstream runs in (none for a remote one, where asking for one is an
    /// issue), and an issue for a HOME set beside a sandbox the upstream asks for.
    fn sandbox(
        &mut self,
        name: &Located<String>,
        raw: &RawUpstream,
        broker: &BrokerSettings,
    ) -> Option<SandboxPolicy> {
        let n = name.value.as_str();
        let sandbox = if raw.transport.is_local_process() {
            let home = self.ctx.home.clone();
            let expand = |p: &str| expand_home(&self.placeholders(p), home.as_deref());
            SandboxPolicy::resolve(raw.sandbox.as_ref(), broker.upstream_sandbox, &expand)
                .unwrap_or_else(|e| {
                    self.issue(name, format!("upstreams.{n}.sandbox"), e, None);
                    None
                })
        } else {
            if raw.sandbox.is_some() {
                self.issue(
                    name,
                    format!("upstreams.{n}.sandbox"),
                    "the sandbox is for local servers; a remote one runs elsewhere".into(),
                    Some("remove sandbox:"),
                );
            }
            None
        };
        // The sandbox hides the user's home and binds the server's own over it: a HOME of the
        // config's choosing would move what is hidden and leave the real one readable. Said
        // here where the upstream asks for the sandbox itself (a default from the environment
        // is refused at its start, not for the whole config).
        if sandbox.is_some()
            && raw.sandbox.is_some()
            && let Some(key) = raw.env.keys().find(|k| k.value == "HOME")
        {
            self.issue(
                key,
                format!("upstreams.{n}.env.HOME"),
                "a sandboxed server gets a home of its own in place of yours; HOME cannot be set for it"
                    .into(),
                Some("remove env.HOME (the server's files go to state/upstreams/<name>/home), or set sandbox: off"),
            );
        }
        sandbox
    }
}
