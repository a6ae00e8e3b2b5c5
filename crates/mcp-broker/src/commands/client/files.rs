//! `mcp-broker client render|apply|status|rollback --client C`: the broker's one entry in each
//! client's own config file. `render` is the dry run (a unified diff, and a note of what it
//! saw); `apply` writes exactly that, only if the file is still what the dry run saw, after a
//! backup, and reads it back; `rollback` puts a backup back; `status` says for each client
//! whether its entry is there and current.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Backups, Client, ClientsError, Entry, Scope};
use mcpb_config::Settings;

use crate::fail;

/// What the command line names: the client, its scope and the profile for its entry.
pub(crate) struct Target<'a> {
    pub client: &'a str,
    pub project: bool,
    pub profile: Option<&'a str>,
    /// `--config` as given: the entry carries it, or the client would read another config.
    pub config: Option<&'a Path>,
}

impl<'a> Target<'a> {
    pub(crate) fn of(t: &'a crate::cli::ClientTarget, config: Option<&'a Path>) -> Self {
        Self {
            client: &t.client,
            project: t.project,
            profile: t.profile.as_deref(),
            config,
        }
    }
}

/// What the client's entry must carry for the shim to reach this daemon and config when the
/// client starts it without this shell's variables: a non-default `MCP_BROKER_HOME` and the
/// config file named by `--config` or `MCP_BROKER_CONFIG`, as absolute paths.
pub(crate) fn entry_env(config: Option<&Path>) -> Vec<(String, String)> {
    let abs = |p: PathBuf| std::path::absolute(&p).unwrap_or(p).display().to_string();
    let mut env = Vec::new();
    if let Some(h) = std::env::var_os(mcpb_config::env::HOME).filter(|h| !h.is_empty()) {
        env.push((mcpb_config::env::HOME.to_string(), abs(PathBuf::from(h))));
    }
    let config = config.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(mcpb_config::env::CONFIG)
            .filter(|c| !c.is_empty())
            .map(PathBuf::from)
    });
    if let Some(c) = config {
        env.push((mcpb_config::env::CONFIG.to_string(), abs(c)));
    }
    env
}

pub(crate) struct Resolved {
    pub(crate) client: Client,
    pub(crate) scope: Scope,
    pub(crate) path: PathBuf,
    pub(crate) entry: Entry,
}

fn known_clients() -> String {
    Client::ALL.map(Client::name).join(", ")
}

pub(crate) fn resolve(settings: &Settings, t: &Target<'_>) -> Result<Resolved, ExitCode> {
    let Some(client) = Client::parse(t.client) else {
        return Err(fail(
            &format!("mcp-broker: no client named {:?}", t.client),
            &[&format!("clients: {}", known_clients())],
        ));
    };
    let scope = if t.project {
        Scope::Project
    } else {
        Scope::User
    };
    if t.project && !client.has_project_scope() {
        return Err(fail(
            &format!("mcp-broker: {} has no project config", client.name()),
            &["drop --project"],
        ));
    }
    if let Some(p) = t.profile
        && !settings.profiles.contains_key(p)
    {
        let names: Vec<&str> = settings.profiles.keys().map(String::as_str).collect();
        return Err(fail(
            &format!("mcp-broker: no profile named {p:?}"),
            &[&format!("profiles: {}", names.join(", "))],
        ));
    }
    // Without a HOME of its own the user's files cannot be found: never guess them relative
    // to wherever the command runs.
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    let Some(home) = home else {
        return Err(fail(
            "mcp-broker: HOME is not set to an absolute path, so the client's files cannot be found",
            &["run it as the user whose clients these are (HOME=/home/you)"],
        ));
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| PathBuf::from("mcp-broker"));
    let mut entry = Entry::for_client(&exe, client, t.profile);
    entry.env = entry_env(t.config);
    // The profile the shim will get: named, else the client's own, else `default`.
    let profile = t
        .profile
        .map(str::to_string)
        .or_else(|| settings.clients.get(client.name()).cloned())
        .unwrap_or_else(|| "default".into());
    entry.allowed_servers = settings
        .profiles
        .get(&profile)
        .and_then(|p| p.mcp_allowed_servers.clone());
    Ok(Resolved {
        client,
        scope,
        path: client.config_path(scope, &home, &cwd),
        entry,
    })
}

pub(crate) fn read(path: &Path) -> Result<Option<String>, ExitCode> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(fail(
            &format!("mcp-broker: cannot read {}: {e}", path.display()),
            &[],
        )),
    }
}

pub(crate) fn refused(e: &ClientsError) -> ExitCode {
    fail(
        &format!("mcp-broker: {e}"),
        &["the file was not touched; fix it (or move it away) and run this again"],
    )
}

/// Where the dry run notes what it saw and what it would write.
fn note_path(settings: &Settings, r: &Resolved) -> PathBuf {
    let scope = if r.scope == Scope::Project {
        "project"
    } else {
        "user"
    };
    settings
        .runtime
        .state_dir()
        .join("renders")
        .join(format!("{}-{scope}.json", r.client.name()))
}

fn flag(r: &Resolved, profile: Option<&str>) -> String {
    let mut s = format!("--client {}", r.client.name());
    if let Some(p) = profile {
        s.push_str(&format!(" --profile {p}"));
    }
    if r.scope == Scope::Project {
        s.push_str(" --project");
    }
    s
}

/// The client's file as it is, and as the entry would make it.
fn prepare(
    settings: &Settings,
    t: &Target<'_>,
) -> Result<(Resolved, Option<String>, String), ExitCode> {
    let r = resolve(settings, t)?;
    let before = read(&r.path)?;
    let after = mcpb_clients::render(r.client, &r.path, before.as_deref(), &r.entry)
        .map_err(|e| refused(&e))?;
    Ok((r, before, after))
}

pub(crate) fn render(settings: &Settings, t: &Target<'_>) -> ExitCode {
    let (r, before, after) = match prepare(settings, t) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let before_text = before.as_deref().unwrap_or("");
    if before.as_deref() == Some(after.as_str()) {
        errln!(
            "{}: the entry is there and current; nothing to change",
            r.path.display()
        );
        return ExitCode::SUCCESS;
    }
    out!("{}", mcpb_clients::diff(&r.path, before_text, &after));
    let note = serde_json::json!({
        "path": r.path.display().to_string(),
        "before": mcpb_clients::sha256(before_text.as_bytes()),
        "existed": before.is_some(),
        "after": mcpb_clients::sha256(after.as_bytes()),
    });
    let path = note_path(settings, &r);
    if let Err(e) = mcpb_config::layout::write_private(&path, note.to_string().as_bytes()) {
        return fail(
            &format!(
                "mcp-broker: cannot note the dry run in {}: {e}",
                path.display()
            ),
            &[],
        );
    }
    errln!("a dry run: nothing was written");
    errln!(
        "hint: `mcp-broker client apply {}` writes it",
        flag(&r, t.profile)
    );
    ExitCode::SUCCESS
}

pub(crate) fn apply(settings: &Settings, t: &Target<'_>) -> ExitCode {
    let (r, before, after) = match prepare(settings, t) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if before.as_deref() == Some(after.as_str()) {
        errln!(
            "{}: the entry is there and current; nothing to change",
            r.path.display()
        );
        return ExitCode::SUCCESS;
    }
    // Only what the dry run showed is written: the file and the change must be the same.
    let note_file = note_path(settings, &r);
    let note: serde_json::Value = std::fs::read_to_string(&note_file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let before_text = before.as_deref().unwrap_or("");
    let same = note["path"] == r.path.display().to_string().as_str()
        && note["before"] == mcpb_clients::sha256(before_text.as_bytes()).as_str()
        && note["existed"] == before.is_some()
        && note["after"] == mcpb_clients::sha256(after.as_bytes()).as_str();
    if !same {
        return fail(
            &format!(
                "mcp-broker: {} changed since the dry run (or none was made); nothing was written",
                r.path.display()
            ),
            &[&format!(
                "`mcp-broker client render {}` shows the change; then apply",
                flag(&r, t.profile)
            )],
        );
    }
    if std::fs::metadata(&r.path).is_ok_and(|m| m.permissions().readonly()) {
        return fail(
            &format!(
                "mcp-broker: {} is read-only; nothing was written",
                r.path.display()
            ),
            &["make it writable (chmod u+w) if the broker may change it"],
        );
    }
    if let Err(e) = settings.runtime.ensure() {
        return fail(
            &format!("mcp-broker: cannot make the runtime dir: {e}"),
            &[],
        );
    }
    let backups = Backups::new(&settings.runtime.backups_dir(), r.client, &r.path);
    let backup = match back_up(
        &backups,
        &r.path,
        before.as_deref().map(str::as_bytes),
        &after,
    ) {
        Ok(b) => b,
        Err(code) => return code,
    };
    if let Err(e) = mcpb_clients::write_keeping_mode(&r.path, after.as_bytes()) {
        return fail(&format!("mcp-broker: {e}"), &["the file is as it was"]);
    }
    // Read back: the client will read what is on disk, not what was meant.
    let back = std::fs::read_to_string(&r.path).unwrap_or_default();
    let entry = mcpb_clients::current_entry(r.client, &r.path, &back)
        .ok()
        .flatten();
    if back != after || !entry.is_some_and(|e| mcpb_clients::runs(r.client, &e, &r.entry)) {
        let _ = backups.restore(Some(&backup.name), r.client.name(), true);
        return fail(
            &format!(
                "mcp-broker: {} did not read back as written; the backup was put back",
                r.path.display()
            ),
            &[],
        );
    }
    let _ = std::fs::remove_file(&note_file);
    outln!(
        "{}: the broker's entry is in (backup {})",
        r.path.display(),
        backup.name
    );
    errln!(
        "hint: restart {} to use it; `mcp-broker client rollback --client {}` undoes this",
        r.client.name(),
        r.client.name()
    );
    ExitCode::SUCCESS
}

/// Keeps the client file's `before` bytes, which `after` is about to replace.
pub(crate) fn back_up(
    backups: &Backups,
    path: &Path,
    before: Option<&[u8]>,
    after: &str,
) -> Result<mcpb_clients::Backup, ExitCode> {
    backups
        .take(
            path,
            before,
            &mcpb_clients::sha256(after.as_bytes()),
            mcpb_config::unix_now(),
        )
        .and_then(|b| backups.keep_written(&b.name, after.as_bytes()).map(|()| b))
        .map_err(|e| {
            fail(
                &format!("mcp-broker: no backup could be taken, so nothing was written: {e}"),
                &[],
            )
        })
}

/// A file an import writes beside the client's own, rolled back with the user's file: Claude
/// Code's per-user settings of a project (`.claude/settings.local.json`), where the switches
/// of a shared `.mcp.json`'s servers go.
pub(crate) fn is_companion(client: Client, path: &Path) -> bool {
    client == Client::ClaudeCode && path.ends_with(".claude/settings.local.json")
}

pub(crate) fn rollback(
    settings: &Settings,
    t: &Target<'_>,
    backup: Option<&str>,
    force: bool,
) -> ExitCode {
    let r = match resolve(settings, t) {
        Ok(r) => r,
        Err(code) => return code,
    };
    // The companions first: one that cannot go back stops the rollback before the user's file
    // (and its backup) is used, so the whole can be tried again.
    if r.scope == Scope::User && backup.is_none() {
        let code = rollback_companions(settings, r.client, force);
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    rollback_file(settings, &r, backup, force)
}

/// Puts back the companion files an import wrote beside the client's user file.
fn rollback_companions(settings: &Settings, client: Client, force: bool) -> ExitCode {
    let root = settings.runtime.backups_dir();
    let record = read_record(settings, client).unwrap_or_default();
    let mut code = ExitCode::SUCCESS;
    for b in record["backups"].as_array().into_iter().flatten() {
        let (Some(path), Some(name)) = (b["path"].as_str(), b["backup"].as_str()) else {
            continue;
        };
        let path = Path::new(path);
        if !is_companion(client, path) {
            continue;
        }
        let backups = Backups::new(&root, client, path);
        if !backups.list().iter().any(|x| x.name == name) {
            continue;
        }
        // A project's file: never written through a link planted since.
        let restored = mcpb_clients::plain_project_file(path)
            .and_then(|()| backups.restore(Some(name), client.name(), force));
        match restored {
            Ok(b) => say_restored(&b),
            Err(e) => {
                errln!(
                    "mcp-broker: {e} ({}); nothing else was rolled back",
                    path.display()
                );
                code = ExitCode::FAILURE;
                break;
            }
        }
    }
    code
}

/// What putting backup `b` back did to its file.
fn say_restored(b: &mcpb_clients::Backup) {
    let (path, name) = (b.path.display(), &b.name);
    if b.merged {
        outln!(
            "{path}: the broker's change of backup {name} taken back out; what changed since stays"
        );
    } else if b.existed {
        outln!("{path}: put back as it was before backup {name}");
    } else {
        outln!("{path}: removed (there was no file before backup {name})");
    }
}

fn rollback_file(settings: &Settings, r: &Resolved, backup: Option<&str>, force: bool) -> ExitCode {
    if r.scope != Scope::User
        && let Err(e) = mcpb_clients::plain_project_file(&r.path)
    {
        return fail(
            &format!("mcp-broker: {e}; nothing was changed"),
            &["look at what the link points to; remove it, then roll back again"],
        );
    }
    let backups = Backups::new(&settings.runtime.backups_dir(), r.client, &r.path);
    let restored = backups.restore(backup, r.client.name(), force);
    if let Ok(b) = &restored {
        say_kept_upstreams(settings, r.client, &r.path, &b.name);
    }
    match restored {
        Ok(b) => {
            say_restored(&b);
            ExitCode::SUCCESS
        }
        Err(e @ ClientsError::Changed { .. }) => fail(
            &format!("mcp-broker: {e}; nothing was changed"),
            &[
                "`mcp-broker client render` shows how the file stands now",
                "--force puts the backup back anyway",
            ],
        ),
        Err(e) => {
            let names: Vec<String> = backups.list().into_iter().map(|b| b.name).collect();
            let none = names.is_empty();
            let names = if none {
                "(none)".to_string()
            } else {
                names.join(", ")
            };
            let root = settings.runtime.backups_dir();
            let mut hints = vec![format!("backups of this file: {names}")];
            // A project's file is named by the folder the command runs in: the backups may be
            // of the same client's file in another folder.
            let others: Vec<String> = Backups::files(&root, r.client)
                .into_iter()
                .filter(|p| *p != r.path)
                .map(|p| p.display().to_string())
                .collect();
            if none && !others.is_empty() {
                hints.push(format!(
                    "{} has backups of: {}",
                    r.client.name(),
                    others.join(", ")
                ));
                hints.push(
                    "a project's file is rolled back from its project's folder with --project, the user's own file without it"
                        .into(),
                );
            }
            hints.push(format!(
                "backups are kept in {} (0700), apart from the runtime dir",
                root.join(r.client.name()).display()
            ));
            let hints: Vec<&str> = hints.iter().map(String::as_str).collect();
            fail(&format!("mcp-broker: {e} ({})", r.path.display()), &hints)
        }
    }
}

use crate::commands::client::import::record::read_record;

/// After a rollback of the backup an import took of `path` (`backup`): the upstreams it made of
/// that file's servers are still in the broker's config (a rollback gives the client its
/// servers back; it does not take them from the broker).
fn say_kept_upstreams(settings: &Settings, client: Client, path: &Path, backup: &str) {
    let record = read_record(settings, client).unwrap_or_default();
    let mut names: Vec<&str> = record["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["path"].as_str() == path.to_str() && s["backup"] == backup)
        .filter_map(|s| s["upstream"].as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return;
    }
    errln!(
        "mcp-broker: the broker's config still has the upstreams imported from this file: {}",
        names.join(", ")
    );
    errln!(
        "hint: `mcp-broker remove NAME` takes one out when no other client or profile uses it; this client starts its own copy again"
    );
}

/// Each client's entry, in its user-scope file (or the project's with `project`).
pub(crate) fn status(
    settings: &Settings,
    only: Option<&str>,
    project: bool,
    json: bool,
) -> ExitCode {
    let clients: Vec<Client> = match only {
        Some(n) => match Client::parse(n) {
            Some(c) => vec![c],
            None => {
                return fail(
                    &format!("mcp-broker: no client named {n:?}"),
                    &[&format!("clients: {}", known_clients())],
                );
            }
        },
        None => Client::ALL.to_vec(),
    };
    let mut rows = Vec::new();
    for c in clients {
        if project && !c.has_project_scope() {
            continue;
        }
        let t = Target {
            client: c.name(),
            project,
            profile: None,
            config: None,
        };
        let Ok(r) = resolve(settings, &t) else {
            continue;
        };
        let state = match std::fs::read_to_string(&r.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no file".to_string(),
            Err(_) => "unreadable".to_string(),
            Ok(text) => match mcpb_clients::current_entry(c, &r.path, &text) {
                Err(_) => "broken file".to_string(),
                Ok(None) => "no broker entry".to_string(),
                Ok(Some(v)) => {
                    // Current when it runs this binary's `stdio`, whatever profile it names.
                    let runs_us = v["command"] == r.entry.command.as_str()
                        && v["args"].get(0).and_then(|a| a.as_str()) == Some("stdio");
                    if runs_us { "present" } else { "drifted" }.to_string()
                }
            },
        };
        rows.push(vec![
            c.name().to_string(),
            state,
            r.path.display().to_string(),
        ]);
    }
    if json {
        let items: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| serde_json::json!({"client": r[0], "entry": r[1], "file": r[2]}))
            .collect();
        outln!("{}", serde_json::Value::Array(items));
    } else {
        out!(
            "{}",
            crate::commands::render::table(&["CLIENT", "ENTRY", "FILE"], rows)
        );
    }
    ExitCode::SUCCESS
}
