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
    if let Some(p) = std::env::var_os(crate::env::CONFIG).filter(|p| !p.is_empty()) {
        return ConfigSource::File(PathBuf::from(p));
    }
    let home_file = ctx.runtime_root(None).join("broker.yaml");
    if home_file.is_file() {
        return ConfigSource::File(home_file);
    }
    ConfigSource::Embedded
}

/// The file's text, refused past MAX_CONFIG_BYTES without reading the rest.
fn read_capped(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    let read = |e| ConfigError::Read {
        path: path.to_path_buf(),
        source: e,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut text = String::new();
    file.take(crate::error::MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read)?;
    if text.len() as u64 > crate::error::MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(text)
}

/// Reads and resolves the configuration from `source`.
pub fn load(source: &ConfigSource, ctx: &ResolveContext) -> Result<Settings, ConfigError> {
    let (text, label) = match source {
        ConfigSource::File(path) => (read_capped(path)?, path.display().to_string()),
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
///
/// The parser stops at its first error; to report every error of the file in one pass, the
/// entry holding an error is blanked out (its lines kept as empty lines, so later line numbers
/// hold) and the file parsed again, until it parses or an error cannot be set aside.
pub fn parse_raw(text: &str, label: &str) -> Result<RawConfig, ConfigError> {
    if !has_content(text) {
        return Err(empty_file(label));
    }
    let mut issues: Vec<ConfigIssue> = Vec::new();
    let mut current = text.to_string();
    loop {
        let issue = match parse_once(&current) {
            Ok(raw) if issues.is_empty() => return Ok(raw),
            Ok(_) => break,
            Err(issue) => issue,
        };
        // A key missing at the top level is reported where the document ends, at whatever key
        // came last: it belongs to the file, and everything else was read before it.
        let at_top = text
            .lines()
            .nth(usize::try_from(issue.line).unwrap_or(0).saturating_sub(1))
            .is_some_and(|l| !l.starts_with([' ', '\t', '-']));
        if issue.message.starts_with("missing field") && at_top {
            issues.extend(missing_at_top(issue, &issues));
            break;
        }
        if not_the_users(&issue, &issues) || !has_content(&current) {
            break;
        }
        // A mapping whose only entries were set aside is empty now: its error is ours, not the
        // user's; set it aside too without a word.
        if emptied_by_masking(text, &current, issue.line) {
            match mask_entry(&current, issue.line) {
                Some(next) if next != current => {
                    current = next;
                    continue;
                }
                _ => break,
            }
        }
        let masked = (issues.len() < MAX_ISSUES)
            .then(|| mask_entry(&current, issue.line))
            .flatten();
        // Key paths come from the user's own text, not the masked one.
        issues.push(ConfigIssue {
            path: key_path_at(text, issue.line, issue.column),
            ..issue
        });
        match masked {
            Some(next) if next != current => current = next,
            _ => break,
        }
    }
    Err(ConfigError::Invalid {
        file: label.to_string(),
        issues,
    })
}

/// The error for a file with nothing but comments and blank lines.
fn empty_file(label: &str) -> ConfigError {
    ConfigError::Invalid {
        file: label.to_string(),
        issues: vec![ConfigIssue {
            line: 1,
            column: 1,
            path: String::new(),
            message: "the file is empty (or only comments)".into(),
            hint: Some(
                "start from the commented example: `mcp-broker config init --config FILE`".into(),
            ),
        }],
    }
}

/// The issue for a field missing at the top level, said at the file's start; `None` when its
/// own wrong value was set aside (that error says it already).
fn missing_at_top(issue: ConfigIssue, issues: &[ConfigIssue]) -> Option<ConfigIssue> {
    let field = issue.message.split('`').nth(1).unwrap_or_default();
    if issues.iter().any(|i| i.path == field) {
        return None;
    }
    let hint = Some(if field == "schema_version" {
        "a config file starts with `schema_version: 1`".into()
    } else {
        format!("add `{field}:` at the top level")
    });
    Some(ConfigIssue {
        line: 1,
        column: 1,
        path: String::new(),
        hint,
        ..issue
    })
}

/// Whether `issue` repeats one already said or was caused by setting entries aside, not by
/// the user.
fn not_the_users(issue: &ConfigIssue, issues: &[ConfigIssue]) -> bool {
    let repeated = issues
        .iter()
        .any(|i| i.line == issue.line && i.message == issue.message);
    // An alias whose anchor went with an entry, or a field missing because its own wrong value
    // was set aside.
    let caused = !issues.is_empty()
        && (issue.message.contains("anchor")
            || issues.iter().any(|i| {
                issue.message.starts_with("missing field")
                    && issue.message.contains(&format!("`{}`", i.path))
            }));
    repeated || caused
}

fn content_line(l: &str) -> bool {
    let t = l.trim();
    !t.is_empty() && !t.starts_with('#')
}

fn has_content(text: &str) -> bool {
    text.lines().any(content_line)
}

/// Whether `line` is a key whose block held entries in the user's `text` and holds none in
/// `current` (after masking).
fn emptied_by_masking(text: &str, current: &str, line: u64) -> bool {
    let Some(idx) = usize::try_from(line).ok().and_then(|l| l.checked_sub(1)) else {
        return false;
    };
    let indent = |l: &str| l.len() - l.trim_start().len();
    let block_has_entries = |t: &str| -> bool {
        let lines: Vec<&str> = t.lines().collect();
        let Some(key) = lines.get(idx).filter(|l| content_line(l)) else {
            return false;
        };
        let level = indent(key);
        lines[idx + 1..]
            .iter()
            .find(|l| content_line(l))
            .is_some_and(|next| indent(next) > level)
    };
    block_has_entries(text) && !block_has_entries(current)
}

/// Past this many errors the rest of the file is not looked at.
const MAX_ISSUES: usize = 50;

fn parse_once(text: &str) -> Result<RawConfig, ConfigIssue> {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.with_snippet = false;
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        let mut message = first_line_without_location(&e.to_string());
        let mut hint = hint_for(&message);
        // A client's JSON pasted whole (`{"mcpServers": ...}`) is what people try first.
        if text.trim_start().starts_with('{') && text.contains("\"mcpServers\"") {
            hint = Some("this looks like an AI client's own config: `mcp-broker client import --client C` moves its servers into broker.yaml".into());
        }
        // The keys it would have taken go in the hint, not in one long line.
        if let Some((field, _)) = unknown_field(&message) {
            message = format!("unknown field `{field}`");
        }
        ConfigIssue {
            line,
            column,
            path: String::new(),
            hint,
            message,
        }
    })
}

/// `text` with the block-style entry holding `line` made empty: the key at the second level
/// (an upstream, a profile, a broker setting) when there is one, else the top-level key. Every
/// line stays, blank, so the next parse's line numbers are the file's. `None` when `line` is
/// in no block entry (a flow-style file, a line 0).
fn mask_entry(text: &str, line: u64) -> Option<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let idx = usize::try_from(line).ok()?.checked_sub(1)?;
    if idx >= lines.len() {
        return None;
    }
    let indent = |l: &str| -> Option<usize> {
        let body = l.trim_start_matches(' ');
        let t = body.trim_end();
        (!t.is_empty() && !t.starts_with('#')).then(|| l.len() - body.len())
    };
    // The top-level key above (or at) the line, then the first entry under it.
    let top = (0..=idx).rev().find(|&i| indent(lines[i]) == Some(0))?;
    let child = lines[top + 1..=idx]
        .iter()
        .filter_map(|l| indent(l))
        .find(|&n| n > 0);
    let start = match child {
        Some(level) => (top + 1..=idx)
            .rev()
            .find(|&i| indent(lines[i]).is_some_and(|n| n <= level))
            .filter(|&i| indent(lines[i]) == Some(level))
            .unwrap_or(top),
        None => top,
    };
    let level = indent(lines[start])?;
    let end = (start + 1..lines.len())
        .find(|&i| indent(lines[i]).is_some_and(|n| n <= level))
        .unwrap_or(lines.len());
    let mut out = String::with_capacity(text.len());
    for (i, l) in lines.iter().enumerate() {
        if (start..end).contains(&i) {
            if l.ends_with('\n') {
                out.push('\n');
            }
        } else {
            out.push_str(l);
        }
    }
    Some(out)
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
    } else if message.starts_with("invalid u") || message.starts_with("invalid i") {
        Some("a whole number here, e.g. 256".to_string())
    } else if message.contains("expected sequence start") {
        Some("a list here: `[a, b]`, or one `- item` per line below the key".to_string())
    } else if message.contains("expected mapping start") {
        Some("a mapping here: `{key: value}`, or `key: value` lines indented below it".to_string())
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
        // A comment, or a flow-style line (a pasted JSON file): no block key here.
        if body.starts_with('#') || body.is_empty() || body.starts_with(['{', '[']) {
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
    fn every_entry_with_an_error_is_reported_in_one_pass() {
        let text = "schema_version: 1\nbroker:\n  max_clients: many\n  call_timeout_ms: 5s\nupstreams:\n  a:\n    command: x\n    comand: y\n  b:\n    command: z\n  c:\n    command: w\n    lifecycle: forever\nprofiles:\n  p:\n    upstreams: a\n";
        let Err(ConfigError::Invalid { issues, .. }) = parse_raw(text, "f.yaml") else {
            panic!("expected errors");
        };
        let at: Vec<(u64, &str)> = issues.iter().map(|i| (i.line, i.path.as_str())).collect();
        assert_eq!(
            at,
            vec![
                (3, "broker.max_clients"),
                (8, "upstreams.a.comand"),
                (13, "upstreams.c.lifecycle"),
                (16, "profiles.p.upstreams"),
            ],
            "{issues:?}"
        );
    }

    #[test]
    fn a_file_that_cannot_be_set_aside_reports_its_first_error() {
        let json = "{\"mcpServers\": {\"git\": {\"command\": \"uvx\"}}}\n";
        let Err(ConfigError::Invalid { issues, .. }) = parse_raw(json, "f.yaml") else {
            panic!("expected errors");
        };
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].path, "mcpServers");
        assert!(
            issues[0].hint.as_deref().unwrap().contains("client import"),
            "{issues:?}"
        );
        let tabs = "schema_version: 1\nupstreams:\n\ta:\n\t\tcommand: x\n";
        let Err(ConfigError::Invalid { issues, .. }) = parse_raw(tabs, "f.yaml") else {
            panic!("expected errors");
        };
        assert!(!issues.is_empty() && issues.len() <= 2, "{issues:?}");
    }

    #[test]
    fn a_missing_top_level_key_is_said_once_for_the_file() {
        let text = "upstreams:\n  a:\n    command: x\nprofiles:\n  default: {}\nclients: {}\n";
        let Err(ConfigError::Invalid { issues, .. }) = parse_raw(text, "f.yaml") else {
            panic!("expected errors");
        };
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!((issues[0].line, issues[0].path.as_str()), (1, ""));
        assert!(issues[0].message.contains("schema_version"), "{issues:?}");
        assert!(
            issues[0]
                .hint
                .as_deref()
                .unwrap()
                .contains("schema_version: 1")
        );
    }

    #[test]
    fn what_masking_causes_is_not_reported() {
        let errors = |text: &str| match parse_raw(text, "f.yaml") {
            Err(ConfigError::Invalid { issues, .. }) => issues,
            _ => panic!("expected errors"),
        };
        let wrong = errors("schema_version: x\nupstreams: {}\n");
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert_eq!(wrong[0].path, "schema_version");
        let alias = errors("schema_version: 1\nx: &a {command: y}\nupstreams:\n  u: *a\n");
        assert_eq!(alias.len(), 1, "{alias:?}");
        let empty = errors("# nothing here\n\n");
        assert!(empty[0].message.contains("empty"), "{empty:?}");
    }

    #[test]
    fn masking_keeps_line_numbers() {
        let text = "a: 1\nb:\n  x:\n    y: 2\n  z: 3\nc: 4\n";
        let masked = mask_entry(text, 4).unwrap();
        assert_eq!(masked, "a: 1\nb:\n\n\n  z: 3\nc: 4\n");
        assert_eq!(
            mask_entry(text, 1).unwrap(),
            "\nb:\n  x:\n    y: 2\n  z: 3\nc: 4\n"
        );
    }

    #[test]
    fn key_paths_follow_indentation() {
        let text = "schema_version: 1\nupstreams:\n  github:\n    command: npx\n    comand: x\n";
        assert_eq!(key_path_at(text, 5, 5), "upstreams.github.comand");
        assert_eq!(key_path_at(text, 1, 1), "schema_version");
        let flow = "schema_version: 1\nupstreams:\n  a: {comand: x}\n";
        assert_eq!(key_path_at(flow, 3, 7), "upstreams.a.comand");
    }
}
