//! `mcp-broker profile acceptance P`: the calls a person pastes into a live Codex or Claude
//! Code session to accept profile P by hand, built from the upstreams' smoke probes and
//! written in the names that client shows its model (`mcp__mcp_broker__broker_search_tools`).
//! No model is called. A probe that calls its tool without `allow_mutating` is asked of the
//! daemon first (describe, as `profile validate` asks it; over a warm catalog it starts no
//! server): a call validate refuses is never printed, only why.

use std::process::ExitCode;

use mcpb_config::settings::SmokeSettings;
use mcpb_config::{Language, ProfileSettings, Settings, Vocabulary};
use mcpb_daemon::tools::{
    BrokerTool, Naming, call_tool, describe_tool, exec_close, exec_open, exec_run, list_servers,
    search_tools, server_tools_list, status,
};
use serde_json::{Value, json};

use crate::fail;

/// How a client turns its server's entry name and a tool's name into the name its model calls.
#[derive(Clone, Copy)]
enum Wrapper {
    /// Codex: `mcp__<server>__<tool>`, every character but `[A-Za-z0-9_]` made `_` (the
    /// Responses API's rule); names over 64 characters get a hash suffix.
    Codex,
    /// Claude Code: `mcp__<server>__<tool>`, every character but `[A-Za-z0-9_-]` made `_`.
    ClaudeCode,
}

impl Wrapper {
    fn label(self) -> &'static str {
        match self {
            Wrapper::Codex => "Codex",
            Wrapper::ClaudeCode => "Claude Code",
        }
    }

    fn wrap(self, server: &str, tool: &str) -> String {
        let keep = |c: char| match self {
            Wrapper::Codex => c.is_ascii_alphanumeric() || c == '_',
            Wrapper::ClaudeCode => c.is_ascii_alphanumeric() || c == '_' || c == '-',
        };
        format!("mcp__{server}__{tool}")
            .chars()
            .map(|c| if keep(c) { c } else { '_' })
            .collect()
    }
}

/// One paste-ready line and what the person should see.
struct Step {
    tool: String,
    args: Value,
    expect: String,
}

fn step(tool: String, args: Value, expect: impl Into<String>) -> Step {
    Step {
        tool,
        args,
        expect: expect.into(),
    }
}

/// The upstream tool's name as the profile exposes it.
fn exposed(p: &ProfileSettings, upstream: &str, tool: &str) -> String {
    let local = crate::commands::config::probes::local_name(upstream, tool);
    if p.namespace {
        format!("{upstream}{}{local}", p.broker_tool_name_style.separator())
    } else {
        local.to_string()
    }
}

/// The steps for one upstream's probe, in the profile's own facade (or raw tools).
fn probe_steps(
    p: &ProfileSettings,
    upstream: &str,
    smoke: &SmokeSettings,
    may_call: bool,
) -> Vec<Step> {
    let n = Naming::of(p);
    let tool = smoke.tool.as_deref().map(|t| exposed(p, upstream, t));
    let args = smoke.arguments.clone().unwrap_or_else(|| json!({}));
    let mut out = Vec::new();
    if !p.compact_tools_enabled {
        if let Some(t) = &tool {
            out.push(step(
                t.clone(),
                args,
                format!("{t} answers (it is in the client's tool list as it is)"),
            ));
        }
        return out;
    }
    let exec_broker = n.vocabulary == Vocabulary::ExecBroker;
    if exec_broker {
        out.push(step(
            server_tools_list::ServerToolsList::named(n),
            json!({"server": upstream}),
            match &tool {
                Some(t) => format!("{t} among {upstream}'s tools"),
                None => format!("{upstream}'s tools"),
            },
        ));
    } else if let Some(q) = &smoke.query {
        out.push(step(
            search_tools::SearchTools::named(n),
            json!({"query": q, "server": upstream}),
            match &tool {
                Some(t) => format!("{t} among the results"),
                None => "at least one result".into(),
            },
        ));
    }
    let Some(t) = tool else {
        return out;
    };
    out.push(step(
        describe_tool::DescribeTool::named(n),
        json!({"name": t}),
        format!("{t}'s input schema"),
    ));
    if !smoke.call || !may_call {
        return out;
    }
    let warn = if smoke.allow_mutating {
        " (the probe allows it to change something)"
    } else {
        ""
    };
    let language = p.exec.as_ref().and_then(|e| {
        [Language::Python, Language::Javascript]
            .into_iter()
            .find(|l| e.allows(*l))
    });
    if exec_broker && let Some(language) = language {
        // JSON is a JavaScript literal; Python reads it with json.loads (true/null differ).
        let code = match language {
            Language::Python => format!(
                "import json\nfrom mcp_sdk import call_tool, result\nresult(call_tool({}, json.loads({})))",
                json!(t),
                json!(args.to_string())
            ),
            Language::Javascript => {
                format!("await result(await callTool({}, {}));", json!(t), args)
            }
        };
        out.push(step(
            exec_open::ExecOpen::named(n),
            json!({}),
            "an exec_id (use it below)",
        ));
        out.push(step(
            exec_run::ExecRun::named(n),
            json!({"exec_id": "<exec_id>", "code": code, "language": language.name(), "allow": [t]}),
            format!("status ok and {t}'s answer as the result{warn}"),
        ));
        out.push(step(
            exec_close::ExecClose::named(n),
            json!({"exec_id": "<exec_id>"}),
            "closed",
        ));
    } else if exec_broker {
        // Calls happen in code runs, and this profile runs no code.
        return out;
    } else {
        out.push(step(
            call_tool::CallTool::named(n),
            json!({"name": t, "arguments": args}),
            format!("{t}'s answer, not an error{warn}"),
        ));
    }
    out
}

/// Why `profile validate` would refuse upstream `name`'s probe call: its tool may change
/// something (the daemon's describe says so) and the probe does not allow that.
fn refused(
    settings: &Settings,
    profile: &str,
    p: &ProfileSettings,
    name: &str,
    smoke: &SmokeSettings,
) -> Option<String> {
    let tool = smoke.tool.as_deref()?;
    if !smoke.call || smoke.allow_mutating {
        return None;
    }
    let t = exposed(p, name, tool);
    super::mutating(settings, profile, &t).then(|| {
        format!("{name}: {t} is not called: it may change something, and `profile validate` refuses it too; set smoke.allow_mutating: true to call it on purpose")
    })
}

/// Every step for profile `p`: the status first (as `profile validate` does), then each
/// upstream's probe; the upstreams without one; the calls left out, and why.
fn steps(
    p: &ProfileSettings,
    settings: &Settings,
    profile: &str,
) -> (Vec<Step>, Vec<String>, Vec<String>) {
    let n = Naming::of(p);
    let mut out = Vec::new();
    let mut without = Vec::new();
    if p.compact_tools_enabled {
        let all = p.upstreams.join(", ");
        let (tool, expect) = if n.vocabulary == Vocabulary::ExecBroker {
            (list_servers::ListServers::named(n), format!("{all} listed"))
        } else {
            (
                status::Status::named(n),
                format!("{all} listed, none \"failed\""),
            )
        };
        out.push(step(tool, json!({}), expect));
    }
    let mut left_out = Vec::new();
    for name in &p.upstreams {
        match settings.upstreams.get(name).and_then(|u| u.smoke.as_ref()) {
            Some(smoke) => {
                let why = refused(settings, profile, p, name, smoke);
                out.extend(probe_steps(p, name, smoke, why.is_none()));
                left_out.extend(why);
            }
            None => without.push(name.clone()),
        }
    }
    (out, without, left_out)
}

pub(crate) fn acceptance(
    settings: &Settings,
    profile: &str,
    client: Option<&str>,
    server: &str,
) -> ExitCode {
    let Some(p) = settings.profiles.get(profile) else {
        let names: Vec<&str> = settings.profiles.keys().map(String::as_str).collect();
        return fail(
            &format!("mcp-broker: no profile named {profile:?}"),
            &[&format!("profiles: {}", names.join(", "))],
        );
    };
    let wrappers: Vec<Wrapper> = match client {
        Some("codex") => vec![Wrapper::Codex],
        Some("claude-code") => vec![Wrapper::ClaudeCode],
        _ => vec![Wrapper::Codex, Wrapper::ClaudeCode],
    };
    let (list, without, left_out) = steps(p, settings, profile);
    for (i, w) in wrappers.iter().enumerate() {
        if i > 0 {
            outln!();
        }
        outln!(
            "# {} with profile {profile} as server entry {server:?}: paste each call into a live session",
            w.label()
        );
        for s in &list {
            let name = w.wrap(server, &s.tool);
            outln!("{name} {}", s.args);
            outln!("#   expect: {}", s.expect);
            if matches!(w, Wrapper::Codex) && name.len() > 64 {
                outln!(
                    "#   Codex shortens names over 64 characters with a hash: find it in its tool list"
                );
            }
        }
    }
    for why in &left_out {
        outln!("# {why}");
    }
    if !without.is_empty() {
        errln!(
            "mcp-broker: no smoke probe for {}: nothing to accept them by",
            without.join(", ")
        );
        errln!(
            "hint: add `smoke: {{query: ..., tool: ..., arguments: {{...}}, call: true}}` to each in broker.yaml"
        );
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_wraps_names_by_its_own_rule() {
        assert_eq!(
            Wrapper::Codex.wrap("mcp-broker", "broker_search_tools"),
            "mcp__mcp_broker__broker_search_tools"
        );
        assert_eq!(
            Wrapper::Codex.wrap("mcp-broker", "memory.read_graph"),
            "mcp__mcp_broker__memory_read_graph"
        );
        assert_eq!(
            Wrapper::ClaudeCode.wrap("mcp-broker", "broker.search_tools"),
            "mcp__mcp-broker__broker_search_tools"
        );
    }
}
