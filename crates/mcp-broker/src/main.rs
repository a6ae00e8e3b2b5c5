//! The mcp-broker binary: CLI, shim, daemon entry point, example server and demo.
#![forbid(unsafe_code)]

#[macro_use]
mod out;
mod cli;
mod commands;
mod daemon_client;
mod heap;
mod logfile;
mod project_guard;
mod settings;
mod shim;
mod yaml_edit;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;

/// One line saying what happened, then `hint:` lines saying what to do.
pub fn fail(message: &str, hints: &[&str]) -> ExitCode {
    errln!("{message}");
    for h in hints {
        errln!("hint: {h}");
    }
    ExitCode::FAILURE
}

/// Text from an upstream, fit for a terminal (see `out::printable`).
pub fn printable(text: &str) -> String {
    out::printable(text).into_owned()
}

/// Logs to stderr (redacted), at the level `MCP_BROKER_LOG` asks for, INFO by default.
pub(crate) fn init_logging(color: clap::ColorChoice) {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;
    let filter: Targets = std::env::var(mcpb_config::env::LOG)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    // Colours only for a person at a terminal who did not ask for none (no-color.org).
    let ansi = match color {
        clap::ColorChoice::Always => true,
        clap::ColorChoice::Never => false,
        clap::ColorChoice::Auto => {
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(|| logfile::Redacting(std::io::stderr()))
                .with_ansi(ansi),
        )
        .with(filter)
        .try_init();
}

/// The modes this binary runs in for the sandbox, before any CLI parsing: the jail's helper
/// (which never returns) and the JavaScript worker inside a jail.
fn sandbox_mode() -> Option<ExitCode> {
    let first = std::env::args_os().nth(1)?;
    // The sandbox helper forks and unshares: it must run before anything starts a thread.
    if first == mcpb_sandbox::HELPER_ARG {
        mcpb_sandbox::helper_main(Some(mcpb_exec::js::run_in_jail));
    }
    // A sandboxed upstream server's start: the same constraint.
    if first == mcpb_sandbox::SERVER_ARG {
        mcpb_sandbox::server_main();
    }
    // The JavaScript worker runs inside the jail; it needs nothing of the CLI.
    if first == mcpb_exec::js::WORKER_ARG {
        return Some(mcpb_exec::js::worker_main());
    }
    None
}

/// The one runtime every command uses, the daemon included: tokio's current-thread runtime.
/// The daemon relies on it: upstream children are spawned from the thread that lives as long as
/// the daemon (PR_SET_PDEATHSIG fires when the spawning *thread* exits), and one thread keeps
/// the per-connection bookkeeping free of contention; heavy work goes to threads of its own.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(&format!("mcp-broker: cannot start the runtime: {e}"), &[]))
}

pub(crate) fn run_async(fut: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("mcp-broker: {e:#}"), &[]),
    }
}

fn main() -> ExitCode {
    if let Some(code) = sandbox_mode() {
        return code;
    }
    commands::run(Cli::parse())
}
