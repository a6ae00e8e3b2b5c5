//! `mcp-broker tools search|describe|call`: the facade for people and scripts. Each command opens
//! an ordinary session with the chosen profile and calls the same broker_* tool a model would,
//! so the answers, the policy and the errors are the ones a client gets.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use mcpb_config::Settings;
use mcpb_facade::FacadeTool;
use mcpb_protocol::HelloKind;
use serde_json::{Value, json};

use crate::daemon_client::{connect_or_start, handshake};
use crate::fail;

/// One facade call in a fresh session; returns the `tools/call` result.
pub(crate) fn call_facade(
    settings: &Settings,
    profile: Option<&str>,
    tool: FacadeTool,
    arguments: Value,
) -> anyhow::Result<Value> {
    let stream = connect_or_start(settings)?;
    let kind = HelloKind::Session {
        profile: profile.map(str::to_string),
        client: Some("mcp-broker-cli".into()),
        cwd: std::env::current_dir()
            .ok()
            .map(|p| p.display().to_string()),
        pass_fds: false,
        facade: true,
    };
    let (reply, mut reader) = handshake(stream, kind)?;
    if !reply.ok {
        let mut msg = reply.error.unwrap_or_else(|| "session refused".into());
        for h in reply.hints {
            msg.push_str(&format!("\nhint: {h}"));
        }
        bail!(msg);
    }
    let profile_name = reply.profile.unwrap_or_default();
    let sep = settings
        .profiles
        .get(&profile_name)
        .map_or(".", |p| p.broker_tool_name_style.separator());
    let mut w = reader
        .get_ref()
        .try_clone()
        .context("cannot clone the daemon socket")?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "mcp-broker-cli", "version": env!("CARGO_PKG_VERSION")}}});
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool.name(sep), "arguments": arguments}});
    for msg in [
        init,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call,
    ] {
        writeln!(w, "{msg}").context("the daemon closed the session")?;
    }
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            bail!("the daemon closed the session before answering");
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if msg["id"] != 2 {
            continue;
        }
        if let Some(e) = msg.get("error") {
            bail!("{}", e["message"].as_str().unwrap_or("error"));
        }
        return Ok(msg["result"].clone());
    }
}

/// Prints a result: its JSON with `--json`, else its text content.
pub(crate) fn print(result: &Value, json: bool) -> ExitCode {
    if json {
        println!("{result:#}");
    } else {
        for item in result["content"].as_array().into_iter().flatten() {
            match item["text"].as_str() {
                Some(t) => match serde_json::from_str::<Value>(t) {
                    Ok(v) if v.is_object() || v.is_array() => println!("{v:#}"),
                    _ => println!("{t}"),
                },
                None => println!("{item}"),
            }
        }
    }
    if result["isError"] == true {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

pub(crate) fn run(
    settings: &Settings,
    profile: Option<&str>,
    tool: FacadeTool,
    arguments: Value,
    json: bool,
) -> ExitCode {
    match call_facade(settings, profile, tool, arguments) {
        Ok(r) => print(&r, json),
        Err(e) => fail(&format!("mcp-broker: {e:#}"), &[]),
    }
}

/// Parses a JSON argument given on the command line.
pub(crate) fn json_arg(what: &str, text: Option<&str>) -> Result<Option<Value>, ExitCode> {
    match text {
        None => Ok(None),
        Some(t) => serde_json::from_str(t).map(Some).map_err(|e| {
            fail(
                &format!("mcp-broker: {what} is not valid JSON: {e}"),
                &[&format!(
                    "quote it for the shell, e.g. --{what} '{{\"path\": \"/tmp\"}}'"
                )],
            )
        }),
    }
}

/// A JSON argument given on the command line, kept as written (it travels to the tool as is).
pub(crate) fn raw_json_arg(
    what: &str,
    text: Option<&str>,
) -> Result<Option<Box<serde_json::value::RawValue>>, ExitCode> {
    let Some(parsed) = json_arg(what, text)? else {
        return Ok(None);
    };
    serde_json::value::to_raw_value(&parsed)
        .map(Some)
        .map_err(|e| fail(&format!("mcp-broker: {what} cannot be encoded: {e}"), &[]))
}
