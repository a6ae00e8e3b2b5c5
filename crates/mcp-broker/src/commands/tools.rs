//! `mcp-broker tools search|describe|call`: the facade for people and scripts. Each command opens
//! an ordinary session with the chosen profile and calls the same broker_* tool a model would,
//! so the answers, the policy and the errors are the ones a client gets.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use mcpb_config::Settings;
use mcpb_daemon::tools::BrokerTool;
use mcpb_daemon::tools::search_tools::SearchTools;
use mcpb_protocol::HelloKind;
use serde_json::{Value, json};

use crate::cli::{ToolsArgs, ToolsCommand};
use crate::daemon_client::{connect_or_start_for_cli, handshake};
use crate::fail;

/// One facade call in a fresh session; returns the `tools/call` result.
pub(crate) fn call_facade(
    settings: &Settings,
    profile: Option<&str>,
    tool: &'static str,
    arguments: Value,
) -> anyhow::Result<Value> {
    call_facade_as(settings, profile, "mcp-broker-cli", tool, arguments)
}

/// `call_facade` in a session of client `client` (the audit log's and the usage counts').
pub(crate) fn call_facade_as(
    settings: &Settings,
    profile: Option<&str>,
    client: &str,
    tool: &'static str,
    arguments: Value,
) -> anyhow::Result<Value> {
    let stream = connect_or_start_for_cli(settings)?;
    let kind = HelloKind::Session {
        profile: profile.map(str::to_string),
        client: Some(client.into()),
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
        "params": {"name": format!("broker{sep}{tool}"), "arguments": arguments}});
    for msg in [
        init,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call,
    ] {
        writeln!(w, "{msg}").context("the daemon closed the session")?;
    }
    // A wait over ~300 ms (an upstream starting) is said once, so it is not silence.
    let (answered, waiting) = std::sync::mpsc::channel::<()>();
    let sayer = std::thread::spawn(move || {
        if waiting
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err_and(|e| e == std::sync::mpsc::RecvTimeoutError::Timeout)
        {
            errln!("mcp-broker: waiting for the answer (an upstream may be starting)...");
        }
    });
    let _said = SayOnDrop(Some(answered), Some(sayer));
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

/// Ends the "waiting" notice when the answer came (or the call failed).
struct SayOnDrop(
    Option<std::sync::mpsc::Sender<()>>,
    Option<std::thread::JoinHandle<()>>,
);

impl Drop for SayOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}

/// The data of a result: its structured content, else its text read as JSON, else the text.
fn data(result: &Value) -> Value {
    if let Some(v) = result.get("structuredContent").filter(|v| !v.is_null()) {
        return v.clone();
    }
    let texts: Vec<&str> = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["text"].as_str())
        .collect();
    match texts.as_slice() {
        [one] => serde_json::from_str(one).unwrap_or_else(|_| Value::String((*one).to_string())),
        _ => result["content"].clone(),
    }
}

/// Search results for people: a table, and what to run next.
fn print_search(found: &Value) {
    let rows: Vec<Vec<String>> = found["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or("").to_string();
            let mut description = text("description");
            mcpb_facade::projection::cut_chars(&mut description, 100);
            vec![text("name"), text("server"), description]
        })
        .collect();
    // An upstream that could not start is not searched: said, so "no match" is not the end.
    for u in found["unavailable"].as_array().into_iter().flatten() {
        let server = u["server"].as_str().unwrap_or("?");
        errln!(
            "mcp-broker: {server} is left out: {}",
            u["error"].as_str().unwrap_or("it could not start")
        );
        errln!("hint: `mcp-broker logs {server}` says why");
    }
    if rows.is_empty() {
        errln!("no tool matches; try other words");
        return;
    }
    out!(
        "{}",
        crate::commands::render::table(&["TOOL", "SERVER", "DESCRIPTION"], rows)
    );
    errln!(
        "hint: `mcp-broker tools describe NAME` shows one's arguments; `mcp-broker tools call NAME --args '{{...}}'` runs it"
    );
}

/// For the operator, an "unknown" tool that is in fact quarantined says so (a model is told
/// nothing of it).
fn quarantine_hint(settings: &Settings, message: &str) {
    let Some(name) = message
        .split("Unknown tool: ")
        .nth(1)
        .map(|n| n.split_whitespace().next().unwrap_or(n))
    else {
        return;
    };
    let Ok(Some(reply)) =
        crate::daemon_client::admin(settings, mcpb_protocol::AdminCommand::Status)
    else {
        return;
    };
    let data = reply.data.unwrap_or_default();
    for q in data["catalog"]["quarantined"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if q["tool"].as_str() == Some(name) {
            errln!(
                "mcp-broker: {name} is quarantined ({}), so clients do not see it",
                q["reason"].as_str().unwrap_or("")
            );
            errln!(
                "hint: review it with `mcp-broker pins list`; `mcp-broker pins approve {name}` lets it through"
            );
        }
    }
}

/// Prints a result: with `--json` its data (once), else for people. A tool's error goes to
/// stderr and the exit code says it failed.
pub(crate) fn print(
    settings: &Settings,
    tool: &'static str,
    result: &Value,
    json: bool,
) -> ExitCode {
    let failed = result["isError"] == true;
    let value = data(result);
    if failed {
        let text = match &value {
            Value::String(t) => t.clone(),
            v @ Value::Null
            | v @ Value::Bool(_)
            | v @ Value::Number(_)
            | v @ Value::Array(_)
            | v @ Value::Object(_) => v.to_string(),
        };
        errln!("mcp-broker: {text}");
        quarantine_hint(settings, &text);
        return ExitCode::FAILURE;
    }
    match (json, tool, &value) {
        (true, _, v) => outln!("{v:#}"),
        (false, SearchTools::VERB, v) if v.get("results").is_some() => print_search(v),
        (false, _, Value::String(t)) => outln!("{t}"),
        (false, _, v) => outln!("{v:#}"),
    }
    ExitCode::SUCCESS
}

pub(crate) fn run_tool(
    settings: &Settings,
    profile: Option<&str>,
    tool: &'static str,
    arguments: Value,
    json: bool,
) -> ExitCode {
    match call_facade(settings, profile, tool, arguments) {
        Ok(r) => print(settings, tool, &r, json),
        Err(e) => {
            let text = format!("{e:#}");
            let code = fail(&format!("mcp-broker: {text}"), &[]);
            quarantine_hint(settings, &text);
            code
        }
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

/// `mcp-broker tools search|describe|call`, sent through the facade.
pub(crate) fn run(settings: &Settings, a: ToolsArgs) -> ExitCode {
    let (profile, json) = (a.profile.as_deref(), a.json);
    use mcpb_daemon::tools::{BrokerTool, call_tool, describe_tool, search_tools};
    // The same argument structs the daemon parses a model's calls into.
    let (tool, arguments) = match a.command {
        ToolsCommand::Search {
            query,
            server,
            limit,
        } => (
            search_tools::SearchTools::VERB,
            serde_json::to_value(search_tools::Args {
                query,
                server,
                limit,
                kind: None,
            }),
        ),
        ToolsCommand::Describe { names } => (
            describe_tool::DescribeTool::VERB,
            serde_json::to_value(describe_tool::Args { name: None, names }),
        ),
        ToolsCommand::Call {
            name,
            args,
            projection,
        } => {
            let arguments = match raw_json_arg("args", args.as_deref()) {
                Ok(a) => a,
                Err(code) => return code,
            };
            let projection = match json_arg("projection", projection.as_deref()) {
                Ok(p) => p,
                Err(code) => return code,
            };
            // `null` means no projection, as it does in a model's call.
            let projection = projection.filter(|p| !p.is_null());
            let projection = match projection.map(serde_json::from_value).transpose() {
                Ok(p) => p,
                Err(e) => {
                    return fail(
                        &format!("mcp-broker: projection is not valid: {e}"),
                        &[
                            "it takes paths, max_array_items and max_chars, e.g. --projection '{\"paths\": [\"[].name\"]}'",
                        ],
                    );
                }
            };
            (
                call_tool::CallTool::VERB,
                serde_json::to_value(call_tool::Args {
                    name,
                    arguments,
                    projection,
                }),
            )
        }
    };
    match arguments {
        Ok(a) => run_tool(settings, profile, tool, a, json),
        Err(e) => fail(
            &format!("mcp-broker: cannot encode the arguments: {e}"),
            &[],
        ),
    }
}
