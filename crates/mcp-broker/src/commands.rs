//! The daemon-management and config commands.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcpb_config::{ResolveContext, Settings};
use serde_json::Value;

use mcpb_protocol::AdminCommand;

use crate::daemon_client::{admin, spawn_daemon, wait_for_socket};
use crate::fail;

pub(crate) fn daemon(settings: Settings, warning: Option<String>) -> ExitCode {
    crate::logfile::watch(settings.runtime.log_path(), settings.broker.log_max_bytes);
    let rt = match crate::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let pid_path = settings.runtime.pid_path();
    match rt.block_on(mcpb_daemon::run_with(settings, warning)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ mcpb_daemon::DaemonError::AlreadyRunning { .. }) => {
            // Lost a start race or started twice: the running daemon serves everyone. Said
            // as an error with its pid: a person who started this one wants to know which.
            let pid = std::fs::read_to_string(&pid_path)
                .map(|p| p.trim().to_string())
                .unwrap_or_else(|_| "unknown".into());
            errln!("mcp-broker: {e} (pid {pid}); this one exits");
            errln!("hint: `mcp-broker status` shows it; `mcp-broker stop` ends it");
            ExitCode::from(3)
        }
        Err(e @ mcpb_daemon::DaemonError::Http(_)) => fail(
            &format!("mcp-broker: {e}"),
            &[
                "another program may listen on http.listen's address: stop it, or change http.listen",
            ],
        ),
        Err(e) => fail(
            &format!("mcp-broker: {e}"),
            &[
                "check that the runtime dir is yours and writable (MCP_BROKER_HOME, default ~/mcp/mcp-broker)",
            ],
        ),
    }
}

pub(crate) fn start(settings: &Settings) -> ExitCode {
    if let Ok(Some(reply)) = admin(settings, AdminCommand::Ping) {
        outln!(
            "mcp-broker daemon already running (pid {})",
            reply.daemon_pid
        );
        return ExitCode::SUCCESS;
    }
    // Where the daemon's own words will start in its log: said back if it does not come up.
    let log = settings.runtime.log_path();
    let from = std::fs::metadata(&log).map_or(0, |m| m.len());
    let spawned = match spawn_daemon(settings) {
        Ok(s) => s,
        Err(e) => return fail(&format!("mcp-broker: {e:#}"), &[]),
    };
    let failed = match wait_for_socket(settings, Duration::from_secs(15), &spawned) {
        Err(e) => format!("mcp-broker: {e:#}"),
        Ok(_) => match admin(settings, AdminCommand::Ping) {
            Ok(Some(reply)) => {
                outln!("mcp-broker daemon started (pid {})", reply.daemon_pid);
                return ExitCode::SUCCESS;
            }
            _ => "mcp-broker: the daemon started but does not answer".to_string(),
        },
    };
    errln!("{failed}");
    // The daemon writes its reason as it exits, which may be just after its socket closed:
    // read its log once it has exited.
    crate::daemon_client::wait_for_exit(&spawned, Duration::from_secs(2));
    let said = daemon_said(&log, from);
    for line in &said {
        errln!("the daemon said: {}", crate::printable(line));
    }
    if said.is_empty() {
        errln!("hint: run `mcp-broker daemon` to see the error in the terminal");
    } else {
        errln!("hint: the rest is in {}", log.display());
    }
    ExitCode::FAILURE
}

/// The daemon's errors in its log after byte `from` (the last few): why it did not come up.
fn daemon_said(log: &std::path::Path, from: u64) -> Vec<String> {
    use std::io::{Read, Seek};
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        let _ = f.seek(std::io::SeekFrom::Start(from));
        let _ = f.take(1 << 20).read_to_string(&mut text);
    }
    let errors: Vec<String> = text
        .lines()
        .filter(|l| l.contains("ERROR") || l.starts_with("mcp-broker:") || l.starts_with("Error"))
        .map(str::to_string)
        .collect();
    errors[errors.len().saturating_sub(5)..].to_vec()
}

/// A daemon that runs but turned the command down (too many connections, say): never to be
/// read as "not running" or "stopped".
fn refused(reply: &mcpb_protocol::HelloReply) -> ExitCode {
    let hints: Vec<&str> = reply.hints.iter().map(String::as_str).collect();
    fail(
        &format!(
            "mcp-broker: the daemon refused the command: {}",
            reply.error.as_deref().unwrap_or("no reason given")
        ),
        &hints,
    )
}

pub(crate) fn stop(settings: &Settings) -> ExitCode {
    // Calls in flight get the grace period: said now, so the wait is not a silent one.
    let inflight = admin(settings, AdminCommand::Status)
        .ok()
        .flatten()
        .and_then(|r| r.data)
        .and_then(|d| d["daemon"]["inflight_calls"].as_u64())
        .unwrap_or(0);
    if inflight > 0 {
        errln!(
            "mcp-broker: waiting for {inflight} call{} in flight, up to {} (broker.shutdown_grace_ms); their clients then get \"mcp-broker is shutting down\"",
            if inflight == 1 { "" } else { "s" },
            human_ms(u64::try_from(settings.broker.shutdown_grace.as_millis()).unwrap_or(0))
        );
    }
    let reply = match admin(settings, AdminCommand::Stop) {
        Ok(Some(r)) if !r.ok => return refused(&r),
        Ok(Some(r)) => r,
        Ok(None) => {
            errln!("mcp-broker: no daemon is running");
            return ExitCode::SUCCESS;
        }
        Err(e) => return fail(&format!("mcp-broker: {e:#}"), &[]),
    };
    let pid = reply.daemon_pid;
    let deadline = Instant::now() + settings.broker.shutdown_grace + Duration::from_secs(15);
    // The pid file goes last when the daemon finishes; a daemon that died leaves no process.
    let pid_file = settings.runtime.pid_path();
    while pid_file.exists() && process_exists(pid) {
        if Instant::now() > deadline {
            return fail(
                &format!("mcp-broker: daemon (pid {pid}) is still running"),
                &[&format!(
                    "kill it with `kill {pid}`; a second SIGTERM stops it at once"
                )],
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    outln!("mcp-broker daemon stopped (pid {pid})");
    ExitCode::SUCCESS
}

fn process_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    // Signal 0 checks existence; a zombie of ours would still count, but the daemon is not our child.
    rustix::process::test_kill_process(pid).is_ok()
}

pub(crate) fn status(settings: &Settings, json: bool) -> ExitCode {
    let reply = match admin(settings, AdminCommand::Status) {
        Ok(Some(r)) if !r.ok => return refused(&r),
        Ok(r) => r,
        Err(e) => return fail(&format!("mcp-broker: {e:#}"), &[]),
    };
    let Some(data) = reply.and_then(|r| r.data) else {
        if json {
            outln!(
                "{}",
                serde_json::json!({"running": false, "socket": settings.runtime.socket_path()})
            );
        } else {
            outln!(
                "daemon: not running (socket {})",
                settings.runtime.socket_path().display()
            );
            for (pid, root) in crate::daemon_client::lost_daemons() {
                errln!(
                    "mcp-broker: daemon pid {pid} runs for {root}, whose socket is gone; no client can reach it"
                );
                errln!("hint: `kill {pid}` stops it and its upstreams");
            }
            outln!("config: {}", settings.source);
            for up in settings.upstreams.values() {
                outln!(
                    "  {:<20} {}",
                    up.name,
                    if up.enabled() { "stopped" } else { "disabled" }
                );
            }
        }
        return ExitCode::from(3);
    };
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&data).unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    out!("{}", render_status(&data));
    ExitCode::SUCCESS
}

pub(crate) fn reload(settings: &Settings) -> ExitCode {
    match admin(settings, AdminCommand::Reload) {
        Ok(None) => fail(
            "mcp-broker: no daemon is running; nothing to reload",
            &["the next `mcp-broker start` or client start reads the config"],
        ),
        Ok(Some(reply)) if reply.ok => {
            let data = reply.data.unwrap_or_default();
            let list = |k: &str| {
                let names: Vec<&str> = data[k]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if names.is_empty() {
                    "-".to_string()
                } else {
                    names.join(", ")
                }
            };
            outln!(
                "reloaded: added {}; restarted {}; removed {}; unchanged {}",
                list("added"),
                list("restarted"),
                list("removed"),
                list("unchanged")
            );
            // A variable exported since the daemon started is not in its environment.
            let exported: Vec<&str> = data["missing_env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|n| std::env::var_os(n).is_some())
                .collect();
            if !exported.is_empty() {
                errln!(
                    "mcp-broker: {} set here but not in the daemon, which keeps the environment it started with",
                    exported.join(", ")
                );
                errln!("hint: `mcp-broker restart` starts it again with this environment");
            }
            if list("need_restart") != "-" {
                errln!(
                    "mcp-broker: {} changed but take effect only when the daemon starts",
                    list("need_restart")
                );
                errln!("hint: `mcp-broker restart`");
            }
            ExitCode::SUCCESS
        }
        Ok(Some(reply)) => {
            errln!(
                "mcp-broker: reload refused: {}",
                reply.error.as_deref().unwrap_or("no reason given")
            );
            for h in &reply.hints {
                errln!("hint: {h}");
            }
            ExitCode::FAILURE
        }
        Err(e) => fail(&format!("mcp-broker: {e:#}"), &[]),
    }
}

pub(crate) fn reap(settings: &Settings) -> ExitCode {
    // With a daemon running, its own groups are live upstreams, not leftovers.
    let live = matches!(admin(settings, AdminCommand::Ping), Ok(Some(_)));
    let ledger =
        mcpb_upstream::Ledger::new(mcpb_upstream::ledger_dir(&settings.runtime.state_dir()));
    let reaped = ledger.reap(live);
    let killed: usize = reaped.iter().map(|r| r.killed).sum();
    for r in reaped.iter().filter(|r| r.killed > 0) {
        outln!(
            "killed {} process(es) of upstream '{}' (process group {})",
            r.killed,
            r.upstream,
            r.pgid
        );
    }
    outln!(
        "reaped {killed} leftover process(es) in {} process group(s)",
        reaped.iter().filter(|r| r.killed > 0).count()
    );
    ExitCode::SUCCESS
}

/// A duration for people: whole seconds, `2h 5m 3s`.
pub(crate) fn human_ms(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(ms / 1000)).to_string()
}

/// A table of `rows` under `header`, columns apart by spaces, no borders.
pub(crate) fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    // A cell is one line, whatever a server put in a name: a line break in it would forge a
    // line of the table (or of what follows it).
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|c| crate::printable(&c).replace('\n', "\\n"))
                .collect()
        })
        .collect();
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING)
        .set_header(header.to_vec())
        .add_rows(rows);
    for col in t.column_iter_mut() {
        col.set_padding((0, 2));
    }
    let text = t.to_string();
    let mut out: String = text
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    if out.is_empty() {
        out.push('\n');
    }
    out
}

pub(crate) fn render_status(data: &Value) -> String {
    let d = &data["daemon"];
    let mut out = format!(
        "daemon: running, pid {}, version {}, up {}\nconfig: {}\nsocket: {}\nlog: {}\nsessions: {} (max {}{}), calls in flight: {}\n\n",
        d["pid"],
        d["version"].as_str().unwrap_or(""),
        human_ms(d["uptime_ms"].as_u64().unwrap_or(0)),
        d["config"].as_str().unwrap_or(""),
        d["socket"].as_str().unwrap_or(""),
        d["log"].as_str().unwrap_or("-"),
        d["sessions"],
        d["max_clients"],
        match d["waiting_sessions"].as_u64() {
            Some(n) if n > 0 => format!("; {n} waiting for a slot"),
            _ => String::new(),
        },
        d["inflight_calls"],
    );
    if let Some(w) = d["config_warning"].as_str() {
        out.push_str(&format!("warning: {w}\n\n"));
    }
    let ups: Vec<&Value> = data["upstreams"].as_array().into_iter().flatten().collect();
    let dash = |v: &Value| v.as_u64().map_or("-".to_string(), |n| n.to_string());
    let rows = ups
        .iter()
        .map(|u| {
            let name = u["name"].as_str().unwrap_or("");
            let calls = &data["calls"]["upstreams"][name];
            vec![
                name.to_string(),
                u["state"].as_str().unwrap_or("").to_string(),
                dash(&u["pid"]),
                dash(&u["tool_count"]),
                dash(&u["starts"]),
                dash(&u["failures"]),
                dash(&calls["calls"]),
                dash(&calls["errors"]),
                latency(&calls["p50_ms"]),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "UPSTREAM", "STATE", "PID", "TOOLS", "STARTS", "FAILURES", "CALLS", "ERRORS", "P50",
        ],
        rows,
    ));
    for u in &ups {
        let name = u["name"].as_str().unwrap_or("");
        if let Some(err) = u["last_error"].as_str() {
            out.push_str(&format!("{name}: last error: {err}\n"));
            // What the server itself said last, where the reason usually is.
            for line in last_lines(&u["stderr_tail"], 3) {
                out.push_str(&format!("{name}:   stderr: {line}\n"));
            }
            out.push_str(&format!("hint: more with `mcp-broker logs {name}`\n"));
        }
        if u["sandbox"].is_object() {
            out.push_str(&format!("{name}: {}\n", sandbox_line(&u["sandbox"])));
        }
        for r in u["rejected_tools"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "{name}: refused tool {}: {}\n",
                r["tool"].as_str().unwrap_or(""),
                r["reason"].as_str().unwrap_or("")
            ));
        }
    }
    let open: Vec<&str> = ups
        .iter()
        .filter(|u| u["sandboxed"] == false)
        .filter_map(|u| u["name"].as_str())
        .collect();
    if !open.is_empty() {
        out.push_str(&format!(
            "not sandboxed: {} (sandbox: standard runs one in the sandbox)\n",
            open.join(", ")
        ));
    }
    let c = &data["catalog"];
    if let Some(e) = c["pin_store_error"].as_str() {
        out.push_str(&format!(
            "pins: store unreadable, every tool quarantined: {e}\n"
        ));
    }
    for q in c["quarantined"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "quarantined: {} ({})\n",
            q["tool"].as_str().unwrap_or(""),
            q["reason"].as_str().unwrap_or("")
        ));
    }
    for f in c["findings"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "finding: {}: {}: {}\n",
            f["tool"].as_str().unwrap_or(""),
            f["kind"].as_str().unwrap_or(""),
            f["detail"].as_str().unwrap_or("")
        ));
    }
    if c["quarantined"].as_array().is_some_and(|q| !q.is_empty()) {
        out.push_str("hint: review with `mcp-broker pins list`, approve with `mcp-broker pins approve <upstream>.<tool>`\n");
    }
    // Names, errors and findings come from upstreams: never raw control characters.
    crate::printable(&out)
}

/// The last `n` non-empty lines of a JSON array of strings.
/// A latency in milliseconds as people read it: `0.21 ms`, `35 ms`, `1.2 s`; `-` when none.
pub(crate) fn latency(v: &Value) -> String {
    match v.as_f64() {
        None => "-".into(),
        Some(ms) if ms >= 1000.0 => format!("{:.1} s", ms / 1000.0),
        Some(ms) if ms >= 10.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{ms:.2} ms"),
    }
}

pub(crate) fn last_lines(v: &Value, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// Writes the commented example to `--config` (or `MCP_BROKER_CONFIG`) when given, else to the
/// runtime root; the JSON Schema goes beside it, where the example's first line points editors.
/// Why the default config could not be written.
pub(crate) enum InitError {
    /// A file is there already; it is never overwritten.
    Exists(std::path::PathBuf),
    Failed(String),
}

/// Writes the default config (and its schema beside it) where the broker looks for it: the
/// `--config` path or `MCP_BROKER_CONFIG`, else `broker.yaml` under the runtime dir (made 0700).
pub(crate) fn write_default_config(
    config: Option<&std::path::Path>,
) -> Result<std::path::PathBuf, InitError> {
    let ctx = ResolveContext::from_env();
    let layout = mcpb_config::RuntimeLayout::new(ctx.runtime_root(None));
    let path = match mcpb_config::locate(config, &ctx) {
        mcpb_config::ConfigSource::File(p) => p,
        mcpb_config::ConfigSource::Embedded => layout.config_path(),
    };
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let made = if path == layout.config_path() {
        layout.ensure()
    } else {
        std::fs::create_dir_all(dir)
    };
    made.map_err(|e| InitError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    let schema = dir.join("broker.schema.json");
    std::fs::write(&schema, mcpb_config::schema::json_schema())
        .map_err(|e| InitError::Failed(format!("cannot write {}: {e}", schema.display())))?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path);
    let mut f = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(InitError::Exists(path));
        }
        Err(e) => {
            return Err(InitError::Failed(format!(
                "cannot write {}: {e}",
                path.display()
            )));
        }
    };
    std::io::Write::write_all(&mut f, mcpb_config::EXAMPLE.as_bytes())
        .map_err(|e| InitError::Failed(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

pub(crate) fn config_init(config: Option<&std::path::Path>) -> ExitCode {
    match write_default_config(config) {
        Ok(path) => {
            outln!("{}", path.display());
            ExitCode::SUCCESS
        }
        Err(InitError::Exists(path)) => fail(
            &format!(
                "mcp-broker: {} already exists; not overwriting it",
                path.display()
            ),
            &["edit it, or move it away and run `mcp-broker config init` again"],
        ),
        Err(InitError::Failed(why)) => fail(&format!("mcp-broker: {why}"), &[]),
    }
}

/// `stdio --init-if-missing`: the default config written on first use, so a package install
/// needs no set-up step. Quiet on stdout (it is the client's MCP channel); a file already there
/// is left as it is, and a failure to write only warns: the broker serves the embedded default.
pub(crate) fn init_if_missing(config: Option<&std::path::Path>) {
    match write_default_config(config) {
        Ok(path) => errln!("mcp-broker: wrote the default config to {}", path.display()),
        Err(InitError::Exists(_)) => {}
        Err(InitError::Failed(why)) => {
            errln!("mcp-broker: warning: {why}; serving the built-in default config");
        }
    }
}

pub(crate) fn config_validate(path: Option<&std::path::Path>) -> ExitCode {
    let ctx = ResolveContext::from_env();
    let source = mcpb_config::locate(path, &ctx);
    match mcpb_config::load(&source, &ctx) {
        Ok(s) => {
            // Tool counts are known only for upstreams listed before (the catalog on disk).
            let store = mcpb_catalog::ListStore::new(s.runtime.catalog_dir());
            let known = |up: &str| store.load(up).ok().flatten().map(|l| l.tools);
            let (problems, unchecked) = crate::probes::probe_names_unknown(&s, &known);
            if !problems.is_empty() {
                errln!("invalid config {}: {} error(s)", s.source, problems.len());
                for p in problems {
                    errln!("{p}");
                }
                return ExitCode::FAILURE;
            }
            outln!(
                "ok: {} ({} upstreams, {} profiles, {} clients)",
                s.source,
                s.upstreams.len(),
                s.profiles.len(),
                s.clients.len()
            );
            if !unchecked.is_empty() {
                errln!(
                    "note: the smoke probe tools of {} are not checked: never listed here",
                    unchecked.join(", ")
                );
                errln!("  hint: `mcp-broker profile validate PROFILE` starts and probes them");
            }
            for line in sandbox_grants(&s, None) {
                outln!("{line}");
            }
            // Valid, but what would still fail when it runs from here.
            for f in crate::checks::run_time(&s, None) {
                errln!("warning: {}", f.what);
                errln!("  hint: {}", f.hint);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("{e}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn config_show(settings: &Settings, json: bool) -> ExitCode {
    match render_settings(settings, json) {
        Ok(text) => {
            out!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("mcp-broker: cannot render the settings: {e}"), &[]),
    }
}

/// The resolved settings as YAML (for people, in the file's own language) or JSON.
fn render_settings(settings: &Settings, json: bool) -> Result<String, String> {
    // Through JSON first so durations and paths render the same as in `status --json`.
    let value = serde_json::to_value(settings).map_err(|e| e.to_string())?;
    if json {
        return serde_json::to_string_pretty(&value)
            .map(|t| t + "\n")
            .map_err(|e| e.to_string());
    }
    serde_saphyr::to_string(&value).map_err(|e| e.to_string())
}

/// Each stdio upstream's sandbox as it would start from this shell (its HOME and PATH, the
/// config's literal environment values; references are not resolved here).
/// `only`: these upstreams alone (a dry run's new ones).
pub(crate) fn sandbox_grants(s: &Settings, only: Option<&[String]>) -> Vec<String> {
    let mut out = Vec::new();
    let mut open = Vec::new();
    // A set: an import of thousands of targets asks once per upstream.
    let only: Option<std::collections::HashSet<&str>> =
        only.map(|o| o.iter().map(String::as_str).collect());
    for (name, u) in &s.upstreams {
        if u.transport != mcpb_config::Transport::Stdio
            || only.as_ref().is_some_and(|o| !o.contains(name.as_str()))
        {
            continue;
        }
        let Some(policy) = &u.sandbox else {
            open.push(name.as_str());
            continue;
        };
        let mut env: std::collections::BTreeMap<String, String> = ["HOME", "PATH"]
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .collect();
        for (k, t) in &u.env {
            if let [mcpb_config::template::Part::Literal(v)] = t.parts() {
                env.insert(k.clone(), v.clone());
            }
        }
        let (read, write) = mcpb_upstream::sandboxed::grants(u, policy, &env, &s.runtime.root);
        let view = serde_json::json!({"read": read, "write": write,
            "network": policy.network == mcpb_config::sandbox::NetworkMode::Host});
        out.push(format!(
            "sandbox {}: {}",
            crate::out::one_line(name),
            sandbox_line(&view)
        ));
    }
    if !open.is_empty() {
        out.push(format!(
            "not sandboxed: {} (sandbox: standard runs one in the sandbox)",
            open.join(", ")
        ));
    }
    out
}

/// A sandboxed server's grants in one line: `sandboxed, network none; writes /data; reads ~/.nvm`.
pub(crate) fn sandbox_line(sb: &Value) -> String {
    let list = |k: &str| {
        sb[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|p| crate::out::one_line(p).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = format!(
        "sandboxed, network {}",
        if sb["network"] == true {
            "host"
        } else {
            "none"
        }
    );
    for (verb, key) in [("writes", "write"), ("reads", "read")] {
        let l = list(key);
        if !l.is_empty() {
            line.push_str(&format!("; {verb} {l}"));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_text() {
        let data = serde_json::json!({
            "daemon": {"pid": 4242, "version": "0.1.0", "uptime_ms": 93_500, "config": "/home/u/mcp/mcp-broker/broker.yaml",
                "socket": "/home/u/mcp/mcp-broker/sockets/broker.sock", "log": "/home/u/mcp/mcp-broker/logs/daemon.log", "sessions": 2, "max_clients": 256, "inflight_calls": 1},
            "upstreams": [
                {"name": "example", "state": "running", "pid": 4250, "tool_count": 4, "starts": 1, "failures": 0, "last_error": null},
                {"name": "github", "state": "stopped", "pid": null, "tool_count": null, "last_error": null},
                {"name": "broken", "state": "failed", "pid": null, "tool_count": null,
                 "starts": 0, "failures": 3, "stderr_tail": ["", "Traceback (most recent call last):", "ModuleNotFoundError: No module named 'mcp'"],
                 "last_error": "upstream 'broken' could not start `/opt/none`: No such file or directory (os error 2)"}
            ],
            "calls": {"total": 12, "errors": 1, "upstreams": {"example": {"calls": 12, "errors": 1, "p50_ms": 0.31}}},
            "catalog": {
                "quarantined": [{"tool": "github.create_issue", "reason": "definition changed since it was approved"}],
                "findings": [{"tool": "github.create_issue", "kind": "instruction", "detail": "contains \"ignore previous\""}]
            }
        });
        insta::assert_snapshot!(render_status(&data));
    }
}
