//! JSON Schema of the config file, generated from the raw types so it cannot disagree with them.

use crate::raw::RawConfig;

/// The schema as pretty JSON with a trailing newline, as committed in `config/broker.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(RawConfig);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
