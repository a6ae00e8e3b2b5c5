//! `mcp-broker client codex-apps`: Codex's hosted apps, which are not MCP servers in its
//! config and never move to the broker, but whose tool definitions Codex loads all the same.
//! Lists what its cache holds; with `--allow`, renders the `[apps]` tables of its config.toml
//! that show the model only those apps (or tools), as a dry run or, with `--apply`, written
//! after a backup like every client edit (`client rollback --client codex` takes it back).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::apps::{apps_of, cached_tools, render_allowlist, resolve, shown};
use mcpb_clients::{Backups, Client, Scope};
use mcpb_config::Settings;

use crate::fail;

/// Where Codex keeps its state: `$CODEX_HOME`, else `~/.codex`.
pub(crate) fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"))
}

pub(crate) fn run(settings: &Settings, allow: &[String], apply: bool) -> ExitCode {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return fail(
            "mcp-broker: HOME is not set, so Codex's files cannot be found",
            &[],
        );
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| home.clone());
    let cache = codex_home(&home);
    let tools = cached_tools(&cache);
    if tools.is_empty() {
        return fail(
            &format!(
                "mcp-broker: no hosted apps cached under {}",
                cache.join("cache/codex_apps_tools").display()
            ),
            &[
                "Codex caches its apps' tools once it is signed in to ChatGPT and has started; run it once, then look again",
            ],
        );
    }
    let path = Client::Codex.config_path(Scope::User, &home, &cwd);
    let before = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return fail(&format!("mcp-broker: {}: {e}", path.display()), &[]),
    };
    let now = shown(before.as_deref().unwrap_or(""), &tools);
    if allow.is_empty() {
        outln!("app\tname\ttools\tshown now");
        for (id, name, n) in apps_of(&tools) {
            let on = now.iter().filter(|t| t.app == id).count();
            outln!("{id}\t{}\t{n}\t{on}", name.as_deref().unwrap_or("-"));
        }
        errln!(
            "hint: `mcp-broker client codex-apps --allow APP[,APP/TOOL...]` shows the model only those; APP is an id or a name above"
        );
        return ExitCode::SUCCESS;
    }
    let allowed = match resolve(allow, &tools) {
        Ok(a) => a,
        Err(e) => return fail(&format!("mcp-broker: {e}"), &[]),
    };
    let after = match render_allowlist(&path, before.as_deref(), &allowed) {
        Ok(a) => a,
        Err(e) => return fail(&format!("mcp-broker: {e}"), &["the file is as it was"]),
    };
    let then = shown(&after, &tools);
    let counts = format!(
        "hosted app tools shown: {} of {} now, {} after",
        now.len(),
        tools.len(),
        then.len()
    );
    if before.as_deref() == Some(after.as_str()) {
        outln!(
            "{}: the allowlist is there; nothing to change ({counts})",
            path.display()
        );
        return ExitCode::SUCCESS;
    }
    if !apply {
        out!(
            "{}",
            mcpb_clients::diff(&path, before.as_deref().unwrap_or(""), &after)
        );
        outln!("{counts}");
        errln!("hint: nothing was written; add --apply to write it (after a backup)");
        return ExitCode::SUCCESS;
    }
    write(settings, &path, before.as_deref(), &after, &counts)
}

fn write(
    settings: &Settings,
    path: &Path,
    before: Option<&str>,
    after: &str,
    counts: &str,
) -> ExitCode {
    if let Err(e) = settings.runtime.ensure() {
        return fail(
            &format!("mcp-broker: cannot make the runtime dir: {e}"),
            &[],
        );
    }
    let backups = Backups::new(&settings.runtime.backups_dir(), Client::Codex, path);
    let backup = match super::files::back_up(&backups, path, before.map(str::as_bytes), after) {
        Ok(b) => b,
        Err(code) => return code,
    };
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return fail(&format!("mcp-broker: {}: {e}", dir.display()), &[]);
    }
    if let Err(e) = mcpb_clients::write_keeping_mode(path, after.as_bytes()) {
        return fail(&format!("mcp-broker: {e}"), &["the file is as it was"]);
    }
    outln!(
        "{}: hosted apps limited (backup {}); {counts}",
        path.display(),
        backup.name
    );
    errln!(
        "hint: restart Codex to use it; `mcp-broker client rollback --client codex` undoes this"
    );
    ExitCode::SUCCESS
}
