//! Projection: keep only some JSON paths of a result, cut long arrays and long text, before the
//! result reaches the model. Paths look like `items[].name`, `meta.total`, `rows[0]`, `data.*.id`.
//! A path that matches nothing is not an error: the answer says so in a note.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Projection {
    /// Keep only these JSON paths, e.g. items[].name, meta.total
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_array_items: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_chars: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Each,
    Index(usize),
}

fn parse(path: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        match key {
            "" => {}
            "*" => steps.push(Step::Each),
            k => steps.push(Step::Key(k.to_string())),
        }
        while let Some(close) = rest.find(']') {
            let inner = rest[1..close].trim();
            steps.push(match inner {
                "" | "*" => Step::Each,
                n => n.parse().map_or_else(
                    |_| Step::Key(n.trim_matches(['"', '\'']).into()),
                    Step::Index,
                ),
            });
            rest = &rest[close + 1..];
        }
    }
    steps
}

/// The part of `value` on `steps`, in its original shape; `None` when nothing matches.
fn pick(value: &Value, steps: &[Step]) -> Option<Value> {
    let Some((step, rest)) = steps.split_first() else {
        return Some(value.clone());
    };
    match (step, value) {
        (Step::Key(k), Value::Object(m)) => {
            let inner = pick(m.get(k)?, rest)?;
            Some(Value::Object(Map::from_iter([(k.clone(), inner)])))
        }
        (Step::Index(i), Value::Array(a)) => Some(Value::Array(vec![pick(a.get(*i)?, rest)?])),
        (Step::Each, Value::Array(a)) => {
            let picked: Vec<Value> = a.iter().filter_map(|v| pick(v, rest)).collect();
            (!picked.is_empty()).then_some(Value::Array(picked))
        }
        (Step::Each, Value::Object(m)) => {
            let picked: Map<String, Value> = m
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), pick(v, rest)?)))
                .collect();
            (!picked.is_empty()).then_some(Value::Object(picked))
        }
        _ => None,
    }
}

/// Merges two picks of the same value: objects key by key, arrays element by element (picks of
/// the same array keep its order, so positions line up).
fn merge(into: &mut Value, other: Value) {
    match (into, other) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (x, y) in a.iter_mut().zip(b) {
                merge(x, y);
            }
        }
        (slot, other) => *slot = other,
    }
}

fn cut_arrays(value: &mut Value, max: usize, cut: &mut usize) {
    match value {
        Value::Array(a) => {
            if a.len() > max {
                *cut += a.len() - max;
                a.truncate(max);
            }
            a.iter_mut().for_each(|v| cut_arrays(v, max, cut));
        }
        Value::Object(m) => m.values_mut().for_each(|v| cut_arrays(v, max, cut)),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// What a projection left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Paths that matched nothing.
    pub missed: Vec<String>,
    /// Array items cut by `max_array_items`.
    pub cut: usize,
}

/// Applies `p` to one JSON value.
pub fn project(value: &Value, p: &Projection) -> (Value, Outcome) {
    let mut outcome = Outcome::default();
    let mut out = if p.paths.is_empty() {
        value.clone()
    } else {
        let mut merged: Option<Value> = None;
        for path in &p.paths {
            match pick(value, &parse(path)) {
                Some(v) => match &mut merged {
                    Some(m) => merge(m, v),
                    None => merged = Some(v),
                },
                None => outcome.missed.push(path.clone()),
            }
        }
        merged.unwrap_or_else(|| Value::Object(Map::new()))
    };
    if let Some(max) = p.max_array_items {
        cut_arrays(&mut out, max, &mut outcome.cut);
    }
    (out, outcome)
}

/// Cuts `text` to `max` characters on a character boundary; returns whether it was cut.
pub fn cut_chars(text: &mut String, max: usize) -> bool {
    match text.char_indices().nth(max) {
        Some((at, _)) => {
            text.truncate(at);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn proj(paths: &[&str]) -> Projection {
        Projection {
            paths: paths.iter().map(|s| s.to_string()).collect(),
            ..Projection::default()
        }
    }

    #[test]
    fn keeps_the_shape_of_the_paths_asked_for() {
        let v = json!({"items": [{"name": "a", "size": 1, "x": 0}, {"name": "b", "size": 2}],
                       "meta": {"total": 2, "next": null}});
        let (out, notes) = project(&v, &proj(&["items[].name", "meta.total", "items[].size"]));
        assert_eq!(
            out,
            json!({"items": [{"name": "a", "size": 1}, {"name": "b", "size": 2}],
                               "meta": {"total": 2}})
        );
        assert_eq!(notes, Outcome::default());
        let (out, _) = project(&v, &proj(&["items[1]", "meta.*"]));
        assert_eq!(
            out,
            json!({"items": [{"name": "b", "size": 2}], "meta": {"total": 2, "next": null}})
        );
    }

    #[test]
    fn misses_are_notes_and_arrays_are_cut() {
        let v = json!({"rows": [1, 2, 3, 4, [5, 6, 7]]});
        let (out, notes) = project(&v, &proj(&["nothing.here"]));
        assert_eq!(out, json!({}));
        assert_eq!(notes.missed, vec!["nothing.here"]);
        let p = Projection {
            max_array_items: Some(2),
            ..Projection::default()
        };
        let (out, outcome) = project(&v, &p);
        assert_eq!(out, json!({"rows": [1, 2]}));
        assert_eq!(outcome.cut, 3);
        let mut s = "héllo".to_string();
        assert!(cut_chars(&mut s, 2));
        assert_eq!(s, "hé");
    }
}
