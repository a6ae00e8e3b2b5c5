//! The command tree: one folder or file per command group, the way `mcp-broker --help` lists
//! them; `run` hands each parsed command to its group. What several groups print alike is in
//! `render`.

pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod daemon;
pub(crate) mod demo;
pub(crate) mod exec;
pub(crate) mod import;
pub(crate) mod measure;
pub(crate) mod pins;
pub(crate) mod profile;
pub(crate) mod render;
pub(crate) mod sandbox;
pub(crate) mod service;
pub(crate) mod tools;
pub(crate) mod uninstall;
pub(crate) mod upstream;

use std::path::Path;
use std::process::ExitCode;

use crate::cli::{Cli, Command, SandboxCommand, StdioArgs};
use crate::settings::{load_settings_or_last_good, on_daemon, with_settings};
use crate::{project_guard, run_async, shim};

/// Runs one parsed command line.
pub(crate) fn run(cli: Cli) -> ExitCode {
    let config = cli.config.as_deref();
    match cli.command {
        Command::Stdio(a) => stdio(config, a),
        Command::ExampleServer => run_async(demo::example_server::run()),
        Command::Demo => demo::run(),
        Command::Daemon => daemon::run(config, cli.color),
        Command::Start => with_settings(config, daemon::start),
        Command::Stop => on_daemon(config, true, daemon::stop),
        Command::Restart => daemon::restart(config),
        Command::Status { json } => on_daemon(config, true, |s| daemon::status(s, json)),
        Command::Top { interval, count } => on_daemon(config, true, |s| {
            daemon::top::top(s, interval.into(), count)
        }),
        Command::Reload => on_daemon(config, false, daemon::reload),
        Command::Reap => on_daemon(config, true, daemon::reap),
        Command::Metrics => on_daemon(config, true, daemon::metrics::run),
        Command::Doctor { json } => daemon::doctor::run(config, json),
        Command::Console { no_open } => {
            with_settings(config, |s| daemon::console::console(s, !no_open))
        }
        Command::Logs(a) => with_settings(config, |s| daemon::logs::run(s, &a)),
        Command::Config { command } => config::run(command, config),
        Command::Client { command } => with_settings(config, |s| client::run(s, &command, config)),
        Command::Profile { command } => profile::run(command, config),
        Command::Parity(a) => with_settings(config, |s| profile::parity::run(s, &a)),
        Command::Measure(a) => with_settings(config, |s| measure::run(s, &a)),
        Command::Tools(a) => with_settings(config, |s| tools::run(s, a)),
        Command::Exec(a) => with_settings(config, |s| exec::run(s, a)),
        Command::Pins { command } => with_settings(config, |s| pins::run(s, command)),
        Command::Sandbox {
            command: SandboxCommand::Check { name, call, args },
        } => with_settings(config, |s| {
            sandbox::check(s, &name, call.as_deref().map(|c| (c, args.as_str())))
        }),
        Command::Add(a) => upstream::add(config, &a),
        Command::Remove { name } => upstream::remove(config, &name),
        Command::List { json } => with_settings(config, |s| upstream::list(s, json)),
        Command::Upstream { command } => with_settings(config, |s| upstream::control(s, &command)),
        Command::Auth { command } => with_settings(config, |s| upstream::auth::run(s, command)),
        Command::Service { command, manager } => {
            with_settings(config, |s| service::run(s, command, manager.as_deref()))
        }
        Command::Uninstall(a) => on_daemon(config, false, |s| uninstall::run(s, &a)),
        Command::Completions { shell } => completions(shell),
    }
}

/// `mcp-broker stdio`: the entry a client starts. A config with a typo still serves (its last
/// valid copy), so one saved mistake does not cut every client off.
fn stdio(config: Option<&Path>, a: StdioArgs) -> ExitCode {
    if let Err(code) = project_guard::check(config) {
        return code;
    }
    if a.init_if_missing {
        config::init_if_missing(config);
    }
    match load_settings_or_last_good(config) {
        Ok((s, warning)) => {
            if let Some(w) = &warning {
                // The client shows this in its server log; the session still opens.
                errln!("mcp-broker: {w}");
            }
            shim::run(&s, a.profile, a.client)
        }
        Err(code) => code,
    }
}

/// `mcp-broker completions SHELL`.
fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "mcp-broker", &mut script);
    crate::out::write(format_args!("{}", String::from_utf8_lossy(&script)), false);
    ExitCode::SUCCESS
}
