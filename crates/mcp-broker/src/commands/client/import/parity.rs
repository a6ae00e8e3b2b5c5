//! `mcp-broker client parity --client C`: after an import, whether the client reaches through
//! the broker every tool its own servers had. The servers are taken from the import's backups
//! (the client's files as they were), started here as the client started them, and listed;
//! the client's profile is asked what it reaches now. Compared by server and tool name, so the
//! broker's naming does not matter. The exit code says whether anything is missing.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mcpb_clients::{Backups, Client, Place, Scope, Server};
use mcpb_config::Settings;
use serde_json::{Value, json};

use crate::daemon_client::connect_or_start_for_cli;
use crate::fail;

/// How long one of the client's own servers gets to start and list its tools (`npx -y`
/// may fetch a package first).
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// A value of the client's file as the client would pass it: `${VAR}` / `${env:VAR}` from
/// this environment.
fn expanded(v: &str) -> String {
    let name = v
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .map(|r| r.strip_prefix("env:").unwrap_or(r));
    match name {
        Some(n) => std::env::var(n).unwrap_or_default(),
        None => v.to_string(),
    }
}

/// The tool names a stdio server lists, started as its client starts it, and the call
/// `choose` picks from them.
pub(crate) fn list_direct(
    s: &Server,
    choose: impl FnOnce(&[Value]) -> Option<(String, Value)>,
) -> Result<Listed, String> {
    list_and_try(s, choose).map(|(tools, tried)| (names(&tools), tried))
}

/// The tool definitions a stdio server lists, started as its client starts it, with the
/// client's own include / exclude lists applied: what the client shows its model.
pub(crate) fn list_definitions(s: &Server) -> Result<Vec<Value>, String> {
    list_and_try(s, |_| None).map(|(tools, _)| tools)
}

/// `list_definitions`, then one call `choose` picks from the listed tools.
fn list_and_try(
    s: &Server,
    choose: impl FnOnce(&[Value]) -> Option<(String, Value)>,
) -> Result<(Vec<Value>, Option<Tried>), String> {
    let Some(cmd) = &s.command else {
        return Err("a remote server; not compared".into());
    };
    let mut c = Command::new(cmd);
    c.args(&s.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in &s.env {
        c.env(k, expanded(v));
    }
    if let Some(d) = &s.cwd {
        c.current_dir(d);
    }
    let mut child = c.spawn().map_err(|e| format!("cannot start {cmd}: {e}"))?;
    let result = talk_then(&mut child, |tools| choose(&shown(s, tools)));
    let _ = child.kill();
    let _ = child.wait();
    result.map(|(tools, tried)| {
        (
            tools.into_iter().filter(|t| client_shows(s, t)).collect(),
            tried,
        )
    })
}

/// What a server listed before the import (its tool names) and the call it was tried with.
type Listed = (BTreeSet<String>, Option<Tried>);

fn names(tools: &[Value]) -> BTreeSet<String> {
    tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// The tools of `s` its client shows its model.
fn shown(s: &Server, tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .filter(|t| client_shows(s, t))
        .cloned()
        .collect()
}

/// Whether the client shows its model tool `t` of server `s` (its include / exclude lists).
fn client_shows(s: &Server, t: &Value) -> bool {
    let n = t["name"].as_str().unwrap_or_default().to_string();
    (s.tools_allow.is_empty() || s.tools_allow.contains(&n)) && !s.tools_deny.contains(&n)
}

/// The tool names a project's server `s` lists as its client shows them, started the one way
/// the broker ever starts a repository's command: as its imported upstream `u`, in the sandbox
/// (its own policy, or the standard one), never with the user's rights.
pub(crate) fn list_sandboxed(
    settings: &Settings,
    s: &Server,
    u: &mcpb_config::UpstreamSettings,
    choose: impl FnOnce(&[Value]) -> Option<(String, Value)>,
) -> Result<Listed, String> {
    let policy = u.sandbox.clone().unwrap_or_default();
    let root = &settings.runtime.root;
    let (exe, args, env, cgroup) =
        mcpb_upstream::sandboxed::start_line(u, &policy, &settings.broker.env_passthrough, root)
            .map_err(|e| e.to_string())?;
    let mut c = Command::new(exe);
    c.args(args)
        .env_clear()
        .envs(&env)
        .envs(mcpb_sandbox::coverage::profile_env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(d) = &u.cwd {
        c.current_dir(d);
    }
    let mut child = c
        .spawn()
        .map_err(|e| format!("cannot start it in the sandbox: {e}"))?;
    let result = talk_then(&mut child, |tools| choose(&shown(s, tools)));
    let _ = child.kill();
    let _ = child.wait();
    if let Some(cg) = cgroup {
        cg.remove();
    }
    result.map(|(tools, tried)| {
        let shown: Vec<Value> = tools.into_iter().filter(|t| client_shows(s, t)).collect();
        (names(&shown), tried)
    })
}

/// What a call answered: its result, or the error it answered.
pub(crate) type Called = Result<Value, String>;

/// Initializes a started server over its stdio, lists its tools (every page), then makes one
/// `tools/call` of `call` (name, arguments) when given: its result, or the
/// error it answered.
pub(crate) fn talk_then_call(
    child: &mut std::process::Child,
    call: Option<(&str, &Value)>,
) -> Result<(Vec<Value>, Option<Called>), String> {
    let call = call.map(|(n, a)| (n.to_string(), a.clone()));
    talk_then(child, |_| call).map(|(tools, called)| (tools, called.map(|(_, _, c)| c)))
}

/// A call `choose` picks from the listed tools: the tool, its arguments and what it answered.
pub(crate) type Tried = (String, Value, Called);

/// `talk`, then one `tools/call` of what `choose` picks from the listed tools, if anything.
fn talk_then(
    child: &mut std::process::Child,
    choose: impl FnOnce(&[Value]) -> Option<(String, Value)>,
) -> Result<(Vec<Value>, Option<Tried>), String> {
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("no pipes to the server".into());
    };
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + LIST_TIMEOUT;
    let mut send = |v: Value| -> Result<(), String> {
        writeln!(stdin, "{v}").map_err(|e| format!("the server stopped reading: {e}"))
    };
    let wait = |id: u64| -> Result<Value, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .map_err(|_| "no answer in time, or the server exited".to_string())?;
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] == json!(id) {
                if let Some(e) = v.get("error") {
                    return Err(format!("it answered with an error: {e}"));
                }
                return Ok(v["result"].clone());
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "mcp-broker-parity", "version": env!("CARGO_PKG_VERSION")}}}),
    )?;
    wait(1)?;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for id in 2..200u64 {
        let mut params = json!({});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}))?;
        let r = wait(id)?;
        tools.extend(r["tools"].as_array().into_iter().flatten().cloned());
        match r["nextCursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => break,
        }
    }
    let called = choose(&tools).map(|(name, arguments)| {
        let id = 500u64;
        let answer = send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}))
        .and_then(|()| wait(id));
        (name, arguments, answer)
    });
    Ok((tools, called))
}

/// The call that shows a server works, for servers compared after an import: its upstream's
/// smoke probe when that calls a tool, else the first tool (list_*, get_*, read_* first) that
/// says it is read-only and takes no required argument. A tool that does not say it is
/// read-only is never tried: the call could change something.
pub(crate) fn probe_call(
    smoke: Option<&mcpb_config::SmokeSettings>,
    upstream: &str,
    tools: &[Value],
) -> Option<(String, Value)> {
    let read_only = |t: &&Value| t["annotations"]["readOnlyHint"] == json!(true);
    if let Some(s) = smoke.filter(|s| s.call && !s.allow_mutating)
        && let Some(tool) = &s.tool
    {
        let local = crate::commands::config::probes::local_name(upstream, tool);
        if tools.iter().filter(read_only).any(|t| t["name"] == local) {
            return Some((
                local.to_string(),
                s.arguments.clone().unwrap_or_else(|| json!({})),
            ));
        }
    }
    let free = |t: &&Value| {
        t["inputSchema"]["required"]
            .as_array()
            .is_none_or(Vec::is_empty)
    };
    let mut candidates: Vec<&Value> = tools.iter().filter(read_only).filter(free).collect();
    let rank = |t: &Value| {
        let n = t["name"].as_str().unwrap_or_default();
        let plain = ["list", "get", "read"].iter().any(|p| n.starts_with(p));
        (!plain, n.to_string())
    };
    candidates.sort_by_key(|t| rank(t));
    candidates
        .first()
        .and_then(|t| t["name"].as_str())
        .map(|n| (n.to_string(), json!({})))
}

/// How a call went, in a word that two answers of the same server share whatever their
/// content (a time, a count): `ok`, or the error (a tool error's first line).
pub(crate) fn outcome(c: &Called) -> String {
    match c {
        Ok(r) if r["isError"] == json!(true) => {
            let said = r["content"][0]["text"].as_str().unwrap_or("");
            format!("tool error: {}", said.lines().next().unwrap_or(""))
        }
        Ok(_) => "ok".into(),
        Err(e) => e.clone(),
    }
}

/// One server of the import's record with its tools before and after.
struct Row {
    name: String,
    scope: String,
    upstream: String,
    before: Result<BTreeSet<String>, String>,
    after: Option<BTreeSet<String>>,
    /// Why the daemon could not list the upstream now (its known list is not proof).
    unlisted: Option<String>,
    /// The read-only call it was tried with: the tool, how it went directly, through the
    /// broker.
    call: Option<(String, String, String)>,
}

/// One moved server to compare: its name, scope label, upstream, its definition as the
/// import's backup holds it, and whether it is a project's (run only in the sandbox).
type Job = (String, String, String, Option<Server>, bool);

/// `mcp-broker client parity --client C`: each server the import moved, listed (and called
/// read-only) as the client started it, against what the client's profile reaches now.
pub(crate) fn run(settings: &Settings, client: &str, json_out: bool) -> ExitCode {
    let Some(c) = Client::parse(client) else {
        return fail(&format!("mcp-broker: no client named {client:?}"), &[]);
    };
    let Some(record) = crate::commands::client::import::record::read_record(settings, c) else {
        return fail(
            &format!("mcp-broker: {client} has no import to compare"),
            &[&format!(
                "`mcp-broker client import --client {client}` moves its servers first"
            )],
        );
    };
    let profile = record["profile"].as_str().unwrap_or("default").to_string();
    let jobs = jobs(c, &record, &backup_texts(settings, c, &record));
    let before = list_before(settings, &jobs);
    if let Err(e) = connect_or_start_for_cli(settings) {
        return fail(&format!("mcp-broker: cannot reach the daemon: {e:#}"), &[]);
    }
    let reach = match crate::commands::profile::parity::reach(settings, &profile) {
        Ok(r) => r,
        Err(e) => return fail(&format!("mcp-broker: profile {profile}: {e}"), &[]),
    };
    let rows: Vec<Row> = jobs
        .into_iter()
        .zip(before)
        .map(|((name, scope, upstream, _, _), before)| {
            let (before, tried) = match before {
                Ok((names, tried)) => (Ok(names), tried),
                Err(e) => (Err(e), None),
            };
            let call = tried.map(|(tool, args, direct)| {
                let now = through_broker(settings, &profile, &reach, &upstream, &tool, args);
                (tool, outcome(&direct), now)
            });
            Row {
                after: reach.tools.get(&upstream).cloned(),
                unlisted: reach.unlisted.get(&upstream).cloned(),
                name,
                scope,
                upstream,
                before,
                call,
            }
        })
        .collect();
    report(&rows, &profile, client, json_out)
}

/// The backups the import took, as (file, backup name, text): a server is read from the
/// backup its import took.
fn backup_texts(settings: &Settings, c: Client, record: &Value) -> Vec<(PathBuf, String, String)> {
    let backups_root = settings.runtime.backups_dir();
    record["backups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| {
            let p = PathBuf::from(b["path"].as_str()?);
            let name = b["backup"].as_str()?;
            let bytes = Backups::new(&backups_root, c, &p).bytes(name)?;
            Some((
                p,
                name.to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ))
        })
        .collect()
}

/// Each server the record names, with its definition from the backup (or, for a file the
/// import left as it was, from the file).
fn jobs(c: Client, record: &Value, texts: &[(PathBuf, String, String)]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for s in record["servers"].as_array().into_iter().flatten() {
        let (Some(name), Some(scope), Some(file), Some(upstream)) = (
            s["name"].as_str(),
            s["scope"].as_str().and_then(Scope::parse),
            s["path"].as_str(),
            s["upstream"].as_str(),
        ) else {
            continue;
        };
        let place = Place {
            client: c,
            scope,
            path: PathBuf::from(file),
            folder: s["folder"].as_str().map(str::to_string),
        };
        let backup = s["backup"].as_str();
        // A file the import left as it was (a project file git tracks) still holds its server.
        let unwritten = || {
            (!texts.iter().any(|(p, _, _)| p == &place.path))
                .then(|| std::fs::read_to_string(&place.path).ok())
                .flatten()
        };
        let server = texts
            .iter()
            .find(|(p, b, _)| p == &place.path && backup.is_none_or(|n| n == b))
            .map(|(_, _, t)| t.clone())
            .or_else(unwritten)
            .and_then(|t| mcpb_clients::servers(&place, &t).ok())
            .and_then(|all| all.into_iter().find(|x| x.name == name));
        jobs.push((
            name.to_string(),
            place.label(),
            upstream.to_string(),
            server,
            scope == Scope::Project,
        ));
    }
    jobs
}

/// The old servers, listed side by side: each may take a while to start. A project's server
/// is the repository's command: it runs only in the sandbox, as its upstream.
fn list_before(settings: &Settings, jobs: &[Job]) -> Vec<Result<Listed, String>> {
    std::thread::scope(|sc| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(_, _, upstream, server, project)| {
                let smoke = settings
                    .upstreams
                    .get(upstream)
                    .and_then(|u| u.smoke.as_ref());
                let choose = move |tools: &[Value]| probe_call(smoke, upstream, tools);
                sc.spawn(move || match (server, project) {
                    (Some(s), true) => match settings.upstreams.get(upstream) {
                        Some(u) => list_sandboxed(settings, s, u, choose),
                        None => Err("its upstream is no longer in the config".into()),
                    },
                    (Some(s), false) => list_direct(s, choose),
                    (None, _) => Err("not in the backup any more".into()),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("the lister failed".into())))
            .collect()
    })
}

/// How the same call goes through the broker, as the client's profile makes it.
fn through_broker(
    settings: &Settings,
    profile: &str,
    reach: &crate::commands::profile::parity::Reach,
    upstream: &str,
    tool: &str,
    arguments: Value,
) -> String {
    let Some(name) = reach.exposed(upstream, tool) else {
        return "not reached through the broker".into();
    };
    let called = crate::commands::tools::call_facade_as(
        settings,
        Some(profile),
        mcpb_protocol::CHECK_CLIENT,
        "call_tool",
        json!({"name": name, "arguments": arguments}),
    )
    .map_err(|e| format!("{e:#}"));
    outcome(&called)
}

/// What the comparison found, counted over every server.
#[derive(Default)]
struct Tally {
    lost: usize,
    added: usize,
    unchecked: usize,
    broken: usize,
    misbehaved: usize,
}

impl Tally {
    /// One server's row of the table and its JSON, counted.
    fn row(&mut self, r: &Row) -> (Vec<String>, Value) {
        let empty = BTreeSet::new();
        let after = r.after.as_ref().unwrap_or(&empty);
        let (before_n, missing, extra, note) = match (&r.before, &r.unlisted) {
            (_, Some(e)) => {
                self.broken += 1;
                (
                    "?".into(),
                    Vec::new(),
                    Vec::new(),
                    format!("the broker cannot list it: {e}"),
                )
            }
            (Ok(b), None) => {
                let missing: Vec<&String> = b.difference(after).collect();
                // Tools the client never had: a filter it kept (excludeTools, disabled_tools)
                // that the broker does not.
                let extra: Vec<&String> = after.difference(b).collect();
                self.lost += missing.len();
                self.added += extra.len();
                (b.len().to_string(), missing, extra, String::new())
            }
            (Err(e), None) => {
                self.unchecked += 1;
                (
                    "?".into(),
                    Vec::new(),
                    Vec::new(),
                    format!("not compared: {e}"),
                )
            }
        };
        let list = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        let mut diff = Vec::new();
        if !missing.is_empty() {
            diff.push(format!("missing {}", list(&missing)));
        }
        if !extra.is_empty() {
            diff.push(format!("added {}", list(&extra)));
        }
        if !note.is_empty() {
            diff.push(format!("({note})"));
        }
        let call = match &r.call {
            Some((tool, direct, now)) if direct == now => format!("{tool}: same ({now})"),
            Some((tool, direct, now)) => {
                self.misbehaved += 1;
                format!("{tool}: {direct} directly, {now} through the broker")
            }
            None => "-".into(),
        };
        let item = json!({"server": r.name, "scope": r.scope, "upstream": r.upstream,
            "before": r.before.as_ref().ok(), "after": after, "missing": missing,
            "added": extra, "error": r.before.as_ref().err(), "unlisted": r.unlisted,
            "call": r.call.as_ref().map(|(t, d, n)| json!({"tool": t, "direct": d, "broker": n}))});
        let row = vec![
            r.name.clone(),
            r.scope.clone(),
            r.upstream.clone(),
            before_n,
            after.len().to_string(),
            diff.join("; "),
            call,
        ];
        (row, item)
    }
}

fn report(rows: &[Row], profile: &str, client: &str, json_out: bool) -> ExitCode {
    let mut t = Tally::default();
    let (table, items): (Vec<_>, Vec<_>) = rows.iter().map(|r| t.row(r)).unzip();
    if json_out {
        outln!(
            "{}",
            json!({"client": client, "profile": profile, "servers": items, "missing": t.lost,
                "added": t.added, "not_compared": t.unchecked, "unlisted": t.broken,
                "calls_differ": t.misbehaved})
        );
    } else {
        let header = [
            "SERVER",
            "SCOPE",
            "UPSTREAM",
            "BEFORE",
            "NOW",
            "DIFFERENCE",
            "CALL",
        ];
        out!("{}", crate::commands::render::table(&header, table));
    }
    verdict(&t, rows, profile, client, json_out)
}

/// What the comparison means for the move, said; failure when the client lost something.
fn verdict(t: &Tally, rows: &[Row], profile: &str, client: &str, json_out: bool) -> ExitCode {
    let Tally {
        lost,
        added,
        unchecked,
        broken,
        misbehaved,
    } = *t;
    if misbehaved > 0 {
        errln!(
            "mcp-broker: through profile {profile}, {misbehaved} of {client}'s servers answer a read-only call differently than directly (see CALL)"
        );
        errln!(
            "hint: `mcp-broker logs UPSTREAM` says why; a sandboxed one: `mcp-broker sandbox check UPSTREAM --call TOOL` shows what was refused"
        );
    }
    if lost + broken + misbehaved > 0 {
        errln!(
            "mcp-broker: through profile {profile}, {client} misses {lost} tool(s) its servers had, gains {added} it did not have, and {broken} upstream(s) cannot be listed"
        );
        errln!(
            "hint: `mcp-broker status` and `mcp-broker logs UPSTREAM` say why an upstream lists fewer; tools_allow / tools_deny in broker.yaml hide tools"
        );
        return ExitCode::FAILURE;
    }
    // More is not less: nothing the client had is lost, so the move stands.
    if added > 0 {
        errln!(
            "mcp-broker: through profile {profile}, {client} also reaches {added} tool(s) its servers did not list to it (a server may list more to a client that can do more, such as sampling or roots; or a filter of the client's; see the table)"
        );
        errln!(
            "hint: tools_deny on the upstream in broker.yaml hides them again, if they should stay hidden"
        );
    }
    // Nothing compared proves nothing: only remote servers (which are not started here) may
    // leave the comparison empty.
    let compared = rows.len() - unchecked - broken;
    let only_remote = rows
        .iter()
        .all(|r| matches!(&r.before, Err(e) if e.starts_with("a remote server")));
    if compared == 0 && !only_remote {
        errln!(
            "mcp-broker: none of {client}'s servers could be compared (see the table); the import's backups may be gone (rolled back?)"
        );
        errln!("hint: `mcp-broker client import --client {client}` again after a rollback");
        return ExitCode::FAILURE;
    }
    if unchecked > 0 {
        errln!(
            "mcp-broker: {unchecked} server(s) could not be compared (see the table); the others match"
        );
    } else if !json_out {
        if added > 0 {
            outln!(
                "{client}: through profile {profile} it reaches every tool its servers had, and {added} more"
            );
        } else {
            outln!(
                "{client}: through profile {profile} it reaches exactly the tools its servers had"
            );
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, read_only: Option<bool>, required: &[&str]) -> Value {
        let mut t = json!({"name": name, "inputSchema": {"type": "object", "required": required}});
        if let Some(r) = read_only {
            t["annotations"] = json!({"readOnlyHint": r});
        }
        t
    }

    #[test]
    fn the_probe_is_a_read_only_tool_without_required_arguments_or_the_smoke_call() {
        let tools = [
            tool("delete_all", Some(false), &[]),
            tool("search", Some(true), &["query"]),
            tool("echo", None, &[]),
            tool("stats", Some(true), &[]),
            tool("read_graph", Some(true), &[]),
        ];
        assert_eq!(
            probe_call(None, "memory", &tools),
            Some(("read_graph".into(), json!({})))
        );
        let smoke = mcpb_config::SmokeSettings {
            query: None,
            tool: Some("memory.search".into()),
            arguments: Some(json!({"query": "x"})),
            call: true,
            allow_mutating: false,
        };
        assert_eq!(
            probe_call(Some(&smoke), "memory", &tools),
            Some(("search".into(), json!({"query": "x"})))
        );
        // Nothing that says it is read-only: nothing is tried.
        assert_eq!(probe_call(None, "m", &tools[..1]), None);
        assert_eq!(probe_call(None, "m", &[tool("echo", None, &[])]), None);
    }

    #[test]
    fn more_tools_than_before_is_said_but_is_no_failure_and_fewer_is() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let row = |after: &[&str]| Row {
            name: "notes".into(),
            scope: "user".into(),
            upstream: "notes".into(),
            before: Ok(set(&["read"])),
            after: Some(set(after)),
            unlisted: None,
            call: None,
        };
        assert_eq!(
            report(&[row(&["read", "crash"])], "p", "gemini", true),
            ExitCode::SUCCESS
        );
        assert_eq!(report(&[row(&[])], "p", "gemini", true), ExitCode::FAILURE);
        let mut differs = row(&["read"]);
        differs.call = Some(("read".into(), "ok".into(), "tool error: EACCES".into()));
        assert_eq!(report(&[differs], "p", "gemini", true), ExitCode::FAILURE);
    }

    #[test]
    fn two_answers_match_by_how_they_went_not_by_their_content() {
        let at = |t: &str| Ok(json!({"content": [{"type": "text", "text": t}]}));
        assert_eq!(outcome(&at("12:00")), outcome(&at("12:01")));
        let failed = Ok(
            json!({"isError": true, "content": [{"type": "text", "text": "EACCES: denied\nmore"}]}),
        );
        assert_eq!(outcome(&failed), "tool error: EACCES: denied");
        assert_ne!(outcome(&at("x")), outcome(&failed));
    }
}
