//! Shaping a tool result for the model: projection first, then the profile's result budget. A
//! result still over the budget is stored whole as an artifact and replaced by a preview that
//! says how to read the rest.

use serde_json::{Value, json};

use crate::artifacts::ArtifactStore;
use crate::projection::{Outcome, Projection, cut_chars, project};

/// Characters of a stored result shown in its preview.
const PREVIEW_CHARS: usize = 2000;

/// Where an oversized result goes, and how the model reads it back.
pub struct Budget<'a> {
    pub chars: usize,
    pub store: &'a ArtifactStore,
    pub profile: &'a str,
    /// The exposed name of broker_get_artifact.
    pub reader: &'a str,
    /// structuredContent members kept beside the preview (a code run's status, calls, usage):
    /// small fields a model needs whatever the size of the rest.
    pub keep: &'a [&'a str],
}

fn note(text: String) -> Value {
    json!({"type": "text", "text": format!("[mcp-broker] {text}")})
}

/// Applies a projection to a `tools/call` result: to structuredContent and to every text item
/// that holds JSON; `max_chars` cuts the text the model reads. A path is reported as matching
/// nothing only when it matched nowhere.
pub fn apply_projection(result: &mut Value, p: &Projection) {
    let mut outcomes = Vec::new();
    let structured = result
        .get("structuredContent")
        .filter(|v| !v.is_null())
        .map(|sc| project(sc, p));
    let mut first_text: Option<(Value, usize)> = None;
    let mut budget = p.max_chars;
    let mut cut_any = false;
    if let Some(items) = result.get_mut("content").and_then(Value::as_array_mut) {
        for item in items.iter_mut() {
            let Some(text) = item.get("text").and_then(Value::as_str) else {
                continue;
            };
            let mut text = text.to_string();
            if let Ok(parsed) = serde_json::from_str::<Value>(&text)
                && (parsed.is_object() || parsed.is_array())
            {
                let (out, outcome) = project(&parsed, p);
                text = out.to_string();
                if first_text.is_none() {
                    first_text = Some((out, outcome.missed.len()));
                }
                outcomes.push(outcome);
            }
            if let Some(left) = budget.as_mut() {
                cut_any |= cut_chars(&mut text, *left);
                *left = left.saturating_sub(text.chars().count());
            }
            item["text"] = Value::String(text);
        }
    }
    if let Some((out, outcome)) = structured {
        // Some servers wrap their JSON text in structuredContent as a string; when the text
        // matched more of the paths, it is the better structured answer.
        let text_better = first_text
            .as_ref()
            .is_some_and(|(_, missed)| *missed < outcome.missed.len());
        match (&first_text, text_better) {
            (Some((t, _)), true) if t.is_object() => result["structuredContent"] = t.clone(),
            (Some(_), true) => {
                if let Some(obj) = result.as_object_mut() {
                    obj.remove("structuredContent");
                }
            }
            _ => result["structuredContent"] = out,
        }
        outcomes.push(outcome);
    }
    let notes = projection_notes(p, &outcomes, cut_any);
    if !notes.is_empty()
        && let Some(items) = result.get_mut("content").and_then(Value::as_array_mut)
    {
        items.push(note(notes.join("; ")));
    }
}

/// What a projection did that the model should know: nothing to project, paths that matched
/// nowhere, array items and text cut.
fn projection_notes(p: &Projection, outcomes: &[Outcome], cut_any: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if outcomes.is_empty() && (!p.paths.is_empty() || p.max_array_items.is_some()) {
        notes.push(
            "the result holds no JSON to project; it is shown as the tool returned it".into(),
        );
    }
    let missed: Vec<&str> = p
        .paths
        .iter()
        .filter(|path| !outcomes.is_empty() && outcomes.iter().all(|o| o.missed.contains(path)))
        .map(String::as_str)
        .collect();
    if !missed.is_empty() {
        notes.push(format!(
            "projection paths matched nothing: {}",
            missed.join(", ")
        ));
    }
    if let Some(cut) = outcomes.iter().map(|o| o.cut).max().filter(|c| *c > 0) {
        notes.push(format!(
            "{cut} array items cut (max_array_items {})",
            p.max_array_items.unwrap_or(0)
        ));
    }
    if cut_any {
        notes.push(format!(
            "text cut to max_chars {}",
            p.max_chars.unwrap_or(0)
        ));
    }
    notes
}

/// What the model would read of a result, as one text: text items as they are, other items as
/// JSON, structuredContent when there is no text.
pub fn readable(result: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(items) = result.get("content").and_then(Value::as_array) {
        for item in items {
            match item.get("text").and_then(Value::as_str) {
                Some(t) => parts.push(t.to_string()),
                None => parts.push(item.to_string()),
            }
        }
    }
    let has_text = !parts.is_empty();
    if !has_text && let Some(sc) = result.get("structuredContent").filter(|v| !v.is_null()) {
        parts.push(serde_json::to_string_pretty(sc).unwrap_or_default());
    }
    parts.join("\n")
}

/// Size in characters the client would receive.
pub fn size_chars(result: &Value) -> usize {
    let text: usize = result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|i| match i.get("text").and_then(Value::as_str) {
                    Some(t) => t.chars().count(),
                    None => i.to_string().len(),
                })
                .sum()
        })
        .unwrap_or(0);
    let structured = result
        .get("structuredContent")
        .filter(|v| !v.is_null())
        .map_or(0, |v| v.to_string().len());
    text + structured
}

/// Replaces a result over the budget by a preview and an artifact id. Error results pass.
pub fn apply_budget(result: Value, budget: &Budget<'_>) -> Value {
    let size = size_chars(&result);
    if size <= budget.chars || result.get("isError") == Some(&Value::Bool(true)) {
        return result;
    }
    let full = readable(&result);
    let mut preview = full.clone();
    cut_chars(&mut preview, PREVIEW_CHARS.min(budget.chars));
    let shown = preview.chars().count();
    let kept: serde_json::Map<String, Value> = result
        .get("structuredContent")
        .and_then(Value::as_object)
        .map(|sc| {
            budget
                .keep
                .iter()
                .filter_map(|k| Some(((*k).to_string(), sc.get(*k)?.clone())))
                .collect()
        })
        .unwrap_or_default();
    match budget.store.put(budget.profile, &full) {
        Ok(id) => {
            let total = full.chars().count();
            // Say what was left out: the text past the preview, or (the text shown whole) the
            // structured copy that made the result too large.
            let left_out = if shown < total {
                format!(
                    "the first {shown} of its {total} characters of text are shown. The whole result is artifact {id}: call {} {{\"id\": \"{id}\", \"offset\": {shown}}} for the rest",
                    budget.reader
                )
            } else {
                format!(
                    "its text is shown whole; its structured copy is left out. The whole result is artifact {id} ({})",
                    budget.reader
                )
            };
            let mut out = json!({
                "content": [
                    {"type": "text", "text": preview},
                    note(format!(
                        "result is {size} characters, over this profile's budget of {}; {left_out}, or call again with a projection.",
                        budget.chars
                    )),
                ],
                "_meta": {"mcp-broker/artifact": {"id": id, "size_chars": total}},
            });
            if !kept.is_empty() {
                out["structuredContent"] = Value::Object(kept);
            }
            out
        }
        Err(e) => json!({
            "content": [
                {"type": "text", "text": preview},
                note(format!(
                    "result is {size} characters, over this profile's budget of {}; only the first {shown} are shown and the rest could not be stored ({e}). Call again with a projection.",
                    budget.chars
                )),
            ],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn projection_reaches_json_text_and_structured_content() {
        let mut r = json!({
            "content": [{"type": "text", "text": "{\"files\":[{\"name\":\"a\",\"size\":1}],\"n\":1}"}],
            "structuredContent": {"files": [{"name": "a", "size": 1}], "n": 1}
        });
        let p = Projection {
            paths: vec!["files[].name".into()],
            ..Projection::default()
        };
        apply_projection(&mut r, &p);
        assert_eq!(r["structuredContent"], json!({"files": [{"name": "a"}]}));
        assert_eq!(r["content"][0]["text"], "{\"files\":[{\"name\":\"a\"}]}");
        assert_eq!(
            r["content"].as_array().unwrap().len(),
            1,
            "no notes when all matched"
        );
        let mut plain = json!({"content": [{"type": "text", "text": "hello world"}]});
        apply_projection(
            &mut plain,
            &Projection {
                max_chars: Some(5),
                ..Projection::default()
            },
        );
        assert_eq!(plain["content"][0]["text"], "hello");
        // A server that wraps its JSON text as a string in structuredContent.
        let mut wrapped = json!({
            "content": [{"type": "text", "text": "[{\"name\":\"a\",\"size\":1}]"}],
            "structuredContent": {"content": "[{\"name\":\"a\",\"size\":1}]"}
        });
        let p = Projection {
            paths: vec!["[].name".into()],
            ..Projection::default()
        };
        apply_projection(&mut wrapped, &p);
        assert_eq!(wrapped["content"][0]["text"], "[{\"name\":\"a\"}]");
        assert!(wrapped.get("structuredContent").is_none());
        assert_eq!(wrapped["content"].as_array().unwrap().len(), 1, "{wrapped}");
        assert!(
            plain["content"][1]["text"]
                .as_str()
                .unwrap()
                .contains("max_chars 5")
        );
    }

    #[test]
    fn over_budget_becomes_preview_plus_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(dir.path().into(), Duration::from_secs(60), 1 << 20);
        let budget = Budget {
            chars: 100,
            store: &store,
            profile: "p",
            reader: "broker.get_artifact",
            keep: &["status"],
        };
        let small = json!({"content": [{"type": "text", "text": "ok"}]});
        assert_eq!(apply_budget(small.clone(), &budget), small);
        let big = json!({"content": [{"type": "text", "text": "x".repeat(500)}]});
        let out = apply_budget(big, &budget);
        let id = out["_meta"]["mcp-broker/artifact"]["id"].as_str().unwrap();
        assert_eq!(out["content"][0]["text"].as_str().unwrap().len(), 100);
        assert!(
            out["content"][1]["text"]
                .as_str()
                .unwrap()
                .contains("broker.get_artifact")
        );
        assert_eq!(store.get("p", id, 0, 1000).unwrap().total_chars, 500);
        // Text that fits, made too large by its structured copy: the note says so, and the
        // kept members stay.
        let doubled = json!({
            "content": [{"type": "text", "text": "y".repeat(60)}],
            "structuredContent": {"status": "ok", "result": "y".repeat(60)},
        });
        let out = apply_budget(doubled, &budget);
        let said = out["content"][1]["text"].as_str().unwrap();
        assert!(said.contains("its text is shown whole"), "{said}");
        assert!(!said.contains("the first 60 of"), "{said}");
        assert_eq!(out["content"][0]["text"].as_str().unwrap().len(), 60);
        assert_eq!(out["structuredContent"], json!({"status": "ok"}));
    }
}
