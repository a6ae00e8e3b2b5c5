//! `mcp-broker client …`: a client's entry rendered, applied and rolled back (`files`),
//! whole clients moved onto the broker (`import`), and Codex's hosted apps limited (`apps`).

pub(crate) mod apps;
pub(crate) mod files;
pub(crate) mod import;

use std::process::ExitCode;

use mcpb_config::Settings;

use crate::cli::ClientCommand;

/// `mcp-broker client …`.
pub(crate) fn run(
    settings: &Settings,
    command: &ClientCommand,
    config: Option<&std::path::Path>,
) -> ExitCode {
    let s = settings;
    match command {
        ClientCommand::Render { target: t } => files::render(s, &files::Target::of(t, config)),
        ClientCommand::Apply { target: t } => files::apply(s, &files::Target::of(t, config)),
        ClientCommand::Rollback {
            target: t,
            backup,
            force,
        } => files::rollback(s, &files::Target::of(t, config), backup.as_deref(), *force),
        ClientCommand::Status {
            client,
            project,
            json,
        } => files::status(s, client.as_deref(), *project, *json),
        ClientCommand::Import(args) => import::import(s, args, config),
        ClientCommand::Parity { client, json } => import::parity::run(s, client, *json),
        ClientCommand::CodexApps { allow, apply } => apps::run(s, allow, *apply),
    }
}
