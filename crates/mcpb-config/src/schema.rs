//! JSON Schema of the config file, generated from the raw types so it cannot disagree with them.
//! The broker's defaults are stated once, in `BrokerSettings::default()`: the schema's
//! `default` values come from there (editors show them), and the raw types' docs do not repeat
//! them.

use serde_json::Value;

use crate::raw::RawConfig;
use crate::settings::BrokerSettings;

/// The schema as pretty JSON with a trailing newline, as committed in `config/broker.schema.json`.
pub fn json_schema() -> String {
    let mut schema = serde_json::to_value(schemars::schema_for!(RawConfig)).unwrap_or_default();
    if let Ok(defaults) = serde_json::to_value(BrokerSettings::default()) {
        fill_defaults(&mut schema, "RawBroker", &defaults);
    }
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// Writes `defaults` (the resolved settings' own serialisation, whose keys are the file's) into
/// the properties of definition `def`, following nested objects into their definitions.
fn fill_defaults(schema: &mut Value, def: &str, defaults: &Value) {
    let Some(props) = schema["$defs"][def]["properties"].as_object().cloned() else {
        return;
    };
    for (key, prop) in props {
        let Some(value) = defaults.get(&key) else {
            continue;
        };
        let nested = prop["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .map(str::to_string);
        match (value, nested) {
            (Value::Object(_), Some(inner)) => {
                if let Some(p) = schema["$defs"][def]["properties"][&key].as_object_mut() {
                    p.remove("default");
                }
                fill_defaults(schema, &inner, value);
            }
            (Value::Object(_), None) => {}
            (v, _) => schema["$defs"][def]["properties"][&key]["default"] = v.clone(),
        }
    }
}
