//! Profile decisions: whether a profile may see and call a tool (mutating gating, allowlists)
//! and whether a raw profile stays within `max_tools`. The same functions are used when listing
//! and when calling, on every path, so a tool hidden from a list can never be called by guessing
//! its name. Exposed names (with their 64-character cap) belong to the catalog.
//!
//! This crate decides; it performs no I/O and never talks to upstreams.
#![forbid(unsafe_code)]

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

/// A raw profile that would expose more than its `max_tools`, judged on the tool lists known so
/// far (config validate, reload).
pub fn max_tools_problem(
    settings: &mcpb_config::Settings,
    profile: &ProfileSettings,
    list_of: &dyn Fn(&str) -> Option<std::sync::Arc<Vec<Tool>>>,
) -> Option<String> {
    profile.max_tools?;
    let mut names = Vec::new();
    for up in profile
        .upstreams
        .iter()
        .filter_map(|u| settings.upstreams.get(u))
    {
        for tool in list_of(&up.name).iter().flat_map(|l| l.iter()) {
            if allows(profile, up, tool) {
                names.push(qualify(
                    profile.broker_tool_name_style,
                    &up.name,
                    tool.name(),
                ));
            }
        }
    }
    over_max_tools(profile, &names)
}

/// The one check of a raw profile's `max_tools`, over the exposed names it would list: at
/// validation, at reload and at `tools/list` alike. `None` when within the limit (or compact).
pub fn over_max_tools(profile: &ProfileSettings, names: &[String]) -> Option<String> {
    let max = profile.max_tools? as usize;
    if profile.compact_tools_enabled || names.len() <= max {
        return None;
    }
    let shown: Vec<&str> = names.iter().take(30).map(String::as_str).collect();
    let more = names.len().saturating_sub(shown.len());
    Some(format!(
        "profile '{}' exposes {} tools, more than its max_tools ({max}): {}{}\n  hint: turn on compact_tools_enabled, narrow the profile's upstreams, or raise max_tools",
        profile.name,
        names.len(),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpb_config::{ConfigSource, ResolveContext, load_str};
    use serde_json::json;
    use std::sync::Arc;

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
        let none = |_: &str| Some(Arc::new(vec![tool("get_issue"), tool("create_issue")]));
        let small = ProfileSettings {
            max_tools: Some(1),
            ..p.clone()
        };
        assert_eq!(
            max_tools_problem(&s, &small, &none),
            None,
            "filtered tools do not count"
        );
    }

    #[test]
    fn max_tools_counts_only_what_the_profile_sees() {
        let text = r#"
schema_version: 1
upstreams:
  a: {command: x, trust_annotations: true}
profiles:
  raw: {max_tools: 1}
  compact: {max_tools: 1, compact_tools_enabled: true}
"#;
        let s = load(text);
        let ro = def(json!({"name": "r", "annotations": {"readOnlyHint": true}}));
        let one = |_: &str| Some(Arc::new(vec![ro.clone(), def(json!({"name": "w"}))]));
        assert_eq!(
            max_tools_problem(&s, &s.profiles["raw"], &one),
            None,
            "w is hidden"
        );
        let two = |_: &str| Some(Arc::new(vec![ro.clone(), ro.clone()]));
        let msg = max_tools_problem(&s, &s.profiles["raw"], &two).unwrap();
        assert!(
            msg.starts_with("profile 'raw' exposes 2 tools, more than its max_tools (1): a.r, a.r"),
            "{msg}"
        );
        assert_eq!(max_tools_problem(&s, &s.profiles["compact"], &two), None);
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
