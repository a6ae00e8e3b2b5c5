//! The client's files as an import leaves them: the moved servers out of each place, the
//! broker's entry into the user file, and for a project file git tracks (the team's) either
//! nothing or, for Claude Code, a per-user switch that turns its moved servers off.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Client, Entry, Scope};

use crate::cli::ImportArgs;
use crate::commands::client::files::refused;
use crate::commands::client::import::scan::{Scan, tracked_by_git};
use crate::commands::import::change::Files;
use crate::commands::import::plan::{Fate, Plan};
use crate::fail;

/// The project files git tracks, and what the import does with them.
pub(crate) struct SharedFiles {
    tracked: Vec<PathBuf>,
    /// Claude Code: its moved servers are switched off for this user instead.
    switched: bool,
}

impl SharedFiles {
    /// Project files git tracks are the team's: Claude Code's servers there are switched off
    /// for this user; other clients' stay, unless --edit-project-files.
    pub(crate) fn of(a: &ImportArgs, client: Client, scan: &Scan) -> Self {
        let mut tracked: Vec<PathBuf> = if a.edit_project_files {
            Vec::new()
        } else {
            scan.places
                .iter()
                .filter(|p| p.scope == Scope::Project)
                .map(|p| p.path.clone())
                .filter(|p| scan.before.get(p).is_some_and(Option::is_some))
                .filter(|p| tracked_by_git(p))
                .collect()
        };
        tracked.dedup();
        SharedFiles {
            tracked,
            switched: client == Client::ClaudeCode,
        }
    }

    /// The files whose servers stay where they are (the plan says so of each).
    pub(crate) fn left_as_they_are(&self) -> &[PathBuf] {
        if self.switched { &[] } else { &self.tracked }
    }

    fn switched_off(&self, path: &Path) -> bool {
        self.switched && self.tracked.iter().any(|t| t == path)
    }
}

/// The servers of `place`'s file that the plan moves.
fn moved_from(plan: &Plan, place: &mcpb_clients::Place) -> Vec<String> {
    plan.found
        .iter()
        .filter(|f| &f.place == place && matches!(f.fate, Fate::Moved(_) | Fate::Same(_)))
        .map(|f| f.server.name.clone())
        .collect()
}

/// Every file of the client the import changes, before and after.
pub(crate) fn client_files(
    (client, home, cwd): (Client, &Path, &Path),
    scan: &Scan,
    shared: &SharedFiles,
    plan: &mut Plan,
    entry: &Entry,
) -> Result<Files, ExitCode> {
    let user_file = client.config_path(Scope::User, home, cwd);
    // Claude Code's switch: the moved servers of a shared `.mcp.json`, by folder.
    let mut switch_off: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in scan.places.iter().filter(|p| shared.switched_off(&p.path)) {
        let folder = p
            .folder
            .clone()
            .unwrap_or_else(|| cwd.display().to_string());
        switch_off
            .entry(folder)
            .or_default()
            .extend(moved_from(plan, p));
        plan.notes.push(format!(
            "{}: tracked by git, so left as the team has it; its moved servers are switched off for you in Claude Code's settings (--edit-project-files edits it instead)",
            p.path.display(),
        ));
    }
    let mut files = Files {
        before: scan.before.clone(),
        after: BTreeMap::new(),
    };
    for (path, before) in &scan.before {
        let mut text = before.clone().unwrap_or_default();
        for p in scan.places.iter().filter(|p| &p.path == path) {
            let gone = moved_from(plan, p);
            if shared.switched_off(path) || gone.is_empty() {
                continue;
            }
            text = mcpb_clients::without(p, &text, &gone).map_err(|e| refused(&e))?;
        }
        if path == &user_file {
            text = user_file_text(client, path, before.is_some(), text, &switch_off, entry)?;
        }
        // A file that was not there and gets nothing stays not there.
        if before.as_deref().unwrap_or("") != text {
            files.after.insert(path.clone(), text);
        }
    }
    local_switches(&switch_off, &mut files)?;
    Ok(files)
}

/// The user file: project switches that go there, and the broker's entry.
fn user_file_text(
    client: Client,
    path: &Path,
    existed: bool,
    mut text: String,
    switch_off: &BTreeMap<String, Vec<String>>,
    entry: &Entry,
) -> Result<String, ExitCode> {
    for (folder, names) in switch_off
        .iter()
        .filter(|(f, n)| !n.is_empty() && local_settings(f).is_none())
    {
        text = mcpb_clients::disable_project_servers(path, &text, Some(folder), names)
            .map_err(|e| refused(&e))?;
    }
    let existing = (existed || !text.is_empty()).then_some(text.as_str());
    mcpb_clients::render(client, path, existing, entry).map_err(|e| refused(&e))
}

/// Claude Code keeps a project's switches in its `.claude/settings.local.json`, this user's
/// own (one git tracks is the team's: the switch goes in ~/.claude.json then).
fn local_switches(
    switch_off: &BTreeMap<String, Vec<String>>,
    files: &mut Files,
) -> Result<(), ExitCode> {
    for (folder, names) in switch_off.iter().filter(|(_, n)| !n.is_empty()) {
        let Some(local) = local_settings(folder) else {
            continue;
        };
        let before = match std::fs::read_to_string(&local) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(fail(&format!("mcp-broker: {}: {e}", local.display()), &[])),
        };
        let text = before.clone().unwrap_or_default();
        let text = mcpb_clients::disable_project_servers(&local, &text, None, names)
            .map_err(|e| refused(&e))?;
        files.before.insert(local.clone(), before);
        files.after.insert(local, text);
    }
    Ok(())
}

/// Claude Code's per-user settings of a project folder, when the switch may go there: not a
/// file git tracks (the team's), not below a `.claude` that is a link (out of the folder).
fn local_settings(folder: &str) -> Option<PathBuf> {
    let dir = Path::new(folder).join(".claude");
    let file = dir.join("settings.local.json");
    let dir_ok = match std::fs::symlink_metadata(&dir) {
        Ok(m) => m.is_dir(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    (dir_ok && !tracked_by_git(&file)).then_some(file)
}
