//! Whether the client itself would start a server it lists: Claude Code asks before starting a
//! project's servers and can switch a server off per folder; Gemini CLI keeps `mcp.allowed` /
//! `mcp.excluded` lists and ignores a project's settings in a folder it does not trust. A
//! server its client would not start must not start through the broker either.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Client, Place, Scope};

fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    jsonc_parser::parse_to_serde_value(&text, &jsonc_parser::ParseOptions::default())
        .ok()
        .flatten()
}

use crate::import::strings as names;

/// What a client's own files say about starting its servers in one folder.
#[derive(Debug, Default)]
pub struct Approvals {
    client: Option<Client>,
    /// Claude Code: servers switched off for this folder (any scope).
    off_here: Vec<String>,
    /// Claude Code: project servers approved, rejected, or all approved.
    approved: Vec<String>,
    rejected: Vec<String>,
    all_approved: bool,
    /// Gemini CLI: the lists, when kept.
    allowed: Option<Vec<String>>,
    excluded: Vec<String>,
    /// Gemini CLI: whether the folder is trusted (its project settings count).
    trusted: bool,
}

impl Approvals {
    /// Reads what `client` keeps about `cwd` (Claude Code's `folder` key in `~/.claude.json`).
    pub fn read(client: Client, home: &Path, cwd: &Path, folder: &str) -> Self {
        let mut a = Approvals {
            client: Some(client),
            trusted: true,
            ..Approvals::default()
        };
        match client {
            Client::ClaudeCode => {
                let project = read_json(&home.join(".claude.json"))
                    .and_then(|v| v.get("projects")?.get(folder).cloned())
                    .unwrap_or_default();
                let settings: Vec<Value> = [
                    home.join(".claude/settings.json"),
                    cwd.join(".claude/settings.json"),
                    cwd.join(".claude/settings.local.json"),
                ]
                .iter()
                .filter_map(|p| read_json(p))
                .chain([project.clone()])
                .collect();
                a.off_here = names(project.get("disabledMcpServers"));
                for s in &settings {
                    a.approved.extend(names(s.get("enabledMcpjsonServers")));
                    a.rejected.extend(names(s.get("disabledMcpjsonServers")));
                    a.all_approved |=
                        s.get("enableAllProjectMcpServers") == Some(&Value::Bool(true));
                }
            }
            Client::Gemini => {
                let user = read_json(&home.join(".gemini/settings.json")).unwrap_or_default();
                a.trusted = gemini_trusts(home, cwd, &user);
                let mut all = vec![user];
                if a.trusted && cwd != home {
                    all.extend(read_json(&cwd.join(".gemini/settings.json")));
                }
                for s in &all {
                    let mcp = s.get("mcp");
                    if let Some(list) = mcp.and_then(|m| m.get("allowed")) {
                        a.allowed = Some(names(Some(list)));
                    }
                    a.excluded
                        .extend(names(mcp.and_then(|m| m.get("excluded"))));
                }
            }
            _ => {}
        }
        a
    }

    /// Why the client would not start `name` from `place`; `None` when it would.
    pub fn refused(&self, place: &Place, name: &str) -> Option<String> {
        match self.client? {
            Client::ClaudeCode => {
                if self.off_here.iter().any(|n| n == name) {
                    return Some("switched off for this folder in Claude Code".into());
                }
                if place.scope == Scope::Project {
                    if self.rejected.iter().any(|n| n == name) {
                        return Some("rejected in Claude Code for this folder".into());
                    }
                    if !self.all_approved && !self.approved.iter().any(|n| n == name) {
                        return Some(
                            "not approved in Claude Code yet (it asks before starting a project's servers); approve it there first"
                                .into(),
                        );
                    }
                }
                None
            }
            Client::Gemini => {
                if place.scope == Scope::Project && !self.trusted {
                    return Some("this folder is not trusted in Gemini CLI".into());
                }
                if self.excluded.iter().any(|n| n == name) {
                    return Some("in Gemini CLI's mcp.excluded".into());
                }
                match &self.allowed {
                    Some(list) if !list.iter().any(|n| n == name) => {
                        Some("not in Gemini CLI's mcp.allowed".into())
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// Gemini CLI's folder trust: off in the user's settings, or `trustedFolders.json` trusting
/// the folder (TRUST_FOLDER on it or an enclosing folder, TRUST_PARENT on a folder inside
/// the enclosing one), and not DO_NOT_TRUST on the folder itself.
fn gemini_trusts(home: &Path, cwd: &Path, user: &Value) -> bool {
    let enabled = user
        .pointer("/security/folderTrust/enabled")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if !enabled {
        return true;
    }
    let Some(rules) = read_json(&home.join(".gemini/trustedFolders.json")) else {
        return false;
    };
    let Some(rules) = rules.as_object() else {
        return false;
    };
    let mut trusted = false;
    for (path, rule) in rules {
        let p = PathBuf::from(path);
        match rule.as_str() {
            Some("DO_NOT_TRUST") if p == cwd => return false,
            Some("TRUST_FOLDER") if cwd.starts_with(&p) => trusted = true,
            Some("TRUST_PARENT") if p.parent().is_some_and(|parent| cwd.starts_with(parent)) => {
                trusted = true;
            }
            _ => {}
        }
    }
    trusted
}
