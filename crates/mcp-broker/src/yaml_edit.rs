//! Edits of broker.yaml that keep the rest of the file as the user wrote it (comments, order,
//! quoting): an upstream is added at the end of the block-style `upstreams:` mapping, or its
//! lines are taken out. The caller validates the result before writing it.

/// A problem with the file's shape that an edit cannot work around.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EditError {
    Exists(String),
    Missing(String),
    NoProfile(String),
    FlowStyle,
    /// The mapping at this dotted key is written in flow style, or is not a mapping.
    NotABlock(String),
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EditError::Exists(n) => write!(f, "an upstream named {n} exists already"),
            EditError::Missing(n) => write!(f, "no upstream named {n} in the file"),
            EditError::NoProfile(n) => write!(f, "no profile named {n} in the file"),
            EditError::NotABlock(k) => write!(
                f,
                "`{k}` is written in flow style ({{...}}) or holds a value; only a block mapping is edited"
            ),
            EditError::FlowStyle => {
                write!(
                    f,
                    "`upstreams:` is written in flow style ({{...}}); only a block mapping is edited"
                )
            }
        }
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// The line of `upstreams:` at the top level, and the lines of its block: (header, first, end)
/// where `first..end` are the block's lines (end: the first line of the next top-level key, or
/// of the comments right before it).
fn upstreams_block(lines: &[&str]) -> Result<Option<(usize, usize)>, EditError> {
    block(lines, "upstreams")
}

/// The top-level block mapping `section` (`upstreams`, `profiles`): see `upstreams_block`.
fn block(lines: &[&str], section: &str) -> Result<Option<(usize, usize)>, EditError> {
    let key = format!("{section}:");
    let Some(header) = lines.iter().position(|l| {
        l.starts_with(&key) && {
            let rest = l[key.len()..].trim();
            rest.is_empty() || rest.starts_with('#') || rest.starts_with('{')
        }
    }) else {
        return Ok(None);
    };
    let rest = lines[header][key.len()..].trim();
    let rest = rest.split(" #").next().unwrap_or(rest).trim();
    if rest.starts_with('{') && rest != "{}" {
        return Err(EditError::FlowStyle);
    }
    // The block runs while lines are indented. A `#` line deeper than the entries belongs to
    // the entry above it (a comment inside it, or a line of a block scalar); one at the
    // entries' own depth or less is a comment between entries, or before the next key.
    let child = lines[header + 1..]
        .iter()
        .find(|l| !is_blank_or_comment(l))
        .map(|l| indent_of(l))
        .filter(|i| *i > 0);
    let mut end = header + 1;
    let mut last_content = header;
    while end < lines.len() {
        let l = lines[end];
        if l.trim().is_empty() {
            end += 1;
            continue;
        }
        if is_blank_or_comment(l) {
            if child.is_some_and(|c| indent_of(l) > c) {
                last_content = end;
            }
            end += 1;
            continue;
        }
        if indent_of(l) == 0 {
            break;
        }
        last_content = end;
        end += 1;
    }
    Ok(Some((header, last_content + 1)))
}

/// The entry's name of a child line at `indent` (`  git:` or `  git: {...}`).
fn child_name(line: &str, indent: usize) -> Option<&str> {
    if indent_of(line) != indent || is_blank_or_comment(line) {
        return None;
    }
    let body = line.trim_start();
    let colon = body.find(':')?;
    Some(body[..colon].trim().trim_matches('"').trim_matches('\''))
}

/// The indentation of the block's entries (2 when it has none yet).
fn child_indent(lines: &[&str], first: usize, end: usize) -> usize {
    lines[first..end]
        .iter()
        .find(|l| !is_blank_or_comment(l))
        .map_or(2, |l| indent_of(l))
}

/// `text` with `entry` (the lines of one upstream, indented from column 0 as `name:` and its
/// fields two deeper) added at the end of `upstreams:`.
/// The file's own line ending: CRLF when it uses one, else LF.
fn newline(text: &str) -> &'static str {
    if text.contains("\r\n") { "\r\n" } else { "\n" }
}

pub(crate) fn add_upstream(text: &str, name: &str, entry: &[String]) -> Result<String, EditError> {
    add_entry(text, "upstreams", name, entry)
}

/// `text` with `entry` added at the end of the top-level block mapping `section`.
pub(crate) fn add_entry(
    text: &str,
    section: &str,
    name: &str,
    entry: &[String],
) -> Result<String, EditError> {
    add_entries(text, section, &[(name.to_string(), entry.to_vec())])
}

/// `text` with each `(name, lines)` of `entries` added, in order, at the end of the top-level
/// block mapping `section`: one pass over the text however many there are (an import of
/// thousands of targets would otherwise read the file once per target).
pub(crate) fn add_entries(
    text: &str,
    section: &str,
    entries: &[(String, Vec<String>)],
) -> Result<String, EditError> {
    let key = format!("{section}:");
    let nl = newline(text);
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
    let (header, end, indent) = match block(&lines, section)? {
        Some((header, end)) => {
            let indent = child_indent(&lines, header + 1, end);
            let have: std::collections::HashSet<&str> = (header + 1..end)
                .filter_map(|i| child_name(lines[i], indent))
                .collect();
            if let Some((name, _)) = entries.iter().find(|(n, _)| have.contains(n.as_str())) {
                return Err(EditError::Exists(name.clone()));
            }
            (header, end, indent)
        }
        None => {
            if !out.last().is_none_or(|l| l.trim().is_empty()) {
                out.push(String::new());
            }
            out.push(key.clone());
            (out.len() - 1, out.len(), 2)
        }
    };
    // `upstreams: {}` becomes a block.
    if out[header]
        .trim_start_matches(key.as_str())
        .trim()
        .starts_with("{}")
    {
        out[header] = key.clone();
    }
    let pad = " ".repeat(indent);
    let new: Vec<String> = entries
        .iter()
        .flat_map(|(_, lines)| lines.iter().map(|l| format!("{pad}{l}")))
        .collect();
    out.splice(end..end, new);
    let mut joined = out.join(nl);
    joined.push_str(nl);
    Ok(joined)
}

/// Where profile `profile`'s explicit `upstreams:` list is: its line, the end of the
/// profile's block and the field's indent. `Ok(None)` when it has no such list (it sees every
/// upstream); `Err` when its shape is not one these edits know.
fn profile_upstreams(
    lines: &[&str],
    profile: &str,
) -> Result<Option<(usize, usize, usize)>, EditError> {
    let missing = || EditError::NoProfile(profile.to_string());
    let (header, end) = block(lines, "profiles")?.ok_or_else(missing)?;
    let indent = child_indent(lines, header + 1, end);
    let start = (header + 1..end)
        .find(|i| child_name(lines[*i], indent) == Some(profile))
        .ok_or_else(missing)?;
    let head = lines[start].trim_start();
    if head[head.find(':').map_or(0, |c| c + 1)..]
        .trim()
        .starts_with('{')
    {
        // `name: {…}` on one line: only a block mapping is edited.
        // `upstreams:` as a key, not the end of another (`allow_mutating_upstreams:`).
        let keyed = head.match_indices("upstreams:").any(|(i, _)| {
            head[..i]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        });
        return if keyed {
            Err(EditError::FlowStyle)
        } else {
            Ok(None)
        };
    }
    let mut stop = start + 1;
    while stop < end
        && (lines[stop].trim().is_empty()
            || indent_of(lines[stop]) > indent
            || lines[stop].trim_start().starts_with('#') && indent_of(lines[stop]) > indent)
    {
        stop += 1;
    }
    Ok((start + 1..stop)
        .find(|i| {
            let l = lines[*i].trim_start();
            l.starts_with("upstreams:") && !is_blank_or_comment(l)
        })
        .map(|at| (at, stop, indent_of(lines[at]))))
}

/// The items of a block list under line `at` (`- a`), up to `stop`: their line numbers.
fn block_items(lines: &[&str], at: usize, stop: usize, field_indent: usize) -> Vec<usize> {
    let mut items = Vec::new();
    for (i, l) in lines.iter().enumerate().take(stop).skip(at + 1) {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t.starts_with("- ") && indent_of(l) >= field_indent {
            items.push(i);
        } else {
            break;
        }
    }
    items
}

/// `text` with `names` added to the explicit `upstreams:` list of profile `profile`, written
/// as a flow list on one line (`upstreams: [a, b]`) or a block list (`- a`). `Ok(None)` when
/// the profile has no such list (it sees every upstream); `Err` when its shape is not one this
/// edit knows.
pub(crate) fn add_to_profile_upstreams(
    text: &str,
    profile: &str,
    names: &[String],
) -> Result<Option<String>, EditError> {
    let nl = newline(text);
    let lines: Vec<&str> = text.lines().collect();
    let Some((at, stop, field_indent)) = profile_upstreams(&lines, profile)? else {
        return Ok(None);
    };
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
    let rest = lines[at].trim_start()["upstreams:".len()..].trim();
    if let Some(inner) = rest.strip_prefix('[') {
        let Some(close) = inner.find(']') else {
            return Err(EditError::FlowStyle);
        };
        let mut items: Vec<String> = inner[..close]
            .split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect();
        let comment = &inner[close + 1..];
        items.extend(names.iter().map(|n| yaml_name(n)));
        out[at] = format!(
            "{}upstreams: [{}]{}",
            " ".repeat(field_indent),
            items.join(", "),
            comment
        );
    } else if rest.is_empty() || rest.starts_with('#') {
        let items = block_items(&lines, at, stop, field_indent);
        let last = items.last().copied().unwrap_or(at);
        let item_indent = items
            .last()
            .map_or(field_indent + 2, |i| indent_of(lines[*i]));
        let new: Vec<String> = names
            .iter()
            .map(|n| format!("{}- {}", " ".repeat(item_indent), yaml_name(n)))
            .collect();
        out.splice(last + 1..last + 1, new);
    } else {
        return Err(EditError::FlowStyle);
    }
    let mut joined = out.join(nl);
    joined.push_str(nl);
    Ok(Some(joined))
}

/// `text` with `name` taken out of profile `profile`'s explicit `upstreams:` list. `Ok(None)`
/// when the profile has no such list or the list does not name it.
pub(crate) fn remove_from_profile_upstreams(
    text: &str,
    profile: &str,
    name: &str,
) -> Result<Option<String>, EditError> {
    let nl = newline(text);
    let lines: Vec<&str> = text.lines().collect();
    let Some((at, stop, field_indent)) = profile_upstreams(&lines, profile)? else {
        return Ok(None);
    };
    let unquoted = |x: &str| x.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
    let rest = lines[at].trim_start()["upstreams:".len()..].trim();
    if let Some(inner) = rest.strip_prefix('[') {
        let Some(close) = inner.find(']') else {
            return Err(EditError::FlowStyle);
        };
        let items: Vec<String> = inner[..close]
            .split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect();
        let kept: Vec<&String> = items.iter().filter(|x| unquoted(x) != name).collect();
        if kept.len() == items.len() {
            return Ok(None);
        }
        let kept: Vec<&str> = kept.iter().map(|s| s.as_str()).collect();
        out[at] = format!(
            "{}upstreams: [{}]{}",
            " ".repeat(field_indent),
            kept.join(", "),
            &inner[close + 1..]
        );
    } else if rest.is_empty() || rest.starts_with('#') {
        let items = block_items(&lines, at, stop, field_indent);
        let Some(hit) = items.iter().find(|i| {
            let item = lines[**i].trim_start().trim_start_matches("- ");
            unquoted(item.split(" #").next().unwrap_or(item)) == name
        }) else {
            return Ok(None);
        };
        if items.len() == 1 {
            // The last one: an empty list, which a block list cannot say.
            out[at] = format!("{}upstreams: []", " ".repeat(field_indent));
        }
        out.remove(*hit);
    } else {
        return Err(EditError::FlowStyle);
    }
    let mut joined = out.join(nl);
    joined.push_str(nl);
    Ok(Some(joined))
}

/// `text` without the lines of upstream `name` (its key line and everything indented under
/// it); comments around it stay.
pub(crate) fn remove_upstream(text: &str, name: &str) -> Result<String, EditError> {
    let nl = newline(text);
    let lines: Vec<&str> = text.lines().collect();
    let missing = || EditError::Missing(name.to_string());
    let (header, end) = upstreams_block(&lines)?.ok_or_else(missing)?;
    let indent = child_indent(&lines, header + 1, end);
    let start = (header + 1..end)
        .find(|i| child_name(lines[*i], indent) == Some(name))
        .ok_or_else(missing)?;
    let mut stop = start + 1;
    let mut last = start;
    while stop < end {
        let l = lines[stop];
        if !l.trim().is_empty() {
            if indent_of(l) <= indent {
                break;
            }
            last = stop;
        }
        stop += 1;
    }
    let mut out: Vec<String> = lines[..start].iter().map(|l| (*l).to_string()).collect();
    out.extend(lines[last + 1..].iter().map(|l| (*l).to_string()));
    // The last one gone: an empty mapping, not a key without a value.
    let refs: Vec<&str> = out.iter().map(String::as_str).collect();
    if let Ok(Some((h, e))) = upstreams_block(&refs)
        && !(h + 1..e).any(|i| child_name(refs[i], indent).is_some())
    {
        out[h] = "upstreams: {}".into();
    }
    let mut joined = out.join(nl);
    joined.push_str(nl);
    Ok(joined)
}

/// The end of the block under the key line at `start` (indented `indent`): one past its last
/// line that is deeper, before `end`.
fn block_end(lines: &[&str], start: usize, end: usize, indent: usize) -> usize {
    let mut last = start;
    for (i, l) in lines.iter().enumerate().take(end).skip(start + 1) {
        // A comment, even at column 0, does not end a block; the next key does.
        if is_blank_or_comment(l) {
            continue;
        }
        if indent_of(l) <= indent {
            break;
        }
        last = i;
    }
    last + 1
}

/// Whether a key line holds its mapping below (`key:` or `key:  # note`).
fn opens_block(line: &str) -> bool {
    let body = line.trim_start();
    let rest = body[body.find(':').map_or(body.len(), |c| c + 1)..].trim();
    rest.is_empty() || rest.starts_with('#')
}

/// `text` with the scalar at `keys` (e.g. `broker`, `exec`, `workspace_root`) set to `value`
/// (already YAML): the line replaced when the key is there, else added at the end of the
/// deepest block that is, with the missing mappings. Only block mappings are edited.
pub(crate) fn set_value(text: &str, keys: &[&str], value: &str) -> Result<String, EditError> {
    let nl = newline(text);
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_string()).collect();
    let Some((top, rest)) = keys.split_first() else {
        return Ok(text.to_string());
    };
    let dotted = |d: usize| keys[..=d].join(".");
    // (the key line, one past its block, the key line's indentation)
    let header_line = |h: usize| lines[h].split(" #").next().unwrap_or("").trim_end();
    let mut scope = match block(&lines, top).map_err(|_| EditError::NotABlock(dotted(0)))? {
        Some((header, end)) if opens_block(lines[header]) => (header, end, 0),
        // `broker: {}` is an empty block.
        Some((header, _)) if header_line(header) == format!("{top}: {{}}") => {
            out[header] = format!("{top}:");
            (header, header + 1, 0)
        }
        Some(_) => return Err(EditError::NotABlock(dotted(0))),
        None => {
            if !out.last().is_none_or(|l| l.trim().is_empty()) {
                out.push(String::new());
            }
            out.push(format!("{top}:"));
            let mut pad = 2;
            for (d, k) in rest.iter().enumerate() {
                if d + 1 == rest.len() {
                    out.push(format!("{}{k}: {value}", " ".repeat(pad)));
                } else {
                    out.push(format!("{}{k}:", " ".repeat(pad)));
                }
                pad += 2;
            }
            let mut joined = out.join(nl);
            joined.push_str(nl);
            return Ok(joined);
        }
    };
    for (d, key) in rest.iter().enumerate() {
        let (start, end, indent) = scope;
        let child = lines[start + 1..end]
            .iter()
            .find(|l| !is_blank_or_comment(l))
            .map_or(indent + 2, |l| indent_of(l));
        let last = d + 1 == rest.len();
        match (start + 1..end).find(|i| child_name(lines[*i], child) == Some(*key)) {
            Some(at) if last => {
                // The old value's lines go (a block scalar's too); a comment after it stays.
                let stop = block_end(&lines, at, end, child);
                let comment = lines[at]
                    .find(" #")
                    .filter(|_| !opens_block(lines[at]) || stop == at + 1)
                    .map(|c| lines[at][c..].to_string())
                    .unwrap_or_default();
                let pad = " ".repeat(child);
                out.splice(at..stop, [format!("{pad}{key}: {value}{comment}")]);
            }
            Some(at) if opens_block(lines[at]) => {
                scope = (at, block_end(&lines, at, end, child), child);
                continue;
            }
            Some(_) => return Err(EditError::NotABlock(dotted(d + 1))),
            None => {
                let mut new = Vec::new();
                let mut pad = child;
                for (i, k) in rest[d..].iter().enumerate() {
                    if d + i + 1 == rest.len() {
                        new.push(format!("{}{k}: {value}", " ".repeat(pad)));
                    } else {
                        new.push(format!("{}{k}:", " ".repeat(pad)));
                    }
                    pad += 2;
                }
                let at = block_end(&lines, start, end, indent);
                out.splice(at..at, new);
            }
        }
        break;
    }
    let mut joined = out.join(nl);
    joined.push_str(nl);
    Ok(joined)
}

/// `text` without the key at `keys` (its line and a block value's lines), when it is there:
/// what a setting back at its default reads best as. Located exactly as `set_value` would set
/// it, then its one line taken out; a missing key changes nothing.
pub(crate) fn unset_value(text: &str, keys: &[&str]) -> Result<String, EditError> {
    const MARK: &str = "\u{1}unset\u{1}";
    let marked = set_value(text, keys, MARK)?;
    let nl = newline(text);
    let kept: Vec<&str> = marked.lines().filter(|l| !l.contains(MARK)).collect();
    let mut joined = kept.join(nl);
    joined.push_str(nl);
    // A parent made only to hold the key (it was not there) goes too.
    Ok(if joined.len() < text.len() || joined == text {
        joined
    } else {
        text.to_string()
    })
}

/// A YAML scalar that reads back exactly as given (JSON strings are YAML).
pub(crate) fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A name as a YAML key or list item: quoted when YAML would read it as something other than
/// text (`null`, `true`, `1e3`, `0x1F`…).
pub(crate) fn yaml_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let special = [
        "null", "~", "true", "false", "yes", "no", "on", "off", "y", "n",
    ]
    .contains(&lower.as_str())
        || lower.parse::<f64>().is_ok()
        || lower.starts_with("0x")
        || lower.starts_with("0o")
        || lower.starts_with("0b")
        || lower
            .chars()
            .all(|c| c.is_ascii_digit() || c == '_' || c == '-');
    if special {
        quoted(name)
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# my broker\nschema_version: 1\n\nupstreams:\n    # the git one\n    git:\n        command: uvx   # keep\n        args: [mcp-server-git]\n\n    time: {command: uvx, args: [mcp-server-time]}\n\n# who sees what\nprofiles:\n  default: {}\n";

    fn entry() -> Vec<String> {
        vec!["fs:".into(), "  command: \"npx\"".into()]
    }

    #[test]
    fn an_added_upstream_goes_last_in_the_block_at_its_indentation_and_nothing_else_moves() {
        let out = add_upstream(FILE, "fs", &entry()).unwrap();
        assert_eq!(
            out,
            "# my broker\nschema_version: 1\n\nupstreams:\n    # the git one\n    git:\n        command: uvx   # keep\n        args: [mcp-server-git]\n\n    time: {command: uvx, args: [mcp-server-time]}\n    fs:\n      command: \"npx\"\n\n# who sees what\nprofiles:\n  default: {}\n"
        );
        assert_eq!(
            add_upstream(FILE, "git", &entry()),
            Err(EditError::Exists("git".into()))
        );
    }

    #[test]
    fn many_entries_are_added_in_one_pass_in_order_and_none_twice() {
        let many: Vec<(String, Vec<String>)> = (0..3)
            .map(|i| (format!("u{i}"), vec![format!("u{i}: {{command: x}}")]))
            .collect();
        let out = add_entries(FILE, "upstreams", &many).unwrap();
        let mut one_by_one = FILE.to_string();
        for (name, lines) in &many {
            one_by_one = add_upstream(&one_by_one, name, lines).unwrap();
        }
        assert_eq!(out, one_by_one);
        let again = vec![("u9".to_string(), vec![]), ("time".to_string(), vec![])];
        assert_eq!(
            add_entries(FILE, "upstreams", &again),
            Err(EditError::Exists("time".into()))
        );
    }

    #[test]
    fn a_nested_scalar_is_set_in_place_or_added_with_its_missing_mappings() {
        let set = |t: &str| set_value(t, &["broker", "exec", "workspace_root"], "\"/w\"");
        assert_eq!(
            set("schema_version: 1\n").unwrap(),
            "schema_version: 1\n\nbroker:\n  exec:\n    workspace_root: \"/w\"\n"
        );
        assert_eq!(
            set("broker:\n    log_level: info  # mine\nprofiles: {}\n").unwrap(),
            "broker:\n    log_level: info  # mine\n    exec:\n      workspace_root: \"/w\"\nprofiles: {}\n"
        );
        assert_eq!(
            set("broker:\n  exec:\n    python: /usr/bin/python3\n    workspace_root: /old\n\n# next\nupstreams: {}\n").unwrap(),
            "broker:\n  exec:\n    python: /usr/bin/python3\n    workspace_root: \"/w\"\n\n# next\nupstreams: {}\n"
        );
        assert_eq!(
            set("broker:\n  exec:\n    python: x\n  log_level: info\n").unwrap(),
            "broker:\n  exec:\n    python: x\n    workspace_root: \"/w\"\n  log_level: info\n"
        );
        assert_eq!(
            set("broker:\n  exec:\n# a note at column 0\n    workspace_root: /old   # mine\n")
                .unwrap(),
            "broker:\n  exec:\n# a note at column 0\n    workspace_root: \"/w\" # mine\n"
        );
        assert_eq!(
            set("broker:\n  exec:\n    workspace_root: >-\n      /old\n    python: x\n").unwrap(),
            "broker:\n  exec:\n    workspace_root: \"/w\"\n    python: x\n"
        );
        assert_eq!(
            set("broker: {}\nprofiles: {}\n").unwrap(),
            "broker:\n  exec:\n    workspace_root: \"/w\"\nprofiles: {}\n"
        );
        assert_eq!(
            set("broker: {log_level: info}\n"),
            Err(EditError::NotABlock("broker".into()))
        );
        assert_eq!(
            set("broker:\n  exec: {python: x}\n"),
            Err(EditError::NotABlock("broker.exec".into()))
        );
    }

    #[test]
    fn a_file_without_upstreams_gets_the_block() {
        let out = add_upstream("schema_version: 1\n", "fs", &entry()).unwrap();
        assert_eq!(
            out,
            "schema_version: 1\n\nupstreams:\n  fs:\n    command: \"npx\"\n"
        );
        let out = add_upstream("schema_version: 1\nupstreams: {}\n", "fs", &entry()).unwrap();
        assert_eq!(
            out,
            "schema_version: 1\nupstreams:\n  fs:\n    command: \"npx\"\n"
        );
        assert_eq!(
            add_upstream("upstreams: {a: {command: x}}\n", "fs", &entry()),
            Err(EditError::FlowStyle)
        );
    }

    #[test]
    fn a_profile_lets_an_upstream_go_from_its_list_whatever_the_lists_style() {
        let flow = "profiles:\n  c:\n    upstreams: [example, \"git\", memory]  # mine\n";
        assert_eq!(
            remove_from_profile_upstreams(flow, "c", "git").unwrap(),
            Some("profiles:\n  c:\n    upstreams: [example, memory]  # mine\n".into())
        );
        assert_eq!(
            remove_from_profile_upstreams(flow, "c", "gi").unwrap(),
            None
        );
        let block = "profiles:\n  c:\n    upstreams:\n      - git  # the repo\n      - memory\n    max_tools: 9\n";
        let out = remove_from_profile_upstreams(block, "c", "git")
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            "profiles:\n  c:\n    upstreams:\n      - memory\n    max_tools: 9\n"
        );
        // The last one leaves an empty list, not a list of nulls.
        assert_eq!(
            remove_from_profile_upstreams(&out, "c", "memory").unwrap(),
            Some("profiles:\n  c:\n    upstreams: []\n    max_tools: 9\n".into())
        );
        let all = "profiles:\n  default:\n    allow_mutating_upstreams: true\n";
        assert_eq!(
            remove_from_profile_upstreams(all, "default", "git"),
            Ok(None)
        );
        let flow = "profiles:\n  default: {allow_mutating_upstreams: true}\n";
        assert_eq!(
            remove_from_profile_upstreams(flow, "default", "git"),
            Ok(None)
        );
    }

    #[test]
    fn a_profile_gets_upstreams_added_to_its_list_whatever_the_lists_style() {
        let flow = "profiles:\n  codex:\n    upstreams: [example]  # mine\n    allow_mutating_upstreams: true\n  other: {}\n";
        let out = add_to_profile_upstreams(flow, "codex", &["git".into(), "memory".into()])
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            "profiles:\n  codex:\n    upstreams: [example, git, memory]  # mine\n    allow_mutating_upstreams: true\n  other: {}\n"
        );
        let block = "profiles:\n  codex:\n    upstreams:\n      - example\n    max_tools: 9\n";
        let out = add_to_profile_upstreams(block, "codex", &["git".into()])
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            "profiles:\n  codex:\n    upstreams:\n      - example\n      - git\n    max_tools: 9\n"
        );
        let all = "profiles:\n  default:\n    allow_mutating_upstreams: true\n";
        assert_eq!(
            add_to_profile_upstreams(all, "default", &["git".into()]),
            Ok(None)
        );
        assert_eq!(
            add_to_profile_upstreams("profiles:\n  a: {upstreams: [x]}\n", "a", &["git".into()]),
            Err(EditError::FlowStyle)
        );
        let added = add_entry(
            all,
            "profiles",
            "codex",
            &["codex:".into(), "  upstreams: [git]".into()],
        )
        .unwrap();
        assert_eq!(
            added,
            "profiles:\n  default:\n    allow_mutating_upstreams: true\n  codex:\n    upstreams: [git]\n"
        );
    }

    #[test]
    fn a_removed_upstream_takes_only_its_own_lines() {
        let out = remove_upstream(FILE, "git").unwrap();
        assert_eq!(
            out,
            "# my broker\nschema_version: 1\n\nupstreams:\n    # the git one\n\n    time: {command: uvx, args: [mcp-server-time]}\n\n# who sees what\nprofiles:\n  default: {}\n"
        );
        let out = remove_upstream(FILE, "time").unwrap();
        assert!(out.contains("    git:\n        command: uvx   # keep\n"));
        assert!(!out.contains("time:"));
        assert!(out.contains("# who sees what\nprofiles:"));
        assert_eq!(
            remove_upstream(FILE, "nope"),
            Err(EditError::Missing("nope".into()))
        );
    }

    #[test]
    fn the_last_upstream_gone_leaves_an_empty_mapping() {
        let one = "upstreams:\n  a: {command: x}\nprofiles: {}\n";
        assert_eq!(
            remove_upstream(one, "a").unwrap(),
            "upstreams: {}\nprofiles: {}\n"
        );
    }

    #[test]
    fn a_block_scalar_ending_in_hash_lines_stays_with_its_entry_and_crlf_stays() {
        let text = "upstreams:\n  a:\n    command: sh\n    args:\n      - |\n        echo hi\n        # not a comment\nprofiles: {}\n";
        let out = add_upstream(text, "fs", &entry()).unwrap();
        assert!(out.contains("        # not a comment\n  fs:\n"), "{out}");
        let crlf = "upstreams:\r\n  a: {command: x}\r\n";
        let out = add_upstream(crlf, "fs", &entry()).unwrap();
        assert_eq!(
            out,
            "upstreams:\r\n  a: {command: x}\r\n  fs:\r\n    command: \"npx\"\r\n"
        );
        assert_eq!(remove_upstream(&out, "fs").unwrap(), crlf);
    }
}
