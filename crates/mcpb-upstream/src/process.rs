//! Child processes: each upstream in its own process group, tied to the daemon's life, and
//! stopped with a ladder that ends in SIGKILL of the whole group so launchers like `npx` or `uvx`
//! leave no grandchildren behind.

use std::collections::BTreeMap;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use mcpb_config::UpstreamSettings;
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, Command};

use crate::UpstreamError;

#[derive(Debug, Clone, Copy)]
pub struct StopTimings {
    /// After stdin is closed, how long a well-behaved server gets to exit.
    pub close_wait: Duration,
    /// After SIGTERM to the group, how long before SIGKILL.
    pub term_wait: Duration,
}

impl Default for StopTimings {
    fn default() -> Self {
        Self {
            close_wait: Duration::from_millis(1000),
            term_wait: Duration::from_millis(2000),
        }
    }
}

/// Starts the upstream's process; in the sandbox when its settings say so and the broker has a
/// runtime root to keep the server's private home in (`sandbox`).
#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "io::ErrorKind is non-exhaustive; only NotFound gets a hint"
)]
pub(crate) fn spawn(
    settings: &UpstreamSettings,
    env: &BTreeMap<String, String>,
    sandbox: Option<&crate::sandboxed::Prepared>,
) -> Result<(Child, Option<mcpb_sandbox::RunCgroup>), UpstreamError> {
    let command = settings.command.clone().unwrap_or_default();
    let mut cgroup = None;
    // `ours`: the sandbox's wrapper, the broker's own binary, is what starts.
    let (mut cmd, ours) = match (&settings.sandbox, sandbox) {
        (Some(policy), Some(prepared)) => {
            let (exe, args, cg) = crate::sandboxed::command(settings, policy, env, prepared)?;
            cgroup = cg;
            let mut cmd = Command::new(exe);
            cmd.args(args);
            (cmd, true)
        }
        _ => {
            let mut cmd = Command::new(&command);
            cmd.args(&settings.args);
            (cmd, false)
        }
    };
    cmd.env_clear().envs(env);
    if ours {
        // The wrapper drops them before it starts the server.
        cmd.envs(mcpb_sandbox::coverage::profile_env());
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &settings.cwd {
        cmd.current_dir(cwd);
    }
    die_with_parent(&mut cmd);
    let spawned = cmd.spawn().map_err(|e| UpstreamError::Spawn {
        upstream: settings.name.clone(),
        command: command.clone(),
        reason: match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("{e} (is `{command}` installed and on the PATH the daemon sees?)")
            }
            _ => e.to_string(),
        },
    });
    match spawned {
        Ok(child) => Ok((child, cgroup)),
        Err(e) => {
            if let Some(cg) = cgroup {
                cg.remove();
            }
            Err(e)
        }
    }
}

/// The child gets SIGKILL when its parent goes. The kernel sends it when the *thread* that
/// forked the child exits, not the process: this holds because the daemon runs tokio's
/// current-thread runtime (see `mcp-broker`'s `runtime()`), so every spawn happens on the main
/// thread, which lives as long as the daemon. A multi-threaded runtime would kill children
/// whenever a worker thread retired.
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child between fork and exec. It only calls
    // prctl(PR_SET_PDEATHSIG), which is async-signal-safe, allocates nothing and touches no state
    // shared with the parent, so it cannot observe locks held by other threads of the daemon.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
}

/// Sends `signal` to every process of the group; a group that is already gone is not an error.
pub(crate) fn signal_pid(pid: u32, signal: Signal) {
    if let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(p, signal);
    }
}

pub(crate) fn signal_group(pgid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return;
    };
    match kill_process_group(pid, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => tracing::warn!(pgid, ?signal, error = %e, "could not signal process group"),
    }
}

pub(crate) fn describe(status: &std::io::Result<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => s.to_string(),
        },
        Err(e) => format!("unknown status: {e}"),
    }
}

/// The stop ladder, after stdin was closed: wait, SIGTERM the group, wait, SIGKILL the group.
/// Whatever step ends it, the group is swept with SIGKILL at the end so no grandchild survives.
pub(crate) async fn stop_ladder(child: &mut Child, timings: StopTimings) -> String {
    let pgid = child.id().unwrap_or(0);
    let status = match tokio::time::timeout(timings.close_wait, child.wait()).await {
        Ok(s) => s,
        Err(_) => {
            signal_group(pgid, Signal::TERM);
            match tokio::time::timeout(timings.term_wait, child.wait()).await {
                Ok(s) => s,
                Err(_) => {
                    signal_group(pgid, Signal::KILL);
                    child.wait().await
                }
            }
        }
    };
    signal_group(pgid, Signal::KILL);
    describe(&status)
}
