//! The settings a command runs on: the config file's, its last valid copy when it does not
//! load, or (for commands that only reach the daemon) whatever finds the daemon's socket.

use std::process::ExitCode;

use mcpb_config::{ResolveContext, Settings};

/// Loads the config the daemon would use; on failure prints every error and exits 1.
pub(crate) fn load_settings(cli_config: Option<&std::path::Path>) -> Result<Settings, ExitCode> {
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
pub(crate) fn load_settings_or_last_good(
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

/// For commands that only need to reach the daemon: the settings when the file is valid, else
/// the embedded default with the runtime root the file names (or the default one), so that a
/// broken file can still be reloaded, i.e. reported by the daemon.
pub(crate) fn settings_for_socket(
    config: Option<&std::path::Path>,
    warn: bool,
) -> Result<Settings, ExitCode> {
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

/// `f` with settings that reach the running daemon even when the config file is invalid.
pub(crate) fn on_daemon(
    config: Option<&std::path::Path>,
    warn: bool,
    f: impl FnOnce(&Settings) -> ExitCode,
) -> ExitCode {
    match settings_for_socket(config, warn) {
        Ok(s) => f(&s),
        Err(code) => code,
    }
}

/// `f` with the config file's settings; an invalid file is said and `f` does not run.
pub(crate) fn with_settings(
    config: Option<&std::path::Path>,
    f: impl FnOnce(&Settings) -> ExitCode,
) -> ExitCode {
    match load_settings(config) {
        Ok(s) => f(&s),
        Err(code) => code,
    }
}
