//! Every place a client keeps servers: a file, and where in it. Claude Code alone keeps three
//! scopes, two of them in one file (`~/.claude.json`: the user's `mcpServers`, and each
//! folder's own under `projects["<folder>"]`); the others keep a user file and, most of them, a
//! project file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::client::Format;
use crate::{Client, ClientsError};

/// Whose servers: the user's (every folder), one folder's kept in the user's file (Claude
/// Code's `local`, its default for `claude mcp add`), or the project's file in the folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    User,
    Local,
    Project,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Local => "local",
            Scope::Project => "project",
        }
    }

    pub fn parse(name: &str) -> Option<Scope> {
        [Scope::User, Scope::Local, Scope::Project]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// One place servers are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub client: Client,
    pub scope: Scope,
    pub path: PathBuf,
    /// The folder of a `local` place (its key under `projects`).
    pub folder: Option<String>,
}

impl Place {
    /// The keys from the file's top to the object of servers.
    pub fn keys(&self) -> Vec<String> {
        let servers = match self.client.format() {
            Format::Json { key, .. } => key,
            Format::Toml => "mcp_servers",
        };
        match &self.folder {
            Some(f) => vec!["projects".into(), f.clone(), servers.into()],
            None => vec![servers.into()],
        }
    }

    /// `local /work/app` or `user`: how the place is named to the user.
    pub fn label(&self) -> String {
        match &self.folder {
            Some(f) => format!("{} {f}", self.scope.name()),
            None => self.scope.name().to_string(),
        }
    }
}

impl Client {
    /// The scopes the client has, in the order it reads them.
    pub fn scopes(self) -> &'static [Scope] {
        match self {
            Client::ClaudeCode => &[Scope::User, Scope::Local, Scope::Project],
            Client::ClaudeDesktop | Client::Agy => &[Scope::User],
            Client::Codex | Client::Gemini | Client::Cursor | Client::Vscode => {
                &[Scope::User, Scope::Project]
            }
        }
    }

    /// The client's places for the folder `cwd`; `local_folder` names the folder Claude Code
    /// keys the `local` scope by (see [`local_folder`]).
    pub fn places(self, home: &Path, cwd: &Path, local_folder: Option<&str>) -> Vec<Place> {
        self.scopes()
            .iter()
            .filter_map(|&scope| {
                let folder = match scope {
                    Scope::Local => Some(local_folder?.to_string()),
                    Scope::User | Scope::Project => None,
                };
                Some(Place {
                    client: self,
                    scope,
                    path: self.config_path(scope, home, cwd),
                    folder,
                })
            })
            .collect()
    }
}

/// The key Claude Code keeps `cwd`'s local servers under in `~/.claude.json` (`text`): the
/// folder itself when the file has it, else the nearest enclosing git work tree's root (where
/// Claude Code keys a repository's folders), else the folder.
pub fn local_folder(text: &str, cwd: &Path) -> String {
    let held = parsed_json(text);
    let has = |p: &Path| {
        held.as_ref()
            .and_then(|v| v.get("projects"))
            .and_then(|p2| p2.get(p.to_string_lossy().as_ref()))
            .is_some()
    };
    if has(cwd) {
        return cwd.display().to_string();
    }
    let root = cwd.ancestors().find(|a| a.join(".git").exists());
    match root {
        Some(r) if has(r) => r.display().to_string(),
        _ => cwd.display().to_string(),
    }
}

/// Every folder of `~/.claude.json` (`text`) that keeps servers of its own.
pub fn local_folders(text: &str) -> Vec<String> {
    let Some(held) = parsed_json(text) else {
        return Vec::new();
    };
    held.get("projects")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, v)| {
                    v.get("mcpServers")
                        .and_then(Value::as_object)
                        .is_some_and(|s| !s.is_empty())
                })
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn parsed_json(text: &str) -> Option<Value> {
    jsonc_parser::parse_to_serde_value(text, &jsonc_parser::ParseOptions::default())
        .ok()
        .flatten()
}

/// The servers object at `place` in the file's text (JSON for TOML too).
pub(crate) fn servers_object(
    place: &Place,
    text: &str,
) -> Result<Option<serde_json::Map<String, Value>>, ClientsError> {
    let Some(held) = crate::edit::parsed(place.client, &place.path, text)? else {
        return Ok(None);
    };
    let mut at = &held;
    for k in place.keys() {
        match at.get(&k) {
            Some(v) => at = v,
            None => return Ok(None),
        }
    }
    Ok(at.as_object().cloned())
}
