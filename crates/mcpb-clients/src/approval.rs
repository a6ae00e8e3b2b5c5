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
    /// Gemini CLI, Codex and Claude Code: whether the folder is trusted (its project's
    /// servers may start).
    trusted: bool,
    /// Gemini CLI: servers switched off with `/mcp disable`.
    off: Vec<String>,
    /// The person named the project's servers (`--scope project`, `--trust-project`): for a
    /// client whose trust the broker cannot read, that is the only yes there is.
    project_named: bool,
}

/// The folder a project's files belong to: the nearest enclosing git work tree's root, else the
/// folder itself.
fn project_root(cwd: &Path) -> &Path {
    cwd.ancestors()
        .find(|a| a.join(".git").exists())
        .unwrap_or(cwd)
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
            Client::ClaudeCode => a.read_claude_code(home, cwd, folder),
            Client::Codex => {
                let text =
                    std::fs::read_to_string(home.join(".codex/config.toml")).unwrap_or_default();
                let doc: toml_edit::DocumentMut = text.parse().unwrap_or_default();
                let file = client.config_path(Scope::Project, home, cwd);
                let holder = file
                    .parent()
                    .and_then(Path::parent)
                    .unwrap_or(cwd)
                    .to_path_buf();
                a.trusted = codex_trusts(&doc, &holder, cwd);
            }
            Client::Gemini => a.read_gemini(home, cwd),
            Client::ClaudeDesktop | Client::Cursor | Client::Vscode | Client::Agy => {}
        }
        a
    }

    /// Claude Code's trust of `folder`, and the project servers its settings approve, reject
    /// or switch off.
    fn read_claude_code(&mut self, home: &Path, cwd: &Path, folder: &str) {
        let claude = read_json(&home.join(".claude.json")).unwrap_or_default();
        let project = claude
            .get("projects")
            .and_then(|p| p.get(folder))
            .cloned()
            .unwrap_or_default();
        // A project's servers start only in a folder whose trust dialog was accepted
        // (there or in an enclosing folder).
        self.trusted = Path::new(folder).ancestors().any(|d| {
            claude
                .get("projects")
                .and_then(|p| p.get(d.to_string_lossy().as_ref()))
                .and_then(|p| p.get("hasTrustDialogAccepted"))
                == Some(&Value::Bool(true))
        });
        let root = project_root(cwd);
        let mut files = vec![home.join(".claude/settings.json")];
        for dir in [root, cwd] {
            files.push(dir.join(".claude/settings.json"));
            files.push(dir.join(".claude/settings.local.json"));
        }
        files.dedup();
        let settings: Vec<Value> = files
            .iter()
            .filter_map(|p| read_json(p))
            .chain([project.clone()])
            .collect();
        self.off_here = names(project.get("disabledMcpServers"));
        for s in &settings {
            self.approved.extend(names(s.get("enabledMcpjsonServers")));
            self.rejected.extend(names(s.get("disabledMcpjsonServers")));
            self.all_approved |= s.get("enableAllProjectMcpServers") == Some(&Value::Bool(true));
        }
    }

    /// Gemini CLI's trust of `cwd`, the servers switched off, and its allowed and excluded lists.
    fn read_gemini(&mut self, home: &Path, cwd: &Path) {
        let user = read_json(&home.join(".gemini/settings.json")).unwrap_or_default();
        self.trusted = gemini_trusts(home, cwd, &user);
        if let Some(Value::Object(m)) = read_json(&home.join(".gemini/mcp-server-enablement.json"))
        {
            self.off = m
                .iter()
                .filter(|(_, v)| v.get("enabled") == Some(&Value::Bool(false)))
                .map(|(k, _)| k.clone())
                .collect();
        }
        let mut all = vec![user];
        if self.trusted && cwd != home {
            all.extend(read_json(&cwd.join(".gemini/settings.json")));
        }
        for s in &all {
            let mcp = s.get("mcp");
            if let Some(list) = mcp.and_then(|m| m.get("allowed")) {
                self.allowed = Some(names(Some(list)));
            }
            self.excluded
                .extend(names(mcp.and_then(|m| m.get("excluded"))));
        }
    }

    /// The person named this folder's project servers on the command line.
    pub fn with_project_named(mut self, named: bool) -> Self {
        self.project_named = named;
        self
    }

    /// Whether the person switched `name` off in the client (rejected, disabled, excluded),
    /// as opposed to a server still waiting for their yes (not approved, not trusted yet):
    /// one never starts, the other starts once they say so.
    pub fn switched_off(&self, place: &Place, name: &str) -> bool {
        let has = |list: &[String]| list.iter().any(|n| n == name);
        match self.client {
            Some(Client::ClaudeCode) => {
                has(&self.off_here) || (place.scope == Scope::Project && has(&self.rejected))
            }
            Some(Client::Gemini) => {
                has(&self.off)
                    || has(&self.excluded)
                    || self.allowed.as_deref().is_some_and(|a| !has(a))
            }
            _ => false,
        }
    }

    /// Why the client would not start `name` from `place`; `None` when it would.
    pub fn refused(&self, place: &Place, name: &str) -> Option<String> {
        match self.client? {
            Client::ClaudeCode => {
                if self.off_here.iter().any(|n| n == name) {
                    return Some("switched off for this folder in Claude Code".into());
                }
                if place.scope == Scope::Project {
                    if !self.trusted {
                        return Some(
                            "this folder's trust dialog was not accepted in Claude Code".into(),
                        );
                    }
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
            Client::Codex => (place.scope == Scope::Project && !self.trusted)
                .then(|| "this folder is not trusted in Codex".into()),
            Client::Gemini => {
                if place.scope == Scope::Project && !self.trusted {
                    return Some("this folder is not trusted in Gemini CLI".into());
                }
                if self.off.iter().any(|n| n == name) {
                    return Some("switched off in Gemini CLI (/mcp disable)".into());
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
            // VS Code, Cursor and the others keep workspace trust where the broker cannot read
            // it (an editor's own state): a repository's servers move only when the person
            // names them.
            other @ Client::ClaudeDesktop | other @ Client::Cursor | other @ Client::Vscode | other @ Client::Agy => (place.scope == Scope::Project && !self.project_named).then(|| {
                format!(
                    "{} keeps its workspace trust where the broker cannot read it; name this folder's servers with --scope project (or --trust-project) to move them",
                    other.name()
                )
            }),
        }
    }
}

/// Codex's own rule for a project's `.codex` folder (codex-rs `config/loader`): the trust
/// level recorded for the folder holding `.codex`, else for the project root (the nearest
/// folder up from `cwd` with a `.git`), else for the repository's root (a linked worktree's
/// main checkout); each looked up as written and canonical. The first one found decides; an
/// enclosing folder's trust counts for nothing.
fn codex_trusts(doc: &toml_edit::DocumentMut, holder: &Path, cwd: &Path) -> bool {
    let project_root = cwd
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(cwd);
    let repo_root = main_checkout(project_root);
    let level = |dir: &Path| -> Option<String> {
        let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        [canonical, dir.to_path_buf()].iter().find_map(|k| {
            doc.get("projects")?
                .get(k.to_string_lossy().as_ref())?
                .get("trust_level")?
                .as_str()
                .map(str::to_string)
        })
    };
    [Some(holder), Some(project_root), repo_root.as_deref()]
        .into_iter()
        .flatten()
        .find_map(level)
        .is_some_and(|l| l == "trusted")
}

/// A linked worktree's main checkout: its `.git` file says `gitdir: <main>/.git/worktrees/<n>`.
fn main_checkout(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(root.join(".git")).ok()?;
    let gitdir = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    let gitdir = if gitdir.is_absolute() {
        gitdir
    } else {
        root.join(gitdir)
    };
    let worktrees = gitdir.parent()?;
    (worktrees.file_name()? == "worktrees")
        .then(|| worktrees.parent()?.parent().map(Path::to_path_buf))
        .flatten()
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
    // The rule for the longest folder that holds this one decides.
    let mut best: Option<(usize, bool)> = None;
    for (path, rule) in rules {
        let p = PathBuf::from(path);
        let (at, trust) = match rule.as_str() {
            Some("TRUST_FOLDER") => (p.clone(), true),
            Some("DO_NOT_TRUST") => (p.clone(), false),
            Some("TRUST_PARENT") => match p.parent() {
                Some(parent) => (parent.to_path_buf(), true),
                None => continue,
            },
            _ => continue,
        };
        if cwd.starts_with(&at) {
            let len = at.as_os_str().len();
            if best.is_none_or(|(l, _)| len >= l) {
                best = Some((len, trust));
            }
        }
    }
    best.is_some_and(|(_, t)| t)
}
