//! A broker tool's input schema, generated from its argument struct and trimmed of what costs
//! tokens and tells a model nothing. Every word of it is paid for in every client's context.

use schemars::JsonSchema;
use serde_json::{Value, json};

/// The input schema of an argument struct, without the meta-schema URI, titles, Rust integer
/// formats and serde defaults.
pub fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    strip(&mut schema);
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("description");
        obj.entry("properties").or_insert_with(|| json!({}));
    }
    schema
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for key in ["title", "format", "default", "$schema"] {
                m.remove(key);
            }
            if m.get("additionalProperties") == Some(&Value::Bool(true)) {
                m.remove("additionalProperties");
            }
            // An `Option` field says `["string", "null"]`; absent and null mean the same to
            // the daemon, and the longer type costs tokens in every client's context.
            if let Some(Value::Array(types)) = m.get("type") {
                let named: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                if let [one] = named.as_slice() {
                    let one = (*one).clone();
                    m.insert("type".into(), one);
                }
            }
            // Likewise `null` among an optional enum's values.
            if let Some(Value::Array(values)) = m.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            for (_, child) in m.iter_mut() {
                strip(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// Marks `fields` as required: the daemon still answers a call without them (with a clear tool
/// error), but the schema tells the model they are expected. For `#[schemars(transform)]`.
pub fn require(schema: &mut schemars::Schema, fields: &[&str]) {
    schema.insert("required".into(), json!(fields));
}

/// Removes the per-field prose and minimums of the named fields (all of them when `fields` is
/// empty): where the names say enough to a model, the prose would cost every client's context.
pub fn terse(schema: &mut schemars::Schema, fields: &[&str]) {
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for (name, p) in props.iter_mut() {
            if (fields.is_empty() || fields.contains(&name.as_str()))
                && let Value::Object(p) = p
            {
                p.remove("description");
                if fields.is_empty() {
                    p.remove("minimum");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    #[schemars(transform = needs_a)]
    struct Sample {
        /// The first
        #[allow(dead_code)]
        a: Option<u32>,
        /// The second
        #[serde(default)]
        #[allow(dead_code)]
        b: Option<String>,
    }

    fn needs_a(s: &mut schemars::Schema) {
        require(s, &["a"]);
        terse(s, &["b"]);
    }

    #[test]
    fn schemas_lose_what_tells_a_model_nothing() {
        let s = schema_of::<Sample>();
        let text = s.to_string();
        for absent in ["\"title\"", "\"format\"", "$schema", "null", "The second"] {
            assert!(!text.contains(absent), "{absent}: {text}");
        }
        assert_eq!(s["required"], json!(["a"]));
        assert_eq!(s["properties"]["a"]["type"], "integer");
        assert_eq!(s["properties"]["a"]["description"], "The first");
        assert_eq!(s["type"], "object");
    }
}
