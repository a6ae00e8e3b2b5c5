//! `mcp-broker measure`: what a profile puts into a model's context, before (every tool of its
//! upstreams, as a client loading them directly would) and after (what the profile exposes), in
//! tool definitions, serialized bytes and o200k_base tokens.

pub(crate) mod client;

use std::process::ExitCode;

use mcpb_config::Settings;
use serde_json::Value;

use mcpb_protocol::AdminCommand;

use crate::cli::MeasureArgs;
use crate::daemon_client::{admin_about, connect_or_start_for_cli};
use crate::fail;

/// Definitions, bytes and tokens of one tool list, serialized as a client sends it to a model.
pub(crate) struct Size {
    pub tools: usize,
    pub bytes: usize,
    pub tokens: usize,
}

pub(crate) fn size(tools: &[Value], bpe: &tiktoken_rs::CoreBPE) -> Size {
    let text = serde_json::to_string(tools).unwrap_or_default();
    Size {
        tools: tools.len(),
        bytes: text.len(),
        tokens: bpe.encode_ordinary(&text).len(),
    }
}

/// The o200k_base tokenizer, or the failure said.
pub(crate) fn tokenizer() -> Result<tiktoken_rs::CoreBPE, ExitCode> {
    tiktoken_rs::o200k_base().map_err(|e| {
        fail(
            &format!("mcp-broker: cannot load the o200k_base tokenizer: {e}"),
            &[],
        )
    })
}

pub(crate) fn reduction(before: usize, after: usize) -> String {
    if before == 0 {
        return "-".into();
    }
    format!("{:.1}%", 100.0 * (1.0 - after as f64 / before as f64))
}

pub(crate) fn table(upstreams: &[(String, Size)], exposed: &Size) -> String {
    let total = Size {
        tools: upstreams.iter().map(|u| u.1.tools).sum(),
        bytes: upstreams.iter().map(|u| u.1.bytes).sum(),
        tokens: upstreams.iter().map(|u| u.1.tokens).sum(),
    };
    let mut rows = vec![[
        "scope".to_string(),
        "before".into(),
        "after".into(),
        "reduction".into(),
    ]];
    for (what, b, a) in [
        ("tool definitions", total.tools, exposed.tools),
        ("bytes", total.bytes, exposed.bytes),
        ("o200k_base tokens", total.tokens, exposed.tokens),
    ] {
        rows.push([what.into(), b.to_string(), a.to_string(), reduction(b, a)]);
    }
    for (name, s) in upstreams {
        rows.push([
            format!("  {name}"),
            format!("{} tools, {} tokens", s.tools, s.tokens),
            String::new(),
            String::new(),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, v)| format!("{v:<w$}", w = widths[c]))
            .collect();
        out.push_str(line.join(" | ").trim_end());
        out.push('\n');
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("-|-"));
            out.push('\n');
        }
    }
    out
}

/// `mcp-broker measure`: a profile's view (the default), or clients before and after.
pub(crate) fn run(settings: &Settings, a: &MeasureArgs) -> ExitCode {
    if a.client.is_some() || a.all_clients {
        client::run(settings, a.client.as_deref(), a.json)
    } else {
        run_profile(settings, a.profile.as_deref(), a.json)
    }
}

/// What one profile's view costs against its upstreams' raw tools.
fn run_profile(settings: &Settings, profile: Option<&str>, json: bool) -> ExitCode {
    if let Err(e) = connect_or_start_for_cli(settings) {
        return fail(&format!("mcp-broker: cannot reach the daemon: {e:#}"), &[]);
    }
    let reply = match admin_about(settings, AdminCommand::Measure, profile) {
        Ok(Some(r)) => r,
        Ok(None) => return fail("mcp-broker: the daemon stopped before answering", &[]),
        Err(e) => return fail(&format!("mcp-broker: {e:#}"), &[]),
    };
    if !reply.ok {
        let hints: Vec<&str> = reply.hints.iter().map(String::as_str).collect();
        return fail(
            &format!("mcp-broker: {}", reply.error.unwrap_or_default()),
            &hints,
        );
    }
    let data = reply.data.unwrap_or(Value::Null);
    let bpe = match tokenizer() {
        Ok(b) => b,
        Err(code) => return code,
    };
    let mut upstreams = Vec::new();
    for up in data["upstreams"].as_array().into_iter().flatten() {
        let name = up["name"].as_str().unwrap_or("?").to_string();
        if let Some(e) = up["error"].as_str() {
            errln!("mcp-broker: upstream '{name}' left out: {e}");
            continue;
        }
        let tools = up["tools"].as_array().cloned().unwrap_or_default();
        upstreams.push((name, size(&tools, &bpe)));
    }
    if let Some(e) = data["exposed"]["error"].as_str() {
        return fail(
            &format!("mcp-broker: the profile's own list failed: {e}"),
            &[],
        );
    }
    let exposed_tools = data["exposed"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let exposed = size(&exposed_tools, &bpe);
    if json {
        let ups: Vec<Value> = upstreams
            .iter()
            .map(|(n, s)| serde_json::json!({"name": n, "tools": s.tools, "bytes": s.bytes, "tokens": s.tokens}))
            .collect();
        let out = serde_json::json!({
            "profile": data["profile"],
            "upstreams": ups,
            "after": {"tools": exposed.tools, "bytes": exposed.bytes, "tokens": exposed.tokens},
        });
        outln!("{out:#}");
    } else {
        outln!("profile {}", data["profile"].as_str().unwrap_or("?"));
        out!("{}", table(&upstreams, &exposed));
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facade_definitions_fit_in_1200_tokens_in_both_styles() {
        let bpe = tiktoken_rs::o200k_base().unwrap();
        for sep in [".", "__", "_"] {
            let defs = mcpb_daemon::tools::definitions(
                mcpb_daemon::tools::Naming::broker(sep),
                Some(100_000),
                false,
            );
            let s = size(&defs, &bpe);
            assert!(s.tokens <= 1200, "{sep}: {} tokens", s.tokens);
            assert_eq!(s.tools, 7);
            // The code-execution tools, in profiles that enable them, stay small as well.
            let with_exec = size(
                &mcpb_daemon::tools::definitions(
                    mcpb_daemon::tools::Naming::broker(sep),
                    Some(100_000),
                    true,
                ),
                &bpe,
            );
            assert_eq!(with_exec.tools, 12);
            assert!(
                with_exec.tokens - s.tokens <= 700,
                "{sep}: exec tools {} tokens",
                with_exec.tokens - s.tokens
            );
        }
        // The MCP Exec Broker's vocabulary, exec included, costs no more.
        let exec_broker = mcpb_daemon::tools::Naming {
            vocabulary: mcpb_config::Vocabulary::ExecBroker,
            sep: ".",
        };
        let s = size(
            &mcpb_daemon::tools::definitions(exec_broker, Some(100_000), true),
            &bpe,
        );
        assert_eq!(s.tools, 7);
        assert!(s.tokens <= 1200, "exec_broker: {} tokens", s.tokens);
    }

    #[test]
    fn table_layout() {
        let ups = vec![(
            "fs".to_string(),
            Size {
                tools: 14,
                bytes: 9000,
                tokens: 2000,
            },
        )];
        let t = table(
            &ups,
            &Size {
                tools: 7,
                bytes: 3000,
                tokens: 800,
            },
        );
        insta::assert_snapshot!(t);
    }
}
