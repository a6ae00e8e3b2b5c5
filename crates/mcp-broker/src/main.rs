//! The mcp-broker binary: CLI, shim, daemon entry point, example server and demo.
#![forbid(unsafe_code)]

#[macro_use]
mod out;
mod acceptance_cmd;
mod auth_cmd;
mod checks;
mod cli;
mod client_cmd;
mod commands;
mod config_backup;
mod config_import;
mod config_import_apply;
mod console_cmd;
mod daemon_client;
mod demo;
mod doctor;
mod example_server;
mod exec_cmd;
mod heap;
mod import_apply;
mod import_cmd;
mod import_parity;
mod import_plan;
mod import_profile;
mod import_record;
mod import_report;
mod import_scan;
mod import_secrets;
mod logfile;
mod logs_cmd;
mod measure;
mod measure_client;
mod metrics_cmd;
mod parity_cmd;
mod pins_cmd;
mod probes;
mod profile_cmd;
mod profile_view;
mod project_guard;
mod sandbox_cmd;
mod service_cmd;
mod shim;
mod tools_cmd;
mod top_cmd;
mod uninstall_cmd;
mod upstreams_cmd;
mod yaml_edit;

use std::process::ExitCode;

use clap::Parser;
use mcpb_config::{ResolveContext, Settings};

use crate::cli::{
    AuthCommand, Cli, ClientCommand, Command, ConfigCommand, PinsCommand, ProfileCommand,
    SandboxCommand, ServiceCommand, ToolsCommand, UpstreamCommand,
};

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

fn init_logging(color: clap::ColorChoice) {
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

/// Loads the config the daemon would use; on failure prints every error and exits 1.
pub fn load_settings(cli_config: Option<&std::path::Path>) -> Result<Settings, ExitCode> {
    let ctx = ResolveContext::from_env();
    let source = mcpb_config::locate(cli_config, &ctx);
    mcpb_config::load(&source, &ctx).map_err(|e| {
        errln!("{e}");
        errln!("hint: fix the file, then check it with `mcp-broker config validate`");
        ExitCode::FAILURE
    })
}

/// The settings of the config file, or, when it does not load, of its last valid copy (kept
/// under state/ by the daemon) with why: a file saved with a typo does not cut clients off.
/// With no valid copy ever, the file's error, as `load_settings` says it.
fn load_settings_or_last_good(
    cli_config: Option<&std::path::Path>,
) -> Result<(Settings, Option<String>), ExitCode> {
    let ctx = ResolveContext::from_env();
    let source = mcpb_config::locate(cli_config, &ctx);
    match mcpb_config::load(&source, &ctx) {
        Ok(s) => Ok((s, None)),
        Err(e) => match mcpb_config::last_good::recall(&source, &ctx) {
            Some((s, kept)) => {
                // The first error with its place (`file:line:col: …`), after the count.
                let text = e.to_string();
                let mut lines = text.lines();
                let head = lines.next().unwrap_or_default();
                let first = lines.next().map_or(head, str::trim).to_string();
                Ok((
                    s,
                    Some(format!(
                        "{first}; serving the last valid copy of the file ({}) until it is fixed: `mcp-broker config validate` shows every error, `mcp-broker reload` reads the fixed file",
                        kept.display()
                    )),
                ))
            }
            None => {
                errln!("{e}");
                errln!("hint: fix the file, then check it with `mcp-broker config validate`");
                Err(ExitCode::FAILURE)
            }
        },
    }
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

fn main() -> ExitCode {
    if let Some(code) = sandbox_mode() {
        return code;
    }
    let cli = Cli::parse();
    let config = cli.config.as_deref();
    match cli.command {
        Command::Stdio {
            profile,
            client,
            init_if_missing,
        } => {
            if let Err(code) = project_guard::check(config) {
                return code;
            }
            if init_if_missing {
                commands::init_if_missing(config);
            }
            match load_settings_or_last_good(config) {
                Ok((s, warning)) => {
                    if let Some(w) = &warning {
                        // The client shows this in its server log; the session still opens.
                        errln!("mcp-broker: {w}");
                    }
                    shim::run(&s, profile, client)
                }
                Err(code) => code,
            }
        }
        Command::ExampleServer => run_async(example_server::run()),
        Command::Daemon => {
            init_logging(cli.color);
            match load_settings_or_last_good(config) {
                Ok((s, warning)) => commands::daemon(s, warning),
                Err(code) => code,
            }
        }
        Command::Start => with_settings(config, commands::start),
        Command::Stop => on_daemon(config, true, commands::stop),
        Command::Restart => match on_daemon(config, true, commands::stop) {
            ExitCode::SUCCESS => with_settings(config, commands::start),
            stopped => stopped,
        },
        Command::Status { json } => on_daemon(config, true, |s| commands::status(s, json)),
        Command::Top { interval, count } => {
            on_daemon(config, true, |s| top_cmd::top(s, interval.into(), count))
        }
        Command::Reload => on_daemon(config, false, commands::reload),
        Command::Reap => on_daemon(config, true, commands::reap),
        Command::Demo => demo::run(),
        Command::Config { command } => match command {
            ConfigCommand::Init => commands::config_init(config),
            ConfigCommand::Validate { path } => {
                commands::config_validate(path.as_deref().or(config))
            }
            ConfigCommand::Import(a) => {
                with_settings(config, |s| config_import::run(s, &a, config))
            }
            ConfigCommand::Schema => {
                out!("{}", mcpb_config::schema::json_schema());
                ExitCode::SUCCESS
            }
            ConfigCommand::Show { json } => {
                with_settings(config, |s| commands::config_show(s, json))
            }
            ConfigCommand::Backup => config_backup::backup(config),
            ConfigCommand::Rollback { backup } => {
                config_backup::rollback(config, backup.as_deref())
            }
        },
        Command::Measure {
            profile,
            client,
            all_clients,
            json,
        } => with_settings(config, |s| {
            if client.is_some() || all_clients {
                measure_client::run(s, client.as_deref(), json)
            } else {
                measure::run(s, profile.as_deref(), json)
            }
        }),
        Command::Tools {
            profile,
            json,
            command,
        } => with_settings(config, |s| tools(s, profile.as_deref(), json, command)),
        Command::Exec {
            profile,
            json,
            command,
        } => with_settings(config, |s| {
            exec_cmd::run(s, profile.as_deref(), json, command)
        }),
        Command::Pins { command } => with_settings(config, |s| pins(s, command)),
        Command::Doctor { json } => doctor::run(config, json),
        Command::Profile {
            command: ProfileCommand::Validate { profile },
        } => with_settings(config, |s| profile_cmd::validate(s, &profile)),
        Command::Profile {
            command: ProfileCommand::Set { profile, view },
        } => profile_view::set(config, &profile, view.ask()),
        Command::Sandbox {
            command: SandboxCommand::Check { name, call, args },
        } => with_settings(config, |s| {
            sandbox_cmd::check(s, &name, call.as_deref().map(|c| (c, args.as_str())))
        }),
        Command::Profile {
            command:
                ProfileCommand::Acceptance {
                    profile,
                    client,
                    server,
                },
        } => with_settings(config, |s| {
            acceptance_cmd::acceptance(s, &profile, client.as_deref(), &server)
        }),
        Command::Parity {
            first,
            second,
            json,
        } => with_settings(config, |s| parity_cmd::run(s, &first, &second, json)),
        Command::Metrics => on_daemon(config, true, metrics_cmd::run),
        Command::Console { no_open } => {
            with_settings(config, |s| console_cmd::console(s, !no_open))
        }
        Command::Upstream { command } => with_settings(config, |s| {
            let (action, name) = match &command {
                UpstreamCommand::Start { name } => ("start", name),
                UpstreamCommand::Stop { name } => ("stop", name),
                UpstreamCommand::Restart { name } => ("restart", name),
            };
            console_cmd::upstream(s, action, name)
        }),
        Command::Uninstall {
            apply,
            purge,
            force,
        } => on_daemon(config, false, |s| {
            uninstall_cmd::run(
                s,
                &uninstall_cmd::Args {
                    apply,
                    purge,
                    force,
                },
            )
        }),
        Command::Service { command, manager } => {
            with_settings(config, |s| service(s, command, manager.as_deref()))
        }
        Command::Client { command } => with_settings(config, |s| client(s, &command, config)),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "mcp-broker", &mut script);
            out::write(format_args!("{}", String::from_utf8_lossy(&script)), false);
            ExitCode::SUCCESS
        }
        Command::Add {
            name,
            url,
            transport,
            headers,
            env,
            lifecycle,
            no_sandbox,
            profile,
            command,
        } => upstreams_cmd::add(
            config,
            &upstreams_cmd::NewUpstream {
                sandbox: !no_sandbox && url.is_none(),
                name,
                command,
                url,
                transport,
                headers,
                env,
                lifecycle,
                ..Default::default()
            },
            &profile,
        ),
        Command::Remove { name } => upstreams_cmd::remove(config, &name),
        Command::List { json } => with_settings(config, |s| upstreams_cmd::list(s, json)),
        Command::Logs {
            upstream,
            lines,
            follow,
        } => with_settings(config, |s| {
            logs_cmd::run(s, upstream.as_deref(), lines, follow)
        }),
        Command::Auth { command } => with_settings(config, |s| auth(s, command)),
    }
}

fn tools(
    settings: &Settings,
    profile: Option<&str>,
    json: bool,
    command: ToolsCommand,
) -> ExitCode {
    use mcpb_daemon::tools::{BrokerTool, call_tool, describe_tool, search_tools};
    // The same argument structs the daemon parses a model's calls into.
    let (tool, arguments) = match command {
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
            let arguments = match tools_cmd::raw_json_arg("args", args.as_deref()) {
                Ok(a) => a,
                Err(code) => return code,
            };
            let projection = match tools_cmd::json_arg("projection", projection.as_deref()) {
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
        Ok(a) => tools_cmd::run(settings, profile, tool, a, json),
        Err(e) => fail(
            &format!("mcp-broker: cannot encode the arguments: {e}"),
            &[],
        ),
    }
}

/// For commands that only need to reach the daemon: the settings when the file is valid, else
/// the embedded default with the runtime root the file names (or the default one), so that a
/// broken file can still be reloaded, i.e. reported by the daemon.
fn settings_for_socket(config: Option<&std::path::Path>, warn: bool) -> Result<Settings, ExitCode> {
    let ctx = ResolveContext::from_env();
    let source = mcpb_config::locate(config, &ctx);
    if let Ok(s) = mcpb_config::load(&source, &ctx) {
        return Ok(s);
    }
    if let Some((s, _)) = mcpb_config::last_good::recall(&source, &ctx) {
        if warn {
            errln!(
                "mcp-broker: warning: {source} is invalid (see `mcp-broker config validate`); using its last valid copy"
            );
        }
        return Ok(s);
    }
    let root = match &source {
        mcpb_config::ConfigSource::File(p) => std::fs::read_to_string(p)
            .ok()
            .and_then(|t| mcpb_config::load::runtime_root_hint(&t)),
        mcpb_config::ConfigSource::Embedded => None,
    };
    let mut settings =
        mcpb_config::load(&mcpb_config::ConfigSource::Embedded, &ctx).map_err(|e| {
            errln!("{e}");
            ExitCode::FAILURE
        })?;
    settings.runtime = mcpb_config::RuntimeLayout::new(ctx.runtime_root(root.as_deref()));
    if warn {
        errln!(
            "mcp-broker: warning: {source} is invalid (see `mcp-broker config validate`); reaching the daemon under {}",
            settings.runtime.root.display()
        );
    }
    Ok(settings)
}

/// `mcp-broker pins …`.
fn pins(s: &Settings, command: PinsCommand) -> ExitCode {
    match command {
        PinsCommand::List { json } => pins_cmd::list(s, json),
        PinsCommand::Approve {
            names,
            all,
            reset,
            yes,
            by,
            expect_hash,
        } => pins_cmd::approve(s, &names, all, reset, yes, &by, expect_hash.as_deref()),
        PinsCommand::Reject { names, by } => pins_cmd::reject(s, &names, &by),
    }
}

/// `mcp-broker service …`.
fn service(s: &Settings, command: ServiceCommand, manager: Option<&str>) -> ExitCode {
    let m = service_cmd::Manager::parse(manager);
    match command {
        ServiceCommand::Install { apply, no_start } => service_cmd::install(s, m, apply, !no_start),
        ServiceCommand::Uninstall { apply } => service_cmd::uninstall(s, m, apply),
        ServiceCommand::Status => service_cmd::status(s, m),
    }
}

/// `mcp-broker auth …`.
fn auth(s: &Settings, command: AuthCommand) -> ExitCode {
    match command {
        AuthCommand::Login {
            upstream,
            scopes,
            timeout_s,
        } => run_async(auth_cmd::login(s, &upstream, scopes, timeout_s)),
        AuthCommand::Logout { upstream } => auth_cmd::logout(s, &upstream),
        AuthCommand::Status { json } => auth_cmd::status(s, json),
    }
}

/// `f` with settings that reach the running daemon even when the config file is invalid.
fn on_daemon(
    config: Option<&std::path::Path>,
    warn: bool,
    f: impl FnOnce(&Settings) -> ExitCode,
) -> ExitCode {
    match settings_for_socket(config, warn) {
        Ok(s) => f(&s),
        Err(code) => code,
    }
}

/// `mcp-broker client …`.
fn client(
    settings: &Settings,
    command: &ClientCommand,
    config: Option<&std::path::Path>,
) -> ExitCode {
    let s = settings;
    match command {
        ClientCommand::Render { target: t } => {
            client_cmd::render(s, &client_cmd::Target::of(t, config))
        }
        ClientCommand::Apply { target: t } => {
            client_cmd::apply(s, &client_cmd::Target::of(t, config))
        }
        ClientCommand::Rollback {
            target: t,
            backup,
            force,
        } => client_cmd::rollback(
            s,
            &client_cmd::Target::of(t, config),
            backup.as_deref(),
            *force,
        ),
        ClientCommand::Status {
            client,
            project,
            json,
        } => client_cmd::status(s, client.as_deref(), *project, *json),
        ClientCommand::Import(args) => import_cmd::import(s, args, config),
        ClientCommand::Parity { client, json } => import_parity::run(s, client, *json),
    }
}

fn with_settings(
    config: Option<&std::path::Path>,
    f: impl FnOnce(&Settings) -> ExitCode,
) -> ExitCode {
    match load_settings(config) {
        Ok(s) => f(&s),
        Err(code) => code,
    }
}

/// The one runtime every command uses, the daemon included: tokio's current-thread runtime.
/// The daemon relies on it: upstream children are spawned from the thread that lives as long as
/// the daemon (PR_SET_PDEATHSIG fires when the spawning *thread* exits), and one thread keeps
/// the per-connection bookkeeping free of contention; heavy work goes to threads of its own.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(&format!("mcp-broker: cannot start the runtime: {e}"), &[]))
}

fn run_async(fut: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match rt.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("mcp-broker: {e:#}"), &[]),
    }
}
