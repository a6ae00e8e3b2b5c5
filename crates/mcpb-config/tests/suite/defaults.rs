//! A default is stated to users in the schema's descriptions ("Default 60000") and applied by
//! `BrokerSettings::default()`: this holds the two to the same value, so one cannot change
//! without the other.

use serde_json::Value;

/// The number after "Default " in a description, in the key's own unit (KiB and MiB counted
/// as bytes).
fn stated_default(description: &str) -> Option<u64> {
    let rest = description.split("Default ").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let n: u64 = digits.parse().ok()?;
    let unit = rest[digits.len()..].trim_start();
    Some(if unit.starts_with("MiB") {
        n << 20
    } else if unit.starts_with("KiB") {
        n << 10
    } else {
        n
    })
}

#[test]
fn the_schema_states_the_defaults_the_broker_applies() {
    let schema: Value = serde_json::from_str(&mcpb_config::schema::json_schema()).unwrap();
    let props = schema["$defs"]["RawBroker"]["properties"]
        .as_object()
        .unwrap();
    let applied = serde_json::to_value(mcpb_config::BrokerSettings::default()).unwrap();
    let mut checked = Vec::new();
    for (key, prop) in props {
        let Some(stated) = prop["description"].as_str().and_then(stated_default) else {
            continue;
        };
        let actual = applied[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: the schema states a default the settings lack"));
        assert_eq!(
            stated, actual,
            "{key}: the schema says {stated}, the broker applies {actual}"
        );
        checked.push(key.as_str());
    }
    assert!(checked.len() >= 12, "only {checked:?}");
    assert_eq!(
        stated_default("Size at which … Default 10 MiB."),
        Some(10 << 20)
    );
}
