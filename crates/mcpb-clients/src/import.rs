//! The servers a client starts itself, read from its file, and the file without them: what
//! moving a client onto the broker takes.

use std::path::Path;

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::CstRootNode;
use serde_json::Value;

use crate::client::{ENTRY_NAME, Format};
use crate::{Client, ClientsError};

/// One server of a client's file, as written there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub url: Option<String>,
    /// `sse` when the file says so; otherwise a URL is streamable HTTP.
    pub sse: bool,
    pub headers: Vec<(String, String)>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn pairs(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn server_of(name: &str, v: &Value) -> Server {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    // Clients name a server's URL differently (`url`, Gemini's `httpUrl`, `serverUrl`).
    let url = text("url")
        .or_else(|| text("httpUrl"))
        .or_else(|| text("serverUrl"));
    Server {
        name: name.to_string(),
        command: text("command"),
        args: strings(v.get("args")),
        env: pairs(v.get("env")),
        sse: text("type").as_deref() == Some("sse") || text("transport").as_deref() == Some("sse"),
        url,
        headers: pairs(v.get("headers").or_else(|| v.get("http_headers"))),
    }
}

/// Every server in the client's file except the broker's own entry, in file order.
pub fn servers(client: Client, path: &Path, text: &str) -> Result<Vec<Server>, ClientsError> {
    let Some(held) = crate::edit::parsed(client, path, text)? else {
        return Ok(Vec::new());
    };
    let key = match client.format() {
        Format::Json { key, .. } => key,
        Format::Toml => "mcp_servers",
    };
    Ok(held
        .get(key)
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter(|(k, _)| k.as_str() != ENTRY_NAME)
                .map(|(k, v)| server_of(k, v))
                .collect()
        })
        .unwrap_or_default())
}

/// The file's text without the servers `names`; everything else as written.
pub fn without(
    client: Client,
    path: &Path,
    text: &str,
    names: &[String],
) -> Result<String, ClientsError> {
    match client.format() {
        Format::Json { key, .. } => {
            let root = CstRootNode::parse(text, &ParseOptions::default())
                .map_err(|e| crate::edit::broken_json(path, &e, text))?;
            if let Some(servers) = root.object_value().and_then(|o| o.object_value(key)) {
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
            if let Some(t) = doc
                .get_mut("mcp_servers")
                .and_then(toml_edit::Item::as_table_like_mut)
            {
                for n in names {
                    t.remove(n);
                }
            }
            Ok(doc.to_string())
        }
    }
}
