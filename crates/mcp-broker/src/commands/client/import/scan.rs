//! What `client import` finds before it decides anything: every place the client keeps servers
//! for this folder, each file's text, each server with the client's own verdict on starting it
//! (approval, trust, allow/exclude lists), the servers it cannot move at all (Gemini CLI's
//! extensions), and a mask for the secrets those files hold, so that no dry run prints one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Approvals, Client, Place, Scope, Server};

use crate::commands::client::files::{read, refused};
use crate::commands::import::secrets::{arg_secret, credential_key, secret_looking, url_secret};

/// A server that stays in the client whatever the import does, and why.
pub(crate) struct Stays {
    pub label: String,
    pub name: String,
    pub why: String,
    pub file: String,
    /// Whether the client starts it (an extension's server) or not (a scope not imported is
    /// started as before).
    pub starts: bool,
}

pub(crate) struct Scan {
    pub places: Vec<Place>,
    /// Each file's text (`None`: no such file).
    pub before: BTreeMap<PathBuf, Option<String>>,
    /// The servers of the chosen scopes, with the client's own reason not to start each.
    pub found: Vec<(Place, Server, Option<String>)>,
    pub stays: Vec<Stays>,
    /// The profile the broker's entry names now, when it has one.
    pub entry_profile: Option<String>,
    /// Every value in any of the client's servers (any scope) that may be a credential.
    pub mask: Vec<String>,
    /// Claude Code's other folders with local servers of their own, which this import leaves
    /// (without `--all-projects`): the folder and how many.
    pub elsewhere: Vec<(String, usize)>,
}

/// Every place of the client for this folder (and, with `all_projects`, Claude Code's local
/// servers of every folder); the local folder's key.
fn places(client: Client, home: &Path, cwd: &Path, all_projects: bool) -> (Vec<Place>, String) {
    let claude = read(&client.config_path(Scope::User, home, cwd))
        .ok()
        .flatten()
        .unwrap_or_default();
    let here = mcpb_clients::local_folder(&claude, cwd);
    let mut out = client.places(home, cwd, Some(&here));
    if client == Client::ClaudeCode && all_projects {
        for folder in mcpb_clients::local_folders(&claude) {
            if folder != here {
                out.push(Place {
                    client,
                    scope: Scope::Local,
                    path: client.config_path(Scope::Local, home, cwd),
                    folder: Some(folder),
                });
            }
        }
    }
    // In the home folder a project's file is the user's own (`~/.cursor/mcp.json`): once.
    let mut seen: Vec<(PathBuf, Vec<String>)> = Vec::new();
    out.retain(|p| {
        let key = (p.path.clone(), p.keys());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    (out, here)
}

/// Gemini CLI's extensions bring servers of their own, which only the extension can take away.
fn gemini_extensions(home: &Path) -> Vec<Stays> {
    let dir = home.join(".gemini/extensions");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let manifest = e.path().join("gemini-extension.json");
        let Some(v) = std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            continue;
        };
        let ext = e.file_name().to_string_lossy().into_owned();
        for name in v["mcpServers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            out.push(Stays {
                label: format!("extension {ext}"),
                name: name.clone(),
                why: format!(
                    "comes with Gemini CLI extension {ext}; disable or uninstall it there"
                ),
                file: manifest.display().to_string(),
                starts: true,
            });
        }
    }
    out
}

/// Reads what the client has: `scopes` empty means every scope. `trust_project`: the person
/// named this folder's project servers (as `--scope project` does).
pub(crate) fn scan(
    client: Client,
    home: &Path,
    cwd: &Path,
    scopes: &[Scope],
    all_projects: bool,
    trust_project: bool,
) -> Result<Scan, ExitCode> {
    let named = trust_project || scopes.contains(&Scope::Project);
    let (places, folder) = places(client, home, cwd, all_projects);
    let user_file = client.config_path(Scope::User, home, cwd);
    let mut before = BTreeMap::new();
    for p in places.iter().map(|p| &p.path).chain([&user_file]) {
        if !before.contains_key(p) {
            before.insert(p.clone(), read(p)?);
        }
    }
    let approvals = Approvals::read(client, home, cwd, &folder).with_project_named(named);
    // Another folder's local servers answer to that folder's switches (`--all-projects`).
    let mut others: BTreeMap<String, Approvals> = BTreeMap::new();
    let mut found = Vec::new();
    let mut stays = Vec::new();
    let mut mask = Vec::new();
    for p in &places {
        let approvals = match &p.folder {
            Some(f) if f != &folder => others.entry(f.clone()).or_insert_with(|| {
                Approvals::read(client, home, Path::new(f), f).with_project_named(named)
            }),
            _ => &approvals,
        };
        let text = before[&p.path].clone().unwrap_or_default();
        let servers = mcpb_clients::servers(p, &text).map_err(|e| refused(&e))?;
        mask.extend(secret_values(&servers));
        for s in servers {
            if scopes.is_empty() || scopes.contains(&p.scope) {
                let why = approvals.refused(p, &s.name);
                found.push((p.clone(), s, why));
            } else {
                stays.push(Stays {
                    label: p.label(),
                    name: s.name,
                    why: "scope not imported".into(),
                    file: p.path.display().to_string(),
                    starts: true,
                });
            }
        }
    }
    if client == Client::Gemini {
        stays.extend(gemini_extensions(home));
    }
    let entry_profile = before[&user_file]
        .as_deref()
        .and_then(|t| {
            mcpb_clients::current_entry(client, &user_file, t)
                .ok()
                .flatten()
        })
        .and_then(|e| {
            let args: Vec<String> = e["args"]
                .as_array()?
                .iter()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect();
            let at = args.iter().position(|a| a == "--profile")?;
            args.get(at + 1).cloned()
        });
    mask.sort_by_key(|v: &String| std::cmp::Reverse(v.len()));
    mask.dedup();
    let mut elsewhere = Vec::new();
    if client == Client::ClaudeCode && !all_projects {
        let text = before[&user_file].clone().unwrap_or_default();
        for f in mcpb_clients::local_folders(&text) {
            let place = Place {
                client,
                scope: Scope::Local,
                path: user_file.clone(),
                folder: Some(f.clone()),
            };
            let n = mcpb_clients::servers(&place, &text).map_or(0, |s| s.len());
            if f != folder && n > 0 {
                elsewhere.push((f, n));
            }
        }
    }
    Ok(Scan {
        places,
        before,
        found,
        stays,
        entry_profile,
        mask,
        elsewhere,
    })
}

/// Every value in these servers that may be a credential: what a dry run must never print.
fn secret_values(servers: &[Server]) -> Vec<String> {
    let mut out = Vec::new();
    for s in servers {
        for (k, v) in s.env.iter().chain(&s.headers) {
            if credential_key(k) || secret_looking(v) {
                out.push(v.clone());
                if let Some((_, token)) = v.split_once(' ') {
                    out.push(token.to_string());
                }
            }
        }
        // `--token abc`, `--api-key=abc`, and anything that looks like a token on its own.
        let mut after_flag = false;
        for a in &s.args {
            let flag = a.trim_start_matches('-');
            let (name, inline) = flag
                .split_once('=')
                .map_or((flag, None), |(f, v)| (f, Some(v)));
            let secret_flag = a.starts_with('-') && credential_key(name);
            if after_flag || arg_secret(a) {
                out.push(a.clone());
            }
            if let (true, Some(v)) = (secret_flag, inline) {
                out.push(v.to_string());
            }
            after_flag = secret_flag && inline.is_none();
        }
        out.extend(s.url.iter().filter(|u| url_secret(u)).cloned());
    }
    out.retain(|v| v.len() >= 6);
    out
}

/// A client file's diff with every credential hidden: the values found (as written, and as
/// JSON writes them), and, line by line, the value of any `"KEY": "…"` / `KEY = "…"` whose
/// key names a credential (a value written with escapes is caught by its key).
pub(crate) fn masked(diff: &str, secrets: &[String]) -> String {
    let mut out = diff.to_string();
    for s in secrets {
        out = out.replace(s.as_str(), "<hidden>");
        if let Ok(json) = serde_json::to_string(s) {
            out = out.replace(json.trim_matches('"'), "<hidden>");
        }
    }
    out.lines().map(mask_line).collect::<Vec<_>>().join("\n")
        + if out.ends_with('\n') { "\n" } else { "" }
}

/// `"KEY": "value"` and `KEY = "value"` pairs of a line, with credential values hidden.
fn mask_line(line: &str) -> String {
    // TOML's bare keys: `API_KEY = "…"` (after a diff's `+`/`-`/` `).
    if let Some((k, v)) = line.split_once('=') {
        let key = k.trim().trim_start_matches(['+', '-']).trim();
        if !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
            && credential_key(key)
            && v.trim_start().starts_with('"')
        {
            return format!("{k}= \"<hidden>\"");
        }
    }
    let mut out = String::new();
    let mut rest = line;
    while let Some(q) = rest.find('"') {
        let (head, tail) = rest.split_at(q);
        out.push_str(head);
        let Some(key_end) = string_end(tail) else {
            out.push_str(tail);
            return out;
        };
        let key = &tail[1..key_end];
        out.push_str(&tail[..=key_end]);
        let after = &tail[key_end + 1..];
        let sep = after.len() - after.trim_start_matches([' ', ':', '=']).len();
        let value = &after[sep..];
        if sep > 0
            && value.starts_with('"')
            && credential_key(key)
            && let Some(v_end) = string_end(value)
        {
            out.push_str(&after[..sep]);
            out.push_str("\"<hidden>\"");
            rest = &value[v_end + 1..];
            continue;
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The index of the quote that closes the string starting at `s[0]`.
fn string_end(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

/// Whether `file` is tracked by the git repository it lies in: a project file the team shares,
/// which the import does not rewrite on its own. Without git, or outside a work tree, nothing
/// is shared.
///
/// A repository is someone else's code: git is pointed at the work tree's own `.git` (found by
/// walking up, never discovered from the file's folder, where a committed bare repository could
/// stand), and told to run nothing and fetch nothing (no fsmonitor, no hooks, no lazy fetch of a
/// partial clone, no transport at all).
pub(crate) fn tracked_by_git(file: &Path) -> bool {
    let Some(dir) = file.parent() else {
        return false;
    };
    let Some(root) = dir.ancestors().find(|a| a.join(".git").exists()) else {
        return false;
    };
    let Ok(relative) = file.strip_prefix(root) else {
        return false;
    };
    std::process::Command::new("git")
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "protocol.allow=never",
            "-c",
            "safe.bareRepository=explicit",
        ])
        .env("GIT_DIR", root.join(".git"))
        .env("GIT_WORK_TREE", root)
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .current_dir(root)
        .args(["ls-files", "--error-unmatch", "--"])
        .arg(relative)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_found_in_arguments_and_urls() {
        let mut s = mcpb_clients::Server {
            name: "s".into(),
            command: Some("x".into()),
            args: vec![
                "--token".into(),
                "abc123".into(),
                "--api-key=def456".into(),
                "-v".into(),
            ],
            ..mcpb_clients::Server::default()
        };
        let found = secret_values(std::slice::from_ref(&s));
        assert!(found.contains(&"abc123".to_string()) && found.contains(&"def456".to_string()));
        assert!(!found.contains(&"-v".to_string()));
        s.args.clear();
        s.url = Some("https://mcp.example/api/mcp/s/a1b2c3d4e5f6g7h8i9j0/mcp".into());
        assert_eq!(secret_values(std::slice::from_ref(&s)).len(), 1);
        assert!(url_secret("ws://admin:S3cret@host/x"));
        assert!(url_secret("https://h/x?key=abc"));
        assert!(!url_secret("https://h.example/v1/mcp"));
    }

    #[test]
    fn credentials_are_hidden_however_they_are_written() {
        let d = "-    \"env\": {\"API_KEY\": \"SECRETQ\\\"uote\\\\back12345\", \"LOG\": \"info\"}\n+x\n";
        let m = masked(d, &[]);
        assert!(!m.contains("SECRETQ"), "{m}");
        assert!(m.contains("\"LOG\": \"info\""), "{m}");
        let t = "-GH_TOKEN = \"tok\\u0041BC123\"\n";
        assert_eq!(masked(t, &[]), "-GH_TOKEN = \"<hidden>\"\n");
        let args = "-  \"args\": [\"--key\", \"abcdef0123456789abcdef\"]";
        let m = masked(args, &["abcdef0123456789abcdef".into()]);
        assert!(!m.contains("abcdef0123"), "{m}");
        // A short value is hidden by its key, never replaced everywhere.
        let short = "- \"MAX_TOKEN\": \"1\", \"path\": \"/a1/b1\"";
        let m = masked(short, &[]);
        assert!(m.contains("/a1/b1") && m.contains("<hidden>"), "{m}");
    }
}
