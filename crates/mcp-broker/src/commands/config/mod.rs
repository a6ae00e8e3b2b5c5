//! `mcp-broker config …`: writing the default file, validating and showing the settings;
//! backups and imports in their own files.

pub(crate) mod backup;
pub(crate) mod checks;
pub(crate) mod import;
pub(crate) mod import_apply;
pub(crate) mod probes;

use std::process::ExitCode;

use mcpb_config::{ResolveContext, Settings};

use crate::cli::ConfigCommand;
use crate::commands::sandbox::sandbox_grants;
use crate::fail;
use crate::settings::with_settings;

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

/// `mcp-broker config init`: the commented example written where the broker looks for it (the
/// JSON Schema beside it, where the example's first line points editors).
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

/// `mcp-broker config validate`.
pub(crate) fn config_validate(path: Option<&std::path::Path>) -> ExitCode {
    let ctx = ResolveContext::from_env();
    let source = mcpb_config::locate(path, &ctx);
    match mcpb_config::load(&source, &ctx) {
        Ok(s) => {
            // Tool counts are known only for upstreams listed before (the catalog on disk).
            let store = mcpb_catalog::ListStore::new(s.runtime.catalog_dir());
            let known = |up: &str| store.load(up).ok().flatten().map(|l| l.tools);
            let (problems, unchecked) =
                crate::commands::config::probes::probe_names_unknown(&s, &known);
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
            for f in crate::commands::config::checks::run_time(&s, None) {
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

/// `mcp-broker config show`.
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

/// `mcp-broker config …`.
pub(crate) fn run(command: ConfigCommand, config: Option<&std::path::Path>) -> ExitCode {
    match command {
        ConfigCommand::Init => config_init(config),
        ConfigCommand::Validate { path } => config_validate(path.as_deref().or(config)),
        ConfigCommand::Import(a) => with_settings(config, |s| import::run(s, &a, config)),
        ConfigCommand::Schema => {
            out!("{}", mcpb_config::schema::json_schema());
            ExitCode::SUCCESS
        }
        ConfigCommand::Show { json } => with_settings(config, |s| config_show(s, json)),
        ConfigCommand::Backup => backup::backup(config),
        ConfigCommand::Rollback { backup } => backup::rollback(config, backup.as_deref()),
    }
}
