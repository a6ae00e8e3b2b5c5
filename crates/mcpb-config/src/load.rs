//! Finding, reading and parsing the config file.

use std::path::{Path, PathBuf};

use crate::error::{ConfigError, ConfigIssue};
use crate::raw::RawConfig;
use crate::resolve::{ResolveContext, resolve};
use crate::settings::{ConfigSource, Settings};

/// The configuration used when the user has none: one built-in example upstream behind the
/// `default` profile.
pub const EMBEDDED_DEFAULT: &str = include_str!("default.yaml");

/// The commented example written by `config init`.
pub const EXAMPLE: &str = include_str!("../../../config/broker.example.yaml");

/// Resolution order: `--config`, `$MCP_BROKER_CONFIG`, `<home>/broker.yaml`, else the embedded
/// default. An explicitly named file must exist; the home file is optional.
pub fn locate(explicit: Option<&Path>, ctx: &ResolveContext) -> ConfigSource {
    if let Some(p) = explicit {
        return ConfigSource::File(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("MCP_BROKER_CONFIG").filter(|p| !p.is_empty()) {
        return ConfigSource::File(PathBuf::from(p));
    }
    let home_file = ctx.runtime_root(None).join("broker.yaml");
    if home_file.is_file() {
        return ConfigSource::File(home_file);
    }
    ConfigSource::Embedded
}

/// Reads and resolves the configuration from `source`.
pub fn load(source: &ConfigSource, ctx: &ResolveContext) -> Result<Settings, ConfigError> {
    let (text, label) = match source {
        ConfigSource::File(path) => (
            std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
                path: path.clone(),
                source: e,
            })?,
            path.display().to_string(),
        ),
        ConfigSource::Embedded => (EMBEDDED_DEFAULT.to_string(), source.to_string()),
    };
    load_str(&text, &label, source.clone(), ctx)
}

pub fn load_str(
    text: &str,
    label: &str,
    source: ConfigSource,
    ctx: &ResolveContext,
) -> Result<Settings, ConfigError> {
    let raw = parse_raw(text, label)?;
    resolve(&raw, source, ctx).map_err(|issues| ConfigError::Invalid {
        file: label.to_string(),
        issues,
    })
}

/// Parses YAML into the raw contract. YAML 1.1 booleans are off (`command: NO` stays a string)
/// and duplicate keys are errors.
pub fn parse_raw(text: &str, label: &str) -> Result<RawConfig, ConfigError> {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.with_snippet = false;
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        let mut message = first_line_without_location(&e.to_string());
        let hint = hint_for(&message);
        // The keys it would have taken go in the hint, not in one long line.
        if let Some((field, _)) = unknown_field(&message) {
            message = format!("unknown field `{field}`");
        }
        ConfigError::Invalid {
            file: label.to_string(),
            issues: vec![ConfigIssue {
                line,
                column,
                path: key_path_at(text, line, column),
                hint,
                message,
            }],
        }
    })
}

/// `runtime.root` from a file that may be invalid otherwise, to find the daemon it belongs to.
pub fn runtime_root_hint(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Loose {
        #[serde(default)]
        runtime: Option<LooseRuntime>,
    }
    #[derive(serde::Deserialize)]
    struct LooseRuntime {
        #[serde(default)]
        root: Option<String>,
    }
    serde_saphyr::from_str::<Loose>(text).ok()?.runtime?.root
}

fn first_line_without_location(msg: &str) -> String {
    let first = msg.lines().next().unwrap_or(msg).trim();
    // The parser's advice about its own options means nothing to a user of this file.
    let first = first
        .split(", set DuplicateKeyPolicy")
        .next()
        .unwrap_or(first);
    // The location is rendered by us; drop the parser's own trailing " at line X, column Y".
    match first.rfind(" at line ") {
        Some(i) => first[..i].to_string(),
        None => first.to_string(),
    }
}

/// `unknown field `X`, expected one of a, b, c` (or `expected a` / `expected a or b`): the
/// field and the keys that would have been taken.
fn unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest
        .trim_start_matches(", ")
        .trim_start_matches("expected one of ")
        .trim_start_matches("expected ");
    let keys = expected
        .split([',', ' '])
        .map(|k| k.trim().trim_matches('`'))
        .filter(|k| !k.is_empty() && *k != "or")
        .map(str::to_string)
        .collect();
    Some((field.to_string(), keys))
}

/// The key `field` was most likely meant to be: close in spelling, or the same words.
fn closest(field: &str, keys: &[String]) -> Option<String> {
    let field_lower = field.to_ascii_lowercase().replace('-', "_");
    keys.iter()
        .map(|k| (strsim::jaro_winkler(&field_lower, k), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.clone())
}

fn hint_for(message: &str) -> Option<String> {
    if let Some((field, keys)) = unknown_field(message) {
        return Some(match closest(&field, &keys) {
            Some(k) => format!("did you mean `{k}`?"),
            None if keys.is_empty() => "this mapping takes no keys".to_string(),
            None => format!("the keys here: {}", keys.join(", ")),
        });
    }
    if message.contains("duplicate") {
        Some("each key may appear once in a mapping".to_string())
    } else {
        None
    }
}

/// The dotted key path of the block-style YAML key at `line`, found by walking up through lines
/// of smaller indentation. Flow-style mappings are reported up to their enclosing block key.
pub fn key_path_at(text: &str, line: u64, column: u64) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(idx) = usize::try_from(line).ok().and_then(|l| l.checked_sub(1)) else {
        return String::new();
    };
    if idx >= lines.len() {
        return String::new();
    }
    let key_of = |l: &str| -> Option<(usize, String)> {
        let indent = l.len() - l.trim_start().len();
        let mut body = l.trim_start();
        let mut extra = 0;
        while let Some(rest) = body.strip_prefix("- ") {
            body = rest.trim_start();
            extra = l.len() - body.len() - indent;
        }
        if body.starts_with('#') || body.is_empty() {
            return None;
        }
        let colon = body.find(':')?;
        let key = body[..colon].trim().trim_matches('"').trim_matches('\'');
        if key.is_empty() || key.contains(' ') && !key.starts_with('"') && key.contains('{') {
            return None;
        }
        Some((indent + extra, key.to_string()))
    };
    let mut parts = Vec::new();
    let (mut indent, first) = match key_of(lines[idx]) {
        Some((i, k)) => (i, Some(k)),
        None => (usize::try_from(column).unwrap_or(1).saturating_sub(1), None),
    };
    if let Some(k) = first {
        parts.push(k);
    }
    for l in lines[..idx].iter().rev() {
        if indent == 0 {
            break;
        }
        if let Some((i, k)) = key_of(l)
            && i < indent
        {
            parts.push(k);
            indent = i;
        }
    }
    parts.reverse();
    // Inside a flow mapping (`a: {comand: x}`) the error points past the block key: add the key
    // written at the error's column.
    let col = usize::try_from(column).unwrap_or(0).saturating_sub(1);
    if let Some(rest) = lines[idx].get(col..)
        && let Some(colon) = rest.find(':')
    {
        let key = rest[..colon].trim().trim_matches('"').trim_matches('\'');
        let is_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_alphanumeric() || "_-.".contains(c));
        if is_key && parts.last().map(String::as_str) != Some(key) && col > 0 {
            parts.push(key.to_string());
        }
    }
    parts.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths_follow_indentation() {
        let text = "schema_version: 1\nupstreams:\n  github:\n    command: npx\n    comand: x\n";
        assert_eq!(key_path_at(text, 5, 5), "upstreams.github.comand");
        assert_eq!(key_path_at(text, 1, 1), "schema_version");
        let flow = "schema_version: 1\nupstreams:\n  a: {comand: x}\n";
        assert_eq!(key_path_at(flow, 3, 7), "upstreams.a.comand");
    }
}
