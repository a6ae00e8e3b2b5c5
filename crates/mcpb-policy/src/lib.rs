//! Profile decisions: whether a profile may see and call a tool (mutating gating, allowlists)
//! and what a budgeted profile lists (`budget`). The same functions are used when listing
//! and when calling, on every path, so a tool hidden from a list can never be called by guessing
//! its name. Exposed names (with their 64-character cap) belong to the catalog.
//!
//! This crate decides; it performs no I/O and never talks to upstreams.
#![forbid(unsafe_code)]

pub mod budget;

use mcpb_config::{NameStyle, ProfileSettings, UpstreamSettings};
use mcpb_protocol::Tool;

/// `<upstream>.<tool>`: how allowlists, pins and status name a tool whatever style a client sees.
pub fn dotted(upstream: &str, tool: &str) -> String {
    qualify(NameStyle::Dotted, upstream, tool)
}

/// `<upstream><sep><tool>` in a profile's style, uncapped: the form allowlists and messages use.
pub fn qualify(style: NameStyle, upstream: &str, tool: &str) -> String {
    let sep = style.separator();
    let mut out = String::with_capacity(upstream.len() + sep.len() + tool.len());
    out.push_str(upstream);
    out.push_str(sep);
    out.push_str(tool);
    out
}

/// Read-only only when the config says so, or the upstream's annotations are trusted and say
/// so; everything else is treated as able to change something.
pub fn is_read_only(upstream: &UpstreamSettings, tool: &Tool) -> bool {
    if upstream.read_only_tools.iter().any(|r| r == tool.name()) {
        return true;
    }
    upstream.trust_annotations && tool.read_only_hint()
}

/// Whether `profile` may see and call this tool of `upstream`.
pub fn allows(profile: &ProfileSettings, upstream: &UpstreamSettings, tool: &Tool) -> bool {
    if !upstream.enabled() || !profile.upstreams.iter().any(|u| u == &upstream.name) {
        return false;
    }
    let tool_name = tool.name();
    // What the upstream does not offer is hidden like an unknown tool, whatever the profile.
    if !upstream.tool_filter.admits(tool_name) {
        return false;
    }
    if profile.allow_mutating_upstreams || is_read_only(upstream, tool) {
        return true;
    }
    // The allowlist is written in dotted form whatever style the client sees.
    let name = dotted(&upstream.name, tool_name);
    profile.mutating_allowlist.iter().any(|a| a == &name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpb_config::{ConfigSource, ResolveContext, load_str};
    use serde_json::json;

    fn def(v: serde_json::Value) -> Tool {
        Tool::from_value(&v).unwrap()
    }

    fn load(text: &str) -> mcpb_config::Settings {
        load_str(
            text,
            "t",
            ConfigSource::Embedded,
            &ResolveContext::default(),
        )
        .unwrap()
    }

    fn settings() -> mcpb_config::Settings {
        let text = r#"
schema_version: 1
upstreams:
  trusted: {command: x, trust_annotations: true}
  untrusted: {command: x, read_only_tools: [declared_read]}
profiles:
  ro: {upstreams: [trusted, untrusted], mutating_allowlist: [trusted.write_it]}
  rw: {upstreams: [trusted], allow_mutating_upstreams: true}
"#;
        load(text)
    }

    #[test]
    fn an_upstreams_tool_filter_hides_tools_from_every_profile() {
        let text = r#"
schema_version: 1
upstreams:
  gh: {command: x, trust_annotations: true, tools_allow: ["get_*", "list_*"], tools_deny: ["get_secret*"]}
profiles:
  rw: {upstreams: [gh], allow_mutating_upstreams: true}
"#;
        let s = load(text);
        let up = &s.upstreams["gh"];
        let p = &s.profiles["rw"];
        let tool = |n: &str| def(json!({"name": n, "annotations": {"readOnlyHint": true}}));
        assert!(allows(p, up, &tool("get_issue")));
        assert!(allows(p, up, &tool("list_repos")));
        assert!(!allows(p, up, &tool("get_secret_key")), "denied wins");
        assert!(!allows(p, up, &tool("create_issue")), "not allowed");
    }

    #[test]
    fn qualified_names_use_the_style_separator() {
        assert_eq!(
            qualify(NameStyle::Dotted, "git-hub", "search"),
            "git-hub.search"
        );
        assert_eq!(
            qualify(NameStyle::DoubleUnderscore, "git-hub", "search"),
            "git-hub__search"
        );
    }

    #[test]
    fn mutating_tools_need_permission() {
        let s = settings();
        let (ro, rw) = (&s.profiles["ro"], &s.profiles["rw"]);
        let (t, u) = (&s.upstreams["trusted"], &s.upstreams["untrusted"]);
        let read = def(json!({"name": "read_it", "annotations": {"readOnlyHint": true}}));
        let write = def(json!({"name": "write_it", "annotations": {"readOnlyHint": false}}));
        let other = def(json!({"name": "other_write"}));
        assert!(allows(ro, t, &read));
        assert!(allows(ro, t, &write), "allowlisted");
        assert!(!allows(ro, t, &other));
        assert!(
            !allows(ro, u, &read),
            "annotations of an untrusted upstream do not count"
        );
        assert!(
            allows(ro, u, &def(json!({"name": "declared_read"}))),
            "config marks it read-only"
        );
        assert!(allows(rw, t, &other));
        assert!(!allows(rw, u, &read), "upstream not in the profile");
    }
}
