//! `mcp-broker profile validate P`: each upstream's `smoke` probe run through the same view a
//! client of profile P gets (search, then describe, then a call when `call: true`), as a
//! pass/fail table. The exit code says whether every probe passed.

pub(crate) mod acceptance;
pub(crate) mod parity;
pub(crate) mod view;

use std::process::ExitCode;

use mcpb_config::Settings;
use mcpb_daemon::tools::{BrokerTool, call_tool, describe_tool, search_tools, status};
use serde_json::Value;

use crate::cli::ProfileCommand;
use crate::commands::tools::call_facade;
use crate::fail;
use crate::settings::with_settings;

/// One step's outcome: passed, and what it saw.
fn step(
    result: anyhow::Result<Value>,
    judge: impl Fn(&Value) -> Result<String, String>,
) -> (bool, String) {
    match result {
        Err(e) => (false, format!("{e:#}")),
        Ok(r) if r["isError"] == true => {
            let text = r["content"][0]["text"]
                .as_str()
                .unwrap_or("the tool failed")
                .to_string();
            (false, text)
        }
        Ok(r) => match judge(&r) {
            Ok(seen) => (true, seen),
            Err(why) => (false, why),
        },
    }
}

/// The probe's tool as this profile exposes it, written upstream-local (`read_graph`) or as
/// exposed with a dot or two underscores (`memory.read_graph`). One underscore is not read as
/// a separator: `git_status` may be the tool's own name.
fn probe_tool(upstream: &str, tool: &str, sep: &str, namespace: bool) -> String {
    let local = crate::commands::config::probes::local_name(upstream, tool);
    if namespace {
        format!("{upstream}{sep}{local}")
    } else {
        local.to_string()
    }
}

fn data(r: &Value) -> Value {
    r.get("structuredContent").cloned().unwrap_or(Value::Null)
}

/// The rows of `profile validate`'s table, and how many steps failed.
#[derive(Default)]
struct Steps {
    rows: Vec<Vec<String>>,
    failed: usize,
}

impl Steps {
    fn row(&mut self, up: &str, what: &str, (ok, detail): (bool, String)) {
        if !ok {
            self.failed += 1;
        }
        let mut detail = crate::printable(&detail);
        mcpb_facade::projection::cut_chars(&mut detail, 120);
        let result = match (ok, what) {
            (_, "-") => "WARN",
            (true, _) => "pass",
            (false, _) => "FAIL",
        };
        self.rows.push(vec![
            up.to_string(),
            what.to_string(),
            result.into(),
            detail,
        ]);
    }
}

/// Whether a describe's answer says its tool may change something.
fn described_mutating(r: &Value) -> bool {
    data(r)["tools"][0]["mutating"] == true
}

/// Whether profile `profile`'s view describes `tool` as one that may change something (what
/// makes `profile validate` refuse a probe's call without `allow_mutating`).
pub(crate) fn mutating(settings: &Settings, profile: &str, tool: &str) -> bool {
    Probe { settings, profile }
        .describe(tool)
        .is_ok_and(|r| described_mutating(&r))
}

/// The profile being validated, as each step calls it.
struct Probe<'a> {
    settings: &'a Settings,
    profile: &'a str,
}

impl Probe<'_> {
    fn call(&self, verb: &'static str, args: Value) -> anyhow::Result<Value> {
        call_facade(self.settings, Some(self.profile), verb, args)
    }

    /// The profile's describe of one tool, as a model would ask it.
    fn describe(&self, tool: &str) -> anyhow::Result<Value> {
        let args = describe_tool::Args {
            name: None,
            names: vec![tool.to_string()],
        };
        self.call(
            describe_tool::DescribeTool::VERB,
            serde_json::to_value(args).unwrap_or_default(),
        )
    }
}

/// `mcp-broker profile validate P`: each upstream's status, then its smoke probe (search,
/// describe, call) through P's view, as a model would make them.
pub(crate) fn validate(settings: &Settings, profile: &str) -> ExitCode {
    let Some(p) = settings.profiles.get(profile) else {
        let names: Vec<&str> = settings.profiles.keys().map(String::as_str).collect();
        return fail(
            &format!("mcp-broker: no profile named {profile:?}"),
            &[&format!("profiles: {}", names.join(", "))],
        );
    };
    let probe = Probe { settings, profile };
    let mut steps = Steps::default();
    // The status step first, as the design's validation does: what broker_status says of
    // each upstream (it starts nothing).
    let statuses = probe.call(status::Status::VERB, serde_json::json!({}));
    for name in &p.upstreams {
        steps.row(name, "status", status_step(&statuses, name));
        let Some(up) = settings.upstreams.get(name) else {
            continue;
        };
        let Some(smoke) = &up.smoke else {
            steps.row(
                name,
                "-",
                (true, "no smoke probe in the config: nothing checked".into()),
            );
            continue;
        };
        let sep = p.broker_tool_name_style.separator();
        let exposed = smoke
            .tool
            .as_ref()
            .map(|t| probe_tool(name, t, sep, p.namespace));
        if let Some(q) = &smoke.query {
            steps.row(
                name,
                "search",
                search_step(&probe, name, q, exposed.as_deref()),
            );
        }
        if let Some(tool) = exposed {
            tool_steps(&probe, &mut steps, name, smoke, &tool);
        }
    }
    out!(
        "{}",
        crate::commands::render::table(&["UPSTREAM", "STEP", "RESULT", "DETAIL"], steps.rows)
    );
    if steps.failed > 0 {
        errln!("{} probe step(s) failed", steps.failed);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// What broker_status said of upstream `name`.
fn status_step(statuses: &anyhow::Result<Value>, name: &str) -> (bool, String) {
    let seen = statuses.as_ref().map(|r| {
        data(r)["servers"]
            .as_array()
            .and_then(|all| all.iter().find(|u| u["name"] == name).cloned())
            .unwrap_or(Value::Null)
    });
    match seen {
        Err(e) => (false, format!("{e:#}")),
        Ok(u) if u["state"] == "failed" => (
            false,
            format!(
                "failed: {}",
                u["last_error"].as_str().unwrap_or("no reason given")
            ),
        ),
        Ok(u) => (true, u["state"].as_str().unwrap_or("unknown").to_string()),
    }
}

/// The smoke query searched in the upstream's tools: results, and the probe's tool among them.
fn search_step(probe: &Probe<'_>, name: &str, query: &str, want: Option<&str>) -> (bool, String) {
    let args = search_tools::Args {
        query: query.to_string(),
        server: Some(name.to_string()),
        limit: Some(10),
        kind: None,
    };
    let got = probe.call(
        search_tools::SearchTools::VERB,
        serde_json::to_value(args).unwrap_or_default(),
    );
    step(got, |r| {
        let names: Vec<String> = data(r)["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x["name"].as_str().map(str::to_string))
            .collect();
        match want {
            Some(w) if !names.iter().any(|n| n == w) => {
                Err(format!("{w} not among {}", names.join(", ")))
            }
            _ if names.is_empty() => Err("no results".into()),
            _ => Ok(format!("{} result(s), first {}", names.len(), names[0])),
        }
    })
}

/// The probe's tool described, then called when the probe asks (a mutating one only when
/// it says so on purpose).
fn tool_steps(
    probe: &Probe<'_>,
    steps: &mut Steps,
    name: &str,
    smoke: &mcpb_config::SmokeSettings,
    tool: &str,
) {
    let got = probe.describe(tool);
    let mutating = got.as_ref().is_ok_and(described_mutating);
    steps.row(
        name,
        "describe",
        step(got, |_| Ok(format!("{tool} described"))),
    );
    if !smoke.call {
        return;
    }
    if mutating && !smoke.allow_mutating {
        steps.row(
            name,
            "call",
            (
                false,
                format!(
                    "not called: {tool} may change something; set smoke.allow_mutating: true to call it on purpose"
                ),
            ),
        );
        return;
    }
    let arguments = smoke
        .arguments
        .as_ref()
        .and_then(|a| serde_json::value::to_raw_value(a).ok());
    let args = call_tool::Args {
        name: tool.to_string(),
        arguments,
        projection: None,
    };
    let got = probe.call(
        call_tool::CallTool::VERB,
        serde_json::to_value(args).unwrap_or_default(),
    );
    steps.row(name, "call", step(got, |_| Ok(format!("{tool} answered"))));
}

/// `mcp-broker profile …`.
pub(crate) fn run(command: ProfileCommand, config: Option<&std::path::Path>) -> ExitCode {
    match command {
        ProfileCommand::Validate { profile } => with_settings(config, |s| validate(s, &profile)),
        ProfileCommand::Set { profile, view } => view::set(config, &profile, view.ask()),
        ProfileCommand::Acceptance {
            profile,
            client,
            server,
        } => with_settings(config, |s| {
            acceptance::acceptance(s, &profile, client.as_deref(), &server)
        }),
        ProfileCommand::Snippet {
            profile,
            key,
            server,
            client,
            typed,
        } => with_settings(config, |s| {
            snippet(s, config, &profile, &key, &server, client.as_deref(), typed)
        }),
    }
}

/// `profile snippet`: the entry `client apply` would write, for a client it does not know.
fn snippet(
    settings: &Settings,
    config: Option<&std::path::Path>,
    profile: &str,
    key: &str,
    server: &str,
    client: Option<&str>,
    typed: bool,
) -> ExitCode {
    if !settings.profiles.contains_key(profile) {
        let known: Vec<&str> = settings.profiles.keys().map(String::as_str).collect();
        return fail(
            &format!("mcp-broker: no profile named {profile}"),
            &[&format!("the config has: {}", known.join(", "))],
        );
    }
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| std::path::PathBuf::from("mcp-broker"));
    let mut args = vec!["stdio".to_string()];
    if let Some(c) = client {
        args.extend(["--client".to_string(), c.to_string()]);
    }
    args.extend(["--profile".to_string(), profile.to_string()]);
    let mut entry = serde_json::json!({"command": exe, "args": args});
    if typed {
        entry["type"] = "stdio".into();
    }
    let env = crate::commands::client::files::entry_env(config);
    if !env.is_empty() {
        entry["env"] = env
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    let doc = serde_json::json!({ key: { server: entry } });
    outln!(
        "{}",
        serde_json::to_string_pretty(&doc).unwrap_or_else(|_| doc.to_string())
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_tools_are_read_in_either_form() {
        assert_eq!(
            super::probe_tool("memory", "read_graph", ".", true),
            "memory.read_graph"
        );
        assert_eq!(
            super::probe_tool("memory", "memory.read_graph", ".", true),
            "memory.read_graph"
        );
        assert_eq!(
            super::probe_tool("memory", "memory__read_graph", "_", true),
            "memory_read_graph"
        );
        assert_eq!(
            super::probe_tool("git", "git_status", ".", true),
            "git.git_status"
        );
        assert_eq!(
            super::probe_tool("memory", "memory.read_graph", ".", false),
            "read_graph"
        );
    }
}
