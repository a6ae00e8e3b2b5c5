//! The broker's entry written into a client's file, everything else kept as written: JSON with
//! comments through a concrete syntax tree (jsonc-parser), TOML through toml_edit.

use std::path::Path;

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::{Value, json};
use sha2::Digest;

use crate::client::{ENTRY_NAME, Format};
use crate::{Client, ClientsError, Entry};

/// `sha256:` of a file's bytes (what a dry run saw, checked again before applying).
pub fn sha256(bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    let hex = hex::encode(digest);
    format!("sha256:{hex}")
}

/// The entry as the client's file holds it, as JSON (for TOML too), for comparisons.
pub fn entry_value(client: Client, entry: &Entry) -> Value {
    let mut v = match client.format() {
        Format::Json { typed: true, .. } => {
            json!({"type": "stdio", "command": entry.command, "args": entry.args})
        }
        Format::Json { .. } | Format::Toml => json!({"command": entry.command, "args": entry.args}),
    };
    if !entry.env.is_empty() {
        let env: serde_json::Map<String, Value> = entry
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        v["env"] = Value::Object(env);
    }
    v
}

pub(crate) fn to_cst(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(to_cst).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), to_cst(v))).collect())
        }
    }
}

fn json_options() -> ParseOptions {
    ParseOptions::default()
}

pub(crate) fn broken_json(
    path: &Path,
    e: &jsonc_parser::errors::ParseError,
    text: &str,
) -> ClientsError {
    let at = e.range().start.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    ClientsError::Broken {
        path: path.to_path_buf(),
        format: "JSON",
        line,
        column,
        reason: e.kind().to_string(),
    }
}

pub(crate) fn broken_toml(path: &Path, e: &toml_edit::TomlError, text: &str) -> ClientsError {
    let at = e.span().map_or(0, |s| s.start).min(text.len());
    let before = &text[..at];
    ClientsError::Broken {
        path: path.to_path_buf(),
        format: "TOML",
        line: before.matches('\n').count() + 1,
        column: before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
        reason: e.message().to_string(),
    }
}

/// The file's text with the broker's entry set (added, or replaced when there is one);
/// `existing` is the file's text, `None` when it does not exist.
pub fn render(
    client: Client,
    path: &Path,
    existing: Option<&str>,
    entry: &Entry,
) -> Result<String, ClientsError> {
    match client.format() {
        Format::Json { key, .. } => render_json(client, key, path, existing, entry),
        Format::Toml => render_toml(path, existing, entry),
    }
}

/// `render` for a JSON file whose servers are under `key`.
fn render_json(
    client: Client,
    key: &str,
    path: &Path,
    existing: Option<&str>,
    entry: &Entry,
) -> Result<String, ClientsError> {
    let value = entry_value(client, entry);
    let text = existing.filter(|t| !t.trim().is_empty()).unwrap_or("{}\n");
    let root =
        CstRootNode::parse(text, &json_options()).map_err(|e| broken_json(path, &e, text))?;
    if root.value().is_some() && root.object_value().is_none() {
        return Err(ClientsError::Shape {
            path: path.to_path_buf(),
            what: "the top level is not an object".into(),
        });
    }
    let top = root.object_value_or_set();
    if let Some(prop) = top.get(key)
        && prop.object_value().is_none()
    {
        return Err(ClientsError::Shape {
            path: path.to_path_buf(),
            what: format!("`{key}` is not an object; fix it by hand first"),
        });
    }
    set_json_entry(&top.object_value_or_set(key), &value);
    // The profile says which servers the client may start: the list is set whole.
    if matches!(client, Client::Gemini | Client::Agy)
        && let Some(list) = &entry.allowed_servers
    {
        set_allowed(&top, list);
    }
    // Gemini CLI starts only the servers its `mcp.allowed` names, when the user keeps
    // such a list: the broker's entry joins it, or it would never start.
    if client == Client::Gemini {
        join_allowed(&top);
    }
    let mut out = root.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// Sets the broker's entry among a JSON file's servers to `value`.
fn set_json_entry(servers: &CstObject, value: &Value) {
    // An entry that runs the broker under another key is the one to update: a second
    // would show every tool twice.
    let held = jsonc_parser::parse_to_serde_value(&servers.to_string(), &json_options())
        .ok()
        .flatten()
        .and_then(|v: Value| v.as_object().cloned())
        .unwrap_or_default();
    let name = crate::client::broker_key(&held).unwrap_or_else(|| ENTRY_NAME.to_string());
    match servers.get(&name) {
        // The user's own keys on the entry (env, disabled, ...) stay; ours are set.
        Some(prop) if prop.object_value().is_some() => {
            if let (Some(obj), Value::Object(fields)) = (prop.object_value(), value) {
                for (k, v) in fields {
                    match obj.get(k) {
                        Some(existing) => existing.set_value(to_cst(v)),
                        None => {
                            obj.append(k, to_cst(v));
                        }
                    }
                }
            }
        }
        Some(prop) => prop.set_value(to_cst(value)),
        None => {
            servers.append(ENTRY_NAME, to_cst(value));
        }
    }
}

/// Sets `mcp.allowed` to the profile's servers and the broker's entry.
fn set_allowed(top: &CstObject, list: &[String]) {
    let mut names: Vec<CstInputValue> = list
        .iter()
        .filter(|n| n.as_str() != ENTRY_NAME)
        .map(|n| CstInputValue::String(n.clone()))
        .collect();
    names.push(CstInputValue::String(ENTRY_NAME.to_string()));
    let mcp = top.object_value_or_set("mcp");
    match mcp.get("allowed") {
        Some(p) => p.set_value(CstInputValue::Array(names)),
        None => {
            mcp.append("allowed", CstInputValue::Array(names));
        }
    }
}

/// Adds the broker's entry to `mcp.allowed` when the file has such a list without it.
fn join_allowed(top: &CstObject) {
    let Some(allowed) = top
        .get("mcp")
        .and_then(|m| m.object_value())
        .and_then(|m| m.get("allowed"))
        .and_then(|a| a.array_value())
    else {
        return;
    };
    let listed = jsonc_parser::parse_to_serde_value(&allowed.to_string(), &json_options())
        .ok()
        .flatten()
        .and_then(|v: Value| v.as_array().cloned())
        .unwrap_or_default();
    if !listed.iter().any(|v| v == ENTRY_NAME) {
        allowed.append(CstInputValue::String(ENTRY_NAME.to_string()));
    }
}

/// `render` for Codex's TOML file.
fn render_toml(path: &Path, existing: Option<&str>, entry: &Entry) -> Result<String, ClientsError> {
    let text = existing.unwrap_or("");
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| broken_toml(path, &e, text))?;
    let item = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    });
    // `mcp_servers = { … }` is valid TOML Codex reads: it becomes a table, whose
    // entries can take the broker's as a table of its own.
    if let Some(inline) = item.as_inline_table().cloned() {
        let mut t = inline.into_table();
        t.set_implicit(true);
        *item = toml_edit::Item::Table(t);
    }
    let servers = item.as_table_mut().ok_or_else(|| ClientsError::Shape {
        path: path.to_path_buf(),
        what: "mcp_servers is not a table".into(),
    })?;
    set_toml_entry(servers, entry);
    Ok(doc.to_string())
}

/// Sets the broker's entry among a TOML file's servers.
fn set_toml_entry(servers: &mut toml_edit::Table, entry: &Entry) {
    let name = crate::client::broker_key(
        toml_to_json(&toml_edit::Item::Table(servers.clone()))
            .as_object()
            .unwrap_or(&serde_json::Map::new()),
    )
    .unwrap_or_else(|| ENTRY_NAME.to_string());
    let mut args = toml_edit::Array::new();
    for a in &entry.args {
        args.push(a.as_str());
    }
    // An entry there already keeps the user's own keys (env, timeouts, comments).
    let mut env = toml_edit::InlineTable::new();
    for (k, v) in &entry.env {
        env.insert(k, v.as_str().into());
    }
    match servers
        .get_mut(&name)
        .and_then(toml_edit::Item::as_table_like_mut)
    {
        Some(t) => {
            t.insert("command", toml_edit::value(entry.command.as_str()));
            t.insert("args", toml_edit::value(args));
            if !entry.env.is_empty() {
                t.insert("env", toml_edit::value(env));
            }
        }
        None => {
            let mut table = toml_edit::Table::new();
            table["command"] = toml_edit::value(entry.command.as_str());
            table["args"] = toml_edit::value(args);
            if !entry.env.is_empty() {
                table["env"] = toml_edit::value(env);
            }
            servers.insert(ENTRY_NAME, toml_edit::Item::Table(table));
        }
    }
}

/// The whole file as JSON (TOML turned into JSON too); `None` for an empty JSON file.
pub(crate) fn parsed(
    client: Client,
    path: &Path,
    text: &str,
) -> Result<Option<Value>, ClientsError> {
    match client.format() {
        Format::Json { .. } => {
            if text.trim().is_empty() {
                return Ok(None);
            }
            jsonc_parser::parse_to_serde_value(text, &json_options())
                .map(Some)
                .map_err(|e| broken_json(path, &e, text))
        }
        Format::Toml => {
            let doc: toml_edit::DocumentMut =
                text.parse().map_err(|e| broken_toml(path, &e, text))?;
            Ok(Some(toml_to_json(doc.as_item())))
        }
    }
}

fn toml_to_json(item: &toml_edit::Item) -> Value {
    use toml_edit::Item;
    match item {
        Item::None => Value::Null,
        Item::Value(v) => toml_value(v),
        Item::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_to_json(v)))
                .collect(),
        ),
        Item::ArrayOfTables(a) => Value::Array(
            a.iter()
                .map(|t| {
                    Value::Object(
                        t.iter()
                            .map(|(k, v)| (k.to_string(), toml_to_json(v)))
                            .collect(),
                    )
                })
                .collect(),
        ),
    }
}

fn toml_value(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match v {
        T::String(s) => Value::String(s.value().clone()),
        T::Integer(i) => json!(i.value()),
        T::Float(f) => json!(f.value()),
        T::Boolean(b) => Value::Bool(*b.value()),
        T::Datetime(d) => Value::String(d.value().to_string()),
        T::Array(a) => Value::Array(a.iter().map(toml_value).collect()),
        T::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_value(v)))
                .collect(),
        ),
    }
}

/// The broker's entry in the file's text, as JSON; `None` when there is none.
pub fn current_entry(
    client: Client,
    path: &Path,
    text: &str,
) -> Result<Option<Value>, ClientsError> {
    match client.format() {
        Format::Json { key, .. } => {
            if text.trim().is_empty() {
                return Ok(None);
            }
            let v: Value = jsonc_parser::parse_to_serde_value(text, &json_options())
                .map_err(|e| broken_json(path, &e, text))?;
            let Some(servers) = v.get(key).and_then(Value::as_object) else {
                return Ok(None);
            };
            Ok(crate::client::broker_key(servers).and_then(|k| servers.get(&k).cloned()))
        }
        Format::Toml => {
            let doc: toml_edit::DocumentMut =
                text.parse().map_err(|e| broken_toml(path, &e, text))?;
            let Some(servers) = doc.get("mcp_servers") else {
                return Ok(None);
            };
            let Some(name) = crate::client::broker_key(
                toml_to_json(servers)
                    .as_object()
                    .unwrap_or(&serde_json::Map::new()),
            ) else {
                return Ok(None);
            };
            let Some(t) = servers.get(&name).and_then(toml_edit::Item::as_table_like) else {
                return Ok(None);
            };
            let command = t.get("command").and_then(|c| c.as_str()).unwrap_or("");
            let args: Vec<&str> = t
                .get("args")
                .and_then(|a| a.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            let mut v = json!({"command": command, "args": args});
            if let Some(env) = t.get("env") {
                v["env"] = toml_to_json(env);
            }
            Ok(Some(v))
        }
    }
}

/// Whether the entry the file holds (`current_entry`) starts what `entry` says: its command,
/// arguments and type, whatever other keys the user gave it.
pub fn runs(client: Client, held: &Value, entry: &Entry) -> bool {
    let want = entry_value(client, entry);
    want.as_object()
        .is_some_and(|w| w.iter().all(|(k, v)| held.get(k) == Some(v)))
}

/// A unified diff of `before` (empty when the file does not exist) and `after`, labelled
/// with the file's path.
pub fn diff(path: &Path, before: &str, after: &str) -> String {
    let label = path.display().to_string();
    // Patience anchors on the file's unique lines; what lies between two anchors (a block of
    // thousands of new entries) is diffed by Myers, quadratic in the lines it adds: past the
    // deadline it settles for a diff that is correct but may be less than minimal.
    similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Patience)
        .timeout(std::time::Duration::from_millis(250))
        .diff_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&label, &label)
        .to_string()
}
