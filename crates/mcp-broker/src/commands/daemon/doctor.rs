//! `mcp-broker doctor`: everything that stands between this machine and a working broker,
//! checked without changing anything: the binary, the config and what it needs at run time,
//! the runtime dir, the daemon, leftover processes and each client's entry. Each problem comes
//! with the command that fixes it; the exit code says whether there was one.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_config::{ConfigSource, ResolveContext, Settings};
use mcpb_protocol::AdminCommand;

use crate::daemon_client::admin;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Ok,
    Note,
    Problem,
}

struct Check {
    area: &'static str,
    level: Level,
    detail: String,
    fix: Option<String>,
}

fn check(
    area: &'static str,
    level: Level,
    detail: impl Into<String>,
    fix: Option<String>,
) -> Check {
    Check {
        area,
        level,
        detail: detail.into(),
        fix,
    }
}

fn binary(checks: &mut Vec<Check>) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let on_path = std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::canonicalize(d.join("mcp-broker")).ok() == std::fs::canonicalize(&exe).ok()
        })
    });
    let version = env!("CARGO_PKG_VERSION");
    checks.push(if on_path {
        check(
            "binary",
            Level::Ok,
            format!("{} {version}, on the PATH", exe.display()),
            None,
        )
    } else {
        check(
            "binary",
            Level::Note,
            format!(
                "{} {version}, not on the PATH (client entries use its absolute path)",
                exe.display()
            ),
            Some(format!("ln -s {} ~/.local/bin/mcp-broker", exe.display())),
        )
    });
    Some(exe)
}

fn config(checks: &mut Vec<Check>, explicit: Option<&Path>) -> Option<Settings> {
    let ctx = ResolveContext::from_env();
    let source = mcpb_config::locate(explicit, &ctx);
    match mcpb_config::load(&source, &ctx) {
        Ok(s) => {
            let (level, fix) = match &source {
                ConfigSource::Embedded => (
                    Level::Note,
                    Some("mcp-broker config init   # writes a commented file to edit".to_string()),
                ),
                ConfigSource::File(_) => (Level::Ok, None),
            };
            checks.push(check(
                "config",
                level,
                format!(
                    "{} ({} upstreams, {} profiles)",
                    s.source,
                    s.upstreams.len(),
                    s.profiles.len()
                ),
                fix,
            ));
            // A running daemon for this config is asked which variables it has: what this
            // shell lacks does not matter to it.
            let daemon_env =
                match crate::daemon_client::admin(&s, mcpb_protocol::AdminCommand::Status) {
                    Ok(Some(r)) if r.ok => r.data.and_then(|d| {
                        (d["daemon"]["config"] == s.source.to_string().as_str())
                            .then(|| {
                                serde_json::from_value::<Vec<String>>(
                                    d["daemon"]["env_set"].clone(),
                                )
                                .ok()
                            })
                            .flatten()
                    }),
                    _ => None,
                };
            for f in crate::commands::config::checks::run_time(&s, daemon_env.as_deref()) {
                checks.push(check("config", Level::Problem, f.what, Some(f.hint)));
            }
            Some(s)
        }
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or("").to_string();
            checks.push(check(
                "config",
                Level::Problem,
                first,
                Some("mcp-broker config validate   # every error with its place".into()),
            ));
            // Clients still reach a daemon on the last valid copy: its checks go on with it.
            let (kept, at) = mcpb_config::last_good::recall(&source, &ctx)?;
            checks.push(check(
                "config",
                Level::Note,
                format!(
                    "clients are served the last valid copy of the file ({}) until it is fixed",
                    at.display()
                ),
                None,
            ));
            Some(kept)
        }
    }
}

fn private_dir(checks: &mut Vec<Check>, what: &'static str, dir: &Path) {
    match std::fs::metadata(dir) {
        Err(_) => checks.push(check(
            "runtime",
            Level::Note,
            format!(
                "{what} {} does not exist yet (made on first start)",
                dir.display()
            ),
            None,
        )),
        Ok(m) if m.permissions().mode() & 0o077 != 0 => checks.push(check(
            "runtime",
            Level::Problem,
            format!(
                "{what} {} is open to others (mode {:o})",
                dir.display(),
                m.permissions().mode() & 0o777
            ),
            Some(format!("chmod 700 {}", dir.display())),
        )),
        Ok(_) => checks.push(check(
            "runtime",
            Level::Ok,
            format!("{what} {} is private", dir.display()),
            None,
        )),
    }
}

fn daemon(checks: &mut Vec<Check>, s: &Settings) {
    let reply = match admin(s, AdminCommand::Status) {
        Ok(Some(r)) => r,
        Ok(None) => {
            checks.push(check(
                "daemon",
                Level::Note,
                "not running (the first client or `mcp-broker start` starts it)",
                None,
            ));
            for (pid, root) in crate::daemon_client::lost_daemons() {
                checks.push(check(
                    "daemon",
                    Level::Problem,
                    format!("daemon pid {pid} runs for {root}, whose socket is gone; no client can reach it"),
                    Some(format!("kill {pid}   # stops it and its upstreams")),
                ));
            }
            return;
        }
        Err(e) => {
            checks.push(check(
                "daemon",
                Level::Problem,
                format!(
                    "the socket {} does not answer: {e:#}",
                    s.runtime.socket_path().display()
                ),
                Some("mcp-broker stop; mcp-broker start".into()),
            ));
            return;
        }
    };
    let data = reply.data.unwrap_or_default();
    let d = &data["daemon"];
    let version = d["version"].as_str().unwrap_or("");
    let serving = d["config"].as_str().unwrap_or("");
    checks.push(check(
        "daemon",
        Level::Ok,
        format!("running, pid {}, version {version}", d["pid"]),
        None,
    ));
    if let Some(w) = d["config_warning"].as_str() {
        checks.push(check(
            "daemon",
            Level::Problem,
            w.to_string(),
            Some("fix the file (`mcp-broker config validate`), then `mcp-broker reload`".into()),
        ));
    }
    if version != env!("CARGO_PKG_VERSION") {
        checks.push(check(
            "daemon",
            Level::Problem,
            format!(
                "it runs version {version}, this binary is {}",
                env!("CARGO_PKG_VERSION")
            ),
            Some("mcp-broker restart".into()),
        ));
    }
    if serving != s.source.to_string() {
        checks.push(check(
            "daemon",
            Level::Problem,
            format!("it serves {serving}, not {}", s.source),
            Some("mcp-broker restart".into()),
        ));
    }
    for u in data["upstreams"].as_array().into_iter().flatten() {
        if let Some(err) = u["last_error"].as_str() {
            let name = u["name"].as_str().unwrap_or("?");
            checks.push(check(
                "upstream",
                Level::Problem,
                format!("{name}: {err}"),
                Some(format!("mcp-broker logs {name}")),
            ));
        }
    }
}

/// Process groups a daemon that is gone left behind.
fn leftovers(checks: &mut Vec<Check>, s: &Settings) {
    let ledger = mcpb_upstream::Ledger::new(mcpb_upstream::ledger_dir(&s.runtime.state_dir()));
    let alive = |pid: u32| Path::new(&format!("/proc/{pid}")).exists();
    let left: Vec<String> = ledger
        .entries()
        .into_iter()
        .filter(|e| !alive(e.daemon_pid) && alive(e.pgid))
        .map(|e| format!("{} (group {})", e.upstream, e.pgid))
        .collect();
    if !left.is_empty() {
        checks.push(check(
            "processes",
            Level::Problem,
            format!("left by a daemon that is gone: {}", left.join(", ")),
            Some("mcp-broker reap".into()),
        ));
    }
}

/// Where each client keeps its MCP servers, for the user (the first that exists counts).
/// Each client with a file: whether it starts the broker, and which servers it still starts
/// itself, in every scope it has for this folder.
fn clients(checks: &mut Vec<Check>) {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut found = 0;
    for client in mcpb_clients::Client::ALL {
        let user_file = client.config_path(mcpb_clients::Scope::User, &home, &cwd);
        let user_text = std::fs::read_to_string(&user_file).ok();
        let folder = mcpb_clients::local_folder(user_text.as_deref().unwrap_or(""), &cwd);
        let mut own: Vec<String> = Vec::new();
        let mut any_file = false;
        // What the person switched off in the client (rejected, disabled) does not start;
        // what waits for their yes is still listed: a repository's server starts once they
        // approve it.
        let approvals = mcpb_clients::Approvals::read(client, &home, &cwd, &folder);
        for place in client.places(&home, &cwd, Some(&folder)) {
            let Ok(text) = std::fs::read_to_string(&place.path) else {
                continue;
            };
            any_file = true;
            for s in mcpb_clients::servers(&place, &text).unwrap_or_default() {
                if s.disabled || approvals.switched_off(&place, &s.name) {
                    continue;
                }
                own.push(format!("{} ({})", s.name, place.label()));
            }
        }
        if !any_file {
            continue;
        }
        found += 1;
        let entry = user_text
            .as_deref()
            .and_then(|t| {
                mcpb_clients::current_entry(client, &user_file, t)
                    .ok()
                    .flatten()
            })
            .is_some();
        let name = client.name();
        let import = format!("`mcp-broker client import --client {name}` moves them");
        let (level, what, hint) = match (entry, own.is_empty()) {
            (true, true) => (Level::Ok, format!("{name}: starts only the broker"), None),
            (true, false) => (
                Level::Note,
                format!("{name}: starts the broker and, itself, {}", own.join(", ")),
                Some(format!("{import} (--keep NAME leaves one on purpose)")),
            ),
            (false, false) => (
                Level::Note,
                format!("{name}: starts its servers itself: {}", own.join(", ")),
                Some(import),
            ),
            (false, true) => (
                Level::Note,
                format!("{name}: no broker entry in {}", user_file.display()),
                Some(format!(
                    "`mcp-broker client render --client {name}` shows the entry to add"
                )),
            ),
        };
        checks.push(check("client", level, what, hint));
    }
    if found == 0 {
        checks.push(check(
            "client",
            Level::Note,
            "no client config found in the usual places",
            None,
        ));
    }
}

pub(crate) fn run(explicit_config: Option<&Path>, json: bool) -> ExitCode {
    let mut checks = Vec::new();
    binary(&mut checks);
    if let Some(s) = config(&mut checks, explicit_config) {
        private_dir(&mut checks, "runtime dir", &s.runtime.root);
        private_dir(&mut checks, "secrets dir", &s.runtime.secrets_dir());
        daemon(&mut checks, &s);
        leftovers(&mut checks, &s);
    }
    clients(&mut checks);
    let problems = checks.iter().filter(|c| c.level == Level::Problem).count();
    let name = |l: Level| match l {
        Level::Ok => "ok",
        Level::Note => "note",
        Level::Problem => "PROBLEM",
    };
    if json {
        let items: Vec<serde_json::Value> = checks
            .iter()
            .map(|c| serde_json::json!({"area": c.area, "level": name(c.level), "detail": c.detail, "fix": c.fix}))
            .collect();
        outln!(
            "{}",
            serde_json::json!({"problems": problems, "checks": items})
        );
    } else {
        let rows = checks
            .iter()
            .map(|c| {
                vec![
                    c.area.to_string(),
                    name(c.level).to_string(),
                    crate::printable(&c.detail),
                ]
            })
            .collect();
        out!(
            "{}",
            crate::commands::render::table(&["AREA", "STATE", "DETAIL"], rows)
        );
        let fixes: Vec<&Check> = checks
            .iter()
            .filter(|c| c.fix.is_some() && c.level != Level::Ok)
            .collect();
        if !fixes.is_empty() {
            outln!();
            outln!("what to do:");
            for c in fixes {
                outln!("  {}", c.fix.as_deref().unwrap_or(""));
            }
        }
        outln!();
        outln!(
            "{}",
            if problems == 0 {
                "no problems found".to_string()
            } else {
                format!("{problems} problem(s) found")
            }
        );
    }
    if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
