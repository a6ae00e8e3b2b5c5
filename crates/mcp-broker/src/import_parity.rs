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

/// The tool names a stdio server lists, started as its client starts it.
pub(crate) fn list_direct(s: &Server) -> Result<BTreeSet<String>, String> {
    list_definitions(s).map(|tools| {
        tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect()
    })
}

/// The tool definitions a stdio server lists, started as its client starts it, with the
/// client's own include / exclude lists applied: what the client shows its model.
pub(crate) fn list_definitions(s: &Server) -> Result<Vec<Value>, String> {
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
    let result = talk(&mut child);
    let _ = child.kill();
    let _ = child.wait();
    result.map(|tools| tools.into_iter().filter(|t| client_shows(s, t)).collect())
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
) -> Result<BTreeSet<String>, String> {
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
    let result = talk(&mut child);
    let _ = child.kill();
    let _ = child.wait();
    if let Some(cg) = cgroup {
        cg.remove();
    }
    result.map(|tools| {
        tools
            .iter()
            .filter(|t| client_shows(s, t))
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect()
    })
}

/// Initializes a started server over its stdio and lists its tools, every page.
pub(crate) fn talk(child: &mut std::process::Child) -> Result<Vec<Value>, String> {
    talk_then_call(child, None).map(|(tools, _)| tools)
}

/// What a call answered: its result, or the error it answered.
pub(crate) type Called = Result<Value, String>;

/// `talk`, then one `tools/call` of `call` (name, arguments) when given: its result, or the
/// error it answered.
pub(crate) fn talk_then_call(
    child: &mut std::process::Child,
    call: Option<(&str, &Value)>,
) -> Result<(Vec<Value>, Option<Called>), String> {
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
    let called = call.map(|(name, arguments)| {
        let id = 500u64;
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}))?;
        wait(id)
    });
    Ok((tools, called))
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
}

pub(crate) fn run(settings: &Settings, client: &str, json_out: bool) -> ExitCode {
    let Some(c) = Client::parse(client) else {
        return fail(&format!("mcp-broker: no client named {client:?}"), &[]);
    };
    let record: Value = match crate::client_cmd::read_record(settings, c) {
        Some(r) => r,
        None => {
            return fail(
                &format!("mcp-broker: {client} has no import to compare"),
                &[&format!(
                    "`mcp-broker client import --client {client}` moves its servers first"
                )],
            );
        }
    };
    let profile = record["profile"].as_str().unwrap_or("default").to_string();
    let backups_root = settings.runtime.backups_dir();
    // (file, backup name, text): a server is read from the backup its import took.
    let texts: Vec<(PathBuf, String, String)> = record["backups"]
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
        .collect();
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
    // The old servers are listed side by side: each may take a while to start. A project's
    // server is the repository's command: it runs only in the sandbox, as its upstream.
    let before: Vec<Result<BTreeSet<String>, String>> = std::thread::scope(|sc| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(_, _, upstream, server, project)| {
                sc.spawn(move || match (server, project) {
                    (Some(s), true) => match settings.upstreams.get(upstream) {
                        Some(u) => list_sandboxed(settings, s, u),
                        None => Err("its upstream is no longer in the config".into()),
                    },
                    (Some(s), false) => list_direct(s),
                    (None, _) => Err("not in the backup any more".into()),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("the lister failed".into())))
            .collect()
    });
    if let Err(e) = connect_or_start_for_cli(settings) {
        return fail(&format!("mcp-broker: cannot reach the daemon: {e:#}"), &[]);
    }
    let reach = match crate::parity_cmd::reach(settings, &profile) {
        Ok(r) => r,
        Err(e) => return fail(&format!("mcp-broker: profile {profile}: {e}"), &[]),
    };
    let rows: Vec<Row> = jobs
        .into_iter()
        .zip(before)
        .map(|((name, scope, upstream, _, _), before)| Row {
            after: reach.tools.get(&upstream).cloned(),
            unlisted: reach.unlisted.get(&upstream).cloned(),
            name,
            scope,
            upstream,
            before,
        })
        .collect();
    report(&rows, &profile, client, json_out)
}

fn report(rows: &[Row], profile: &str, client: &str, json_out: bool) -> ExitCode {
    let empty = BTreeSet::new();
    let (mut lost, mut added, mut unchecked, mut broken) = (0usize, 0usize, 0usize, 0usize);
    let mut table = Vec::new();
    let mut items = Vec::new();
    for r in rows {
        let after = r.after.as_ref().unwrap_or(&empty);
        let (before_n, missing, extra, note) = match (&r.before, &r.unlisted) {
            (_, Some(e)) => {
                broken += 1;
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
                lost += missing.len();
                added += extra.len();
                (b.len().to_string(), missing, extra, String::new())
            }
            (Err(e), None) => {
                unchecked += 1;
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
        items.push(
            json!({"server": r.name, "scope": r.scope, "upstream": r.upstream,
            "before": r.before.as_ref().ok(), "after": after, "missing": missing,
            "added": extra, "error": r.before.as_ref().err(), "unlisted": r.unlisted}),
        );
        table.push(vec![
            r.name.clone(),
            r.scope.clone(),
            r.upstream.clone(),
            before_n,
            after.len().to_string(),
            diff.join("; "),
        ]);
    }
    if json_out {
        outln!(
            "{}",
            json!({"client": client, "profile": profile, "servers": items, "missing": lost,
                "added": added, "not_compared": unchecked, "unlisted": broken})
        );
    } else {
        out!(
            "{}",
            crate::commands::table(
                &["SERVER", "SCOPE", "UPSTREAM", "BEFORE", "NOW", "DIFFERENCE"],
                table
            )
        );
    }
    if lost + added + broken > 0 {
        errln!(
            "mcp-broker: through profile {profile}, {client} misses {lost} tool(s) its servers had, gains {added} it did not have, and {broken} upstream(s) cannot be listed"
        );
        errln!(
            "hint: `mcp-broker status` and `mcp-broker logs UPSTREAM` say why an upstream lists fewer; tools_allow / tools_deny in broker.yaml hide tools"
        );
        return ExitCode::FAILURE;
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
        outln!("{client}: through profile {profile} it reaches exactly the tools its servers had");
    }
    ExitCode::SUCCESS
}
