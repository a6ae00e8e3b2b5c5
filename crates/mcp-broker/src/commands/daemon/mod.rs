//! The daemon's own commands: run it, start, stop, status, reload, reap; what watches it
//! (top, metrics, logs, console, doctor) in the files beside.

pub(crate) mod console;
pub(crate) mod doctor;
pub(crate) mod logs;
pub(crate) mod metrics;
pub(crate) mod top;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcpb_config::Settings;
use serde_json::Value;

use mcpb_protocol::AdminCommand;

use crate::commands::render::{human_ms, render_status};
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

/// `mcp-broker daemon`: runs in the foreground, on the file's settings or, when it has a
/// typo, its last valid copy (said in the log and to every session).
pub(crate) fn run(config: Option<&std::path::Path>, color: clap::ColorChoice) -> ExitCode {
    crate::init_logging(color);
    match crate::settings::load_settings_or_last_good(config) {
        Ok((s, warning)) => daemon(s, warning),
        Err(code) => code,
    }
}

/// `mcp-broker restart`: stop (reaching the daemon whatever the file says), then start.
pub(crate) fn restart(config: Option<&std::path::Path>) -> ExitCode {
    match crate::settings::on_daemon(config, true, stop) {
        ExitCode::SUCCESS => crate::settings::with_settings(config, start),
        stopped => stopped,
    }
}
