//! Canonical JSON and its hash: object keys sorted at every level, no whitespace, so the same
//! definition hashes the same whatever order an upstream writes its keys in.

use serde_json::Value;
use sha2::{Digest, Sha256};

pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(k) {
                    write(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(v, out);
            }
            out.push(']');
        }
        other @ Value::Null
        | other @ Value::Bool(_)
        | other @ Value::Number(_)
        | other @ Value::String(_) => out.push_str(&other.to_string()),
    }
}

/// `sha256:<hex>` of the canonical form.
pub fn hash(value: &Value) -> String {
    hash_text(&canonical(value))
}

/// `hash` of the array `items`, without copying them into one: the digest is fed one item's
/// canonical text at a time (a list of thousands of tools is never written out whole).
pub fn hash_list(items: &[mcpb_protocol::Tool]) -> String {
    let mut digest = Sha256::new();
    digest.update(b"[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            digest.update(b",");
        }
        // A definition that does not parse (its making rules that out) is hashed as its text:
        // never equal to a parsed one's canonical form.
        match item.parsed() {
            Ok(v) => digest.update(canonical(&v).as_bytes()),
            Err(_) => digest.update(item.json().as_bytes()),
        }
    }
    digest.update(b"]");
    format!("sha256:{}", hex::encode(digest.finalize()))
}

pub fn hash_text(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!("sha256:{}", hex::encode(digest))
}

/// The parts of a tool definition a pin covers: everything a model reads or a call depends on.
pub fn pinned_part(tool: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ] {
        if let Some(v) = tool.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// Hash of the whole definition, and of it without the name (to recognise a renamed tool).
/// Every field counts: whatever a client receives (`_meta`, `icons`, vendor fields) is pinned.
pub fn definition_hashes(tool: &Value) -> (String, String) {
    let whole = hash(tool);
    let mut body = tool.clone();
    if let Some(obj) = body.as_object_mut() {
        obj.remove("name");
    }
    (whole, hash(&body))
}

/// The hash pins of store version 1 recorded (the `pinned_part` only), to carry them over.
pub fn legacy_hash(tool: &Value) -> String {
    hash(&pinned_part(tool))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_hashes_as_the_array_it_is() {
        let items = vec![
            json!({"name": "b", "b": 1, "a": [1, 2]}),
            json!({"name": "x"}),
        ];
        let tools: Vec<mcpb_protocol::Tool> = items
            .iter()
            .map(|v| mcpb_protocol::Tool::from_value(v).unwrap())
            .collect();
        assert_eq!(hash_list(&tools), hash(&Value::Array(items.clone())));
        assert_eq!(hash_list(&[]), hash(&json!([])));
    }

    #[test]
    fn key_order_does_not_matter_but_content_does() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": "s"}});
        let b = json!({"a": {"x": "s", "y": [1, 2]}, "b": 1});
        assert_eq!(canonical(&a), r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(hash(&a), hash(&json!({"b": 2})));
        let t = json!({"name": "x", "description": "d", "_meta": {"k": true}});
        let renamed = json!({"name": "y", "description": "d", "_meta": {"k": true}});
        let (w1, b1) = definition_hashes(&t);
        let (w2, b2) = definition_hashes(&renamed);
        assert_ne!(w1, w2);
        assert_eq!(b1, b2);
        let meta_changed = json!({"name": "x", "description": "d", "_meta": {"k": false}});
        assert_ne!(definition_hashes(&meta_changed).0, w1, "_meta is pinned");
        assert_eq!(legacy_hash(&meta_changed), legacy_hash(&t));
    }
}
