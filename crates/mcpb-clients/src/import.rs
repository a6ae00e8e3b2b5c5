//! The servers a client starts itself, read from its file, and the file without them: what
//! moving a client onto the broker takes.

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::CstRootNode;
use serde_json::Value;

use crate::client::Format;
use crate::client::broker_key;
use crate::place::{Place, servers_object};
use crate::{Client, ClientsError};

/// One server of a client's file, as written there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub url: Option<String>,
    /// `sse` when the file says so; otherwise a URL is streamable HTTP.
    pub sse: bool,
    pub headers: Vec<(String, String)>,
    /// The working directory the client starts it in, when the file names one.
    pub cwd: Option<String>,
    /// Switched off in the client (Codex `enabled = false`, `disabled: true`), or by the
    /// client's own approval state (see `Approvals`).
    pub disabled: bool,
    /// Only these tools (Gemini `includeTools`, Codex `enabled_tools`).
    pub tools_allow: Vec<String>,
    /// Never these tools (Gemini `excludeTools`, Codex `disabled_tools`).
    pub tools_deny: Vec<String>,
    /// Variables passed through from the client's environment (Codex `env_vars`).
    pub env_vars: Vec<String>,
    /// Headers whose values come from variables (Codex `env_http_headers`, and
    /// `bearer_token_env_var` as `Authorization: Bearer`): (header, variable, prefix).
    pub env_headers: Vec<(String, String, String)>,
    /// An env file the client reads (VS Code's and Cursor's `envFile`).
    pub env_file: Option<String>,
}

/// The strings of a JSON array (others skipped); empty when it is not one.
pub(crate) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A scalar as the client passes it: strings as they are, numbers and booleans as written.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn pairs(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), scalar(v)?)))
                .collect()
        })
        .unwrap_or_default()
}

fn server_of(client: Client, name: &str, v: &Value) -> Server {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    // Clients name a server's URL differently (`url`, Gemini's `httpUrl`, `serverUrl`).
    let http = text("httpUrl").or_else(|| text("serverUrl"));
    let url = http.clone().or_else(|| text("url"));
    // Gemini CLI's `url` is an SSE endpoint; `httpUrl` streamable HTTP.
    let sse = text("type").as_deref() == Some("sse")
        || text("transport").as_deref() == Some("sse")
        || (client == Client::Gemini && http.is_none() && url.is_some());
    let mut env_headers: Vec<(String, String, String)> = pairs(v.get("env_http_headers"))
        .into_iter()
        .map(|(h, var)| (h, var, String::new()))
        .collect();
    if let Some(var) = text("bearer_token_env_var") {
        env_headers.push(("Authorization".into(), var, "Bearer ".into()));
    }
    let mut headers = pairs(v.get("headers").or_else(|| v.get("http_headers")));
    // Codex's literal `bearer_token`: a header like any other, so the import treats its value as
    // the credential it is (moved to a secret file, hidden in the dry run), never dropping it.
    if let Some(token) = text("bearer_token") {
        headers.push(("Authorization".into(), format!("Bearer {token}")));
    }
    Server {
        name: name.to_string(),
        command: text("command"),
        args: v
            .get("args")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(scalar).collect())
            .unwrap_or_default(),
        env: pairs(v.get("env")),
        sse,
        url,
        headers,
        cwd: text("cwd"),
        disabled: v.get("enabled") == Some(&Value::Bool(false))
            || v.get("disabled") == Some(&Value::Bool(true)),
        tools_allow: strings(v.get("includeTools").or_else(|| v.get("enabled_tools"))),
        tools_deny: strings(v.get("excludeTools").or_else(|| v.get("disabled_tools"))),
        env_vars: strings(v.get("env_vars")),
        env_headers,
        env_file: text("envFile"),
    }
}

/// The environment the broker writes into its own entry for this user (`MCP_BROKER_HOME` and
/// `MCP_BROKER_CONFIG` when they are not the defaults), as `(name, absolute path)` pairs. What
/// a project entry may carry to still be the broker's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnEnv(pub Vec<(String, String)>);

impl OwnEnv {
    /// What this process would write: its own `MCP_BROKER_HOME` and `MCP_BROKER_CONFIG`.
    pub fn from_env() -> Self {
        let abs = |p: std::path::PathBuf| std::path::absolute(&p).unwrap_or(p);
        Self(
            mcpb_config::env::ENTRY
                .into_iter()
                .filter_map(|k| {
                    let v = std::env::var_os(k).filter(|v| !v.is_empty())?;
                    Some((k.to_string(), abs(v.into()).display().to_string()))
                })
                .collect(),
        )
    }
}

/// Every server at `place` except the broker's own entry (under whatever key), in file order.
/// The broker's own environment is this process's (`OwnEnv::from_env`).
pub fn servers(place: &Place, text: &str) -> Result<Vec<Server>, ClientsError> {
    servers_with(place, text, &OwnEnv::from_env())
}

/// Every server at `place` except the broker's own entry, `own` being the environment the broker
/// writes into its entries for this user.
///
/// A project's file is the repository's to write: there an entry is the broker's own only if
/// it runs this very binary's shim exactly as the broker writes it for this user. One that
/// merely looks like it (keyed `mcp-broker`, `…/mcp-broker stdio` from somewhere else, or the
/// broker's variables pointing anywhere but this user's own home and config) is listed like any
/// server, never hidden.
pub fn servers_with(place: &Place, text: &str, own: &OwnEnv) -> Result<Vec<Server>, ClientsError> {
    let Some(held) = servers_object(place, text)? else {
        return Ok(Vec::new());
    };
    let broker = if place.scope == crate::Scope::Project {
        held.iter()
            .find(|(_, v)| runs_this_binary(v, own))
            .map(|(k, _)| k.clone())
    } else {
        broker_key(&held)
    };
    Ok(held
        .iter()
        .filter(|(k, _)| Some(k.as_str()) != broker.as_deref())
        .map(|(k, v)| server_of(place.client, k, v))
        .collect())
}

/// The file's text without the servers `names` at `place`; everything else as written.
pub fn without(place: &Place, text: &str, names: &[String]) -> Result<String, ClientsError> {
    let path = &place.path;
    let keys = place.keys();
    match place.client.format() {
        Format::Json { .. } => {
            let root = CstRootNode::parse(text, &ParseOptions::default())
                .map_err(|e| crate::edit::broken_json(path, &e, text))?;
            let mut at = root.object_value();
            for k in &keys {
                at = at.and_then(|o| o.object_value(k));
            }
            if let Some(servers) = at {
                for n in names {
                    if let Some(p) = servers.get(n) {
                        p.remove();
                    }
                }
            }
            Ok(root.to_string())
        }
        Format::Toml => {
            let mut doc: toml_edit::DocumentMut = text
                .parse()
                .map_err(|e| crate::edit::broken_toml(path, &e, text))?;
            // A table's comments are its own (its prefix): they stay in the file, at its end,
            // when the table goes.
            let mut comments = String::new();
            if let Some(t) = doc
                .get_mut("mcp_servers")
                .and_then(toml_edit::Item::as_table_like_mut)
            {
                for n in names {
                    if let Some(toml_edit::Item::Table(gone)) = t.remove(n) {
                        let prefix = gone.decor().prefix().and_then(|p| p.as_str());
                        if let Some(p) = prefix.filter(|p| p.contains('#')) {
                            comments.push_str(p.trim_start_matches('\n'));
                        }
                    }
                }
            }
            if !comments.is_empty() {
                let trailing = doc.trailing().as_str().unwrap_or("").to_string();
                doc.set_trailing(format!("{trailing}{comments}"));
            }
            Ok(doc.to_string())
        }
    }
}

#[cfg(test)]
mod without_tests {
    use super::*;

    #[test]
    fn a_removed_toml_tables_comments_stay() {
        let place = crate::Place {
            client: crate::Client::Codex,
            scope: crate::Scope::Project,
            path: "/w/.codex/config.toml".into(),
            folder: Some("/w".into()),
        };
        let text = "# the team's servers\n\n# notes: ask Ana for the key\n[mcp_servers.notes]\ncommand = \"notes\"\n";
        let out = without(&place, text, &["notes".to_string()]).unwrap();
        assert!(
            out.contains("# the team's servers") && out.contains("# notes: ask Ana for the key"),
            "{out:?}"
        );
        assert!(!out.contains("command"), "{out:?}");
    }
}

/// Claude Code's own per-user switch for a project's servers: `names` are added to
/// `disabledMcpjsonServers` (and taken out of `enabledMcpjsonServers`), so Claude Code stops
/// starting them in that folder while the project's `.mcp.json`, shared with a team, stays as
/// it is. `folder`: under `projects[folder]` of `~/.claude.json`; `None`: at the top of a
/// settings file (the project's `.claude/settings.local.json`, where Claude Code keeps them).
pub fn disable_project_servers(
    path: &std::path::Path,
    text: &str,
    folder: Option<&str>,
    names: &[String],
) -> Result<String, ClientsError> {
    use jsonc_parser::cst::CstInputValue;
    let source = if text.trim().is_empty() { "{}" } else { text };
    let root = CstRootNode::parse(source, &ParseOptions::default())
        .map_err(|e| crate::edit::broken_json(path, &e, source))?;
    let project = match folder {
        Some(f) => root
            .object_value_or_set()
            .object_value_or_set("projects")
            .object_value_or_set(f),
        None => root.object_value_or_set(),
    };
    if let Some(enabled) = project.array_value("enabledMcpjsonServers") {
        for e in enabled.elements() {
            let on = e.as_string_lit().and_then(|l| l.decoded_value().ok());
            if on.is_some_and(|n| names.contains(&n)) {
                e.remove();
            }
        }
    }
    let disabled = project.array_value_or_set("disabledMcpjsonServers");
    let have: Vec<String> = disabled
        .elements()
        .iter()
        .filter_map(|e| e.as_string_lit()?.decoded_value().ok())
        .collect();
    for n in names.iter().filter(|n| !have.contains(n)) {
        disabled.append(CstInputValue::String(n.clone()));
    }
    Ok(root.to_string())
}

/// Whether an entry runs this executable's shim as the broker writes it: its command (a path,
/// or a name looked up on `PATH`) is this very file; its arguments `stdio` and at most
/// `--profile P` and `--client C`; no working directory; and in its environment only the
/// broker's own variables, each naming the very home or config the broker writes for this user
/// (`own`) by a plain absolute path. Judged by what a path resolves to, never by how it is
/// spelt: `/proc/self/cwd/…`, `${PWD}/…` or `${workspaceFolder}/…` resolve, when the client
/// starts the entry, to wherever the repository is.
fn runs_this_binary(server: &Value, own: &OwnEnv) -> bool {
    let args: Vec<&str> = server
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let shaped = args.first() == Some(&"stdio")
        && args[1..]
            .chunks(2)
            .all(|pair| matches!(pair, [flag, _] if *flag == "--profile" || *flag == "--client"));
    let env_ours = server
        .get("env")
        .and_then(Value::as_object)
        .is_none_or(|env| {
            env.iter().all(|(k, v)| {
                let mine = own.0.iter().find(|(name, _)| name == k);
                v.as_str()
                    .zip(mine)
                    .is_some_and(|(v, (_, mine))| same_plain_path(v, mine))
            })
        });
    // Only the keys the broker writes: a `url`, `httpUrl`, `serverUrl`, `headers` or a `type`
    // other than stdio makes a client connect elsewhere whatever `command` says.
    let plain = server.as_object().is_some_and(|m| {
        m.iter().all(|(k, v)| match k.as_str() {
            "command" | "args" | "env" => true,
            "type" => v.as_str() == Some("stdio"),
            _ => false,
        })
    });
    let stdio = shaped && env_ours && plain;
    let Some(command) = server.get("command").and_then(Value::as_str) else {
        return false;
    };
    let found = if command.contains('/') {
        Some(std::path::PathBuf::from(command))
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(command))
                .find(|p| p.is_file())
        })
    };
    let same = |p: std::path::PathBuf| match (
        std::fs::canonicalize(p),
        std::env::current_exe().and_then(std::fs::canonicalize),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    stdio && found.is_some_and(same)
}

/// Whether `written` is a plain absolute path (no `.` or `..`, no variable a client expands, not
/// under `/proc` or `/dev`, whose links mean something else in the process that reads them)
/// naming the same file as `mine`.
fn same_plain_path(written: &str, mine: &str) -> bool {
    use std::path::{Component, Path};
    let p = Path::new(written);
    let plain = p.is_absolute()
        && !written.contains(['$', '%', '{', '}', '~'])
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && !p.starts_with("/proc")
        && !p.starts_with("/dev");
    plain
        && (written == mine
            || matches!(
                (std::fs::canonicalize(p), std::fs::canonicalize(mine)),
                (Ok(a), Ok(b)) if a == b
            ))
}

#[cfg(test)]
mod disable_tests {
    use super::*;

    #[test]
    fn claude_codes_switch_turns_a_projects_servers_off_in_one_folder_only() {
        let text = "{\n  \"projects\": {\n    \"/w/app\": {\n      \"enabledMcpjsonServers\": [\"team\", \"other\"]\n    }\n  },\n  \"numStartups\": 3\n}\n";
        let out = disable_project_servers(
            std::path::Path::new("/h/.claude.json"),
            text,
            Some("/w/app"),
            &["team".to_string()],
        )
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["projects"]["/w/app"]["enabledMcpjsonServers"],
            serde_json::json!(["other"])
        );
        assert_eq!(
            v["projects"]["/w/app"]["disabledMcpjsonServers"],
            serde_json::json!(["team"])
        );
        assert_eq!(v["numStartups"], 3);
        let again = disable_project_servers(
            std::path::Path::new("/h/.claude.json"),
            &out,
            Some("/w/app"),
            &["team".to_string()],
        )
        .unwrap();
        assert_eq!(again, out, "once is enough");
        let local = disable_project_servers(
            std::path::Path::new("/w/app/.claude/settings.local.json"),
            "",
            None,
            &["team".to_string()],
        )
        .unwrap();
        let v: Value = serde_json::from_str(&local).unwrap();
        assert_eq!(v["disabledMcpjsonServers"], serde_json::json!(["team"]));
    }
}
