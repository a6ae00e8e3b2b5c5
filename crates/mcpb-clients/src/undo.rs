//! Taking the broker's change back out of a client file that changed since: clients rewrite
//! their own files (Claude Code updates `~/.claude.json` on every start), so a backup can
//! rarely go back byte for byte. Every value the broker changed (`before` → `written`) is
//! set back where the file still holds what the broker wrote; everything else stays as the
//! client left it. A value both changed is a conflict, and nothing is written.

use std::path::Path;

use jsonc_parser::cst::CstRootNode;
use serde_json::Value;

use crate::client::Format;
use crate::{Client, ClientsError};

/// One value the broker changed: where, what it was (`None`: absent), what it wrote.
struct Change {
    path: Vec<String>,
    before: Option<Value>,
    written: Option<Value>,
}

fn changes(before: &Value, written: &Value, at: &mut Vec<String>, out: &mut Vec<Change>) {
    // A file the broker made: everything in it was the broker's.
    let empty = serde_json::Map::new();
    let (Some(b), Some(w)) = (
        before.as_object().or(before.is_null().then_some(&empty)),
        written.as_object(),
    ) else {
        return;
    };
    let keys: std::collections::BTreeSet<&String> = b.keys().chain(w.keys()).collect();
    for k in keys {
        let (bv, wv) = (b.get(k), w.get(k));
        if bv == wv {
            continue;
        }
        at.push(k.clone());
        match (bv, wv) {
            // Inside objects both sides have, down to the values; what the broker added or
            // removed whole goes back whole.
            (Some(x), Some(y)) if x.is_object() && y.is_object() => changes(x, y, at, out),
            _ => out.push(Change {
                path: at.clone(),
                before: bv.cloned(),
                written: wv.cloned(),
            }),
        }
        at.pop();
    }
}

fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// `current` with the broker's change from `before` to `written` taken back; a conflict
/// (a value the broker changed that changed again) is an error naming it.
pub fn undo(
    client: Client,
    path: &Path,
    before: &str,
    written: &str,
    current: &str,
) -> Result<String, ClientsError> {
    let parse = |t: &str| crate::edit::parsed(client, path, t).map(Option::unwrap_or_default);
    let (b, w, c) = (parse(before)?, parse(written)?, parse(current)?);
    let servers_key = match client.format() {
        Format::Json { key, .. } => key,
        Format::Toml => "mcp_servers",
    };
    let todo = to_take_back(path, servers_key, &b, &w, &c)?;
    match client.format() {
        Format::Json { .. } => take_back_json(path, current, &todo),
        Format::Toml => take_back_toml(path, before, current, &todo),
    }
}

/// The changes from `b` to `w` that `c` still holds as the broker wrote them; an error for
/// one changed again since.
fn to_take_back(
    path: &Path,
    servers_key: &str,
    b: &Value,
    w: &Value,
    c: &Value,
) -> Result<Vec<Change>, ClientsError> {
    let mut list = Vec::new();
    changes(b, w, &mut Vec::new(), &mut list);
    let mut todo = Vec::new();
    while let Some(ch) = list.pop() {
        let now = get(c, &ch.path);
        if now == ch.before.as_ref() {
            continue;
        }
        // An object the broker made (a servers list that was not there) that the client has
        // added to since: only what the broker put in it goes.
        let list_key = ch
            .path
            .last()
            .is_some_and(|k| k == servers_key || k == "mcp");
        if let (true, None, Some(Value::Object(w)), Some(Value::Object(_))) =
            (list_key, &ch.before, &ch.written, now)
        {
            let mut at = ch.path.clone();
            let mut sub = Vec::new();
            changes(
                &Value::Object(serde_json::Map::new()),
                &Value::Object(w.clone()),
                &mut at,
                &mut sub,
            );
            list.extend(sub);
            continue;
        }
        if now != ch.written.as_ref() {
            return Err(ClientsError::Shape {
                path: path.to_path_buf(),
                what: format!(
                    "{} changed since the broker wrote it, so it cannot be taken back",
                    ch.path.join(".")
                ),
            });
        }
        todo.push(ch);
    }
    Ok(todo)
}

/// The JSON file's `current` text with each change's `before` set back.
fn take_back_json(path: &Path, current: &str, todo: &[Change]) -> Result<String, ClientsError> {
    let root = CstRootNode::parse(current, &jsonc_parser::ParseOptions::default())
        .map_err(|e| crate::edit::broken_json(path, &e, current))?;
    for ch in todo {
        let Some((last, parents)) = ch.path.split_last() else {
            continue;
        };
        // A parent the client removed since comes back to hold what was there.
        let mut obj = root.object_value_or_set();
        for k in parents {
            obj = obj.object_value_or_set(k);
        }
        match (&ch.before, obj.get(last)) {
            (Some(v), Some(prop)) => prop.set_value(crate::edit::to_cst(v)),
            (Some(v), None) => {
                obj.append(last, crate::edit::to_cst(v));
            }
            (None, Some(prop)) => prop.remove(),
            (None, None) => {}
        }
    }
    Ok(root.to_string())
}

/// The TOML file's `current` text with each changed item put back as `before` had it.
fn take_back_toml(
    path: &Path,
    before: &str,
    current: &str,
    todo: &[Change],
) -> Result<String, ClientsError> {
    let mut doc: toml_edit::DocumentMut = current
        .parse()
        .map_err(|e| crate::edit::broken_toml(path, &e, current))?;
    let old: toml_edit::DocumentMut = before
        .parse()
        .map_err(|e| crate::edit::broken_toml(path, &e, before))?;
    for ch in todo {
        let Some((last, parents)) = ch.path.split_last() else {
            continue;
        };
        let table = toml_parent(path, doc.as_table_mut(), parents)?;
        let was = parents
            .iter()
            .try_fold(old.as_item(), |i, k| i.get(k.as_str()))
            .and_then(|i| i.get(last.as_str()));
        match was {
            Some(item) => {
                table.insert(last, item.clone());
            }
            None => {
                table.remove(last);
            }
        }
    }
    Ok(doc.to_string())
}

/// The table at `parents` below `table`, made again where the client removed one since.
fn toml_parent<'a>(
    path: &Path,
    mut table: &'a mut dyn toml_edit::TableLike,
    parents: &[String],
) -> Result<&'a mut dyn toml_edit::TableLike, ClientsError> {
    for k in parents {
        // A table the client removed since comes back to hold what was there.
        if table
            .get(k)
            .and_then(toml_edit::Item::as_table_like)
            .is_none()
        {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            table.insert(k, toml_edit::Item::Table(t));
        }
        let Some(next) = table
            .get_mut(k)
            .and_then(toml_edit::Item::as_table_like_mut)
        else {
            return Err(ClientsError::Shape {
                path: path.to_path_buf(),
                what: format!("{k} is not a table, so it cannot be taken back"),
            });
        };
        table = next;
    }
    Ok(table)
}
