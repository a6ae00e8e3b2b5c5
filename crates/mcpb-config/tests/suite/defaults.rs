//! A default is stated once, by `BrokerSettings::default()`, which the broker applies; the
//! schema's `default` values are generated from it (editors show them), and no description
//! repeats one, so the two cannot drift apart.

use serde_json::Value;

#[test]
fn the_schema_states_the_defaults_the_broker_applies() {
    let schema: Value = serde_json::from_str(&mcpb_config::schema::json_schema()).unwrap();
    let props = schema["$defs"]["RawBroker"]["properties"]
        .as_object()
        .unwrap();
    let applied = serde_json::to_value(mcpb_config::BrokerSettings::default()).unwrap();
    let mut checked = Vec::new();
    for (key, prop) in props {
        let doc = prop["description"].as_str().unwrap_or("");
        assert!(
            !doc.contains("Default "),
            "broker.{key}: its description states a default; the schema's `default` says it"
        );
        // Objects are followed into their own definitions; a key the settings spell
        // otherwise (`search`, applied as `search_model`) has no default to compare here.
        if applied[key].is_object() || applied.get(key).is_none() {
            continue;
        }
        assert_eq!(
            prop["default"], applied[key],
            "broker.{key}: the schema's default is not the one the broker applies"
        );
        checked.push(key.as_str());
    }
    assert!(checked.len() >= 15, "only {checked:?}");
    assert_eq!(props["call_timeout_ms"]["default"], 60_000);
    let audit = &schema["$defs"]["RawAudit"]["properties"];
    assert_eq!(audit["enabled"]["default"], true);
    assert_eq!(audit["arguments"]["default"], false);
}
