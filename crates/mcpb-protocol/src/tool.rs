//! One tool definition as the broker holds it: the compact JSON text the upstream's definition
//! serialises to, beside the few facts read on every call (its name and its `readOnlyHint`).
//! A parsed `serde_json::Value` costs several times its text (a map per object, 32 bytes per
//! value, a string per key), and a daemon in front of thousands of tools holds every definition
//! for its lifetime; the parts that need the whole definition (search, describe, the scan,
//! hashing) parse it when they run.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// Why a value is not a tool definition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotATool {
    #[error("the definition is not an object")]
    NotAnObject,
    #[error("the definition has no name")]
    NoName,
    #[error("unreadable definition: {0}")]
    Unreadable(String),
}

/// A tool definition: an object with a string `name`, held as its compact JSON text.
#[derive(Clone)]
pub struct Tool {
    json: Box<RawValue>,
    name: Box<str>,
    read_only_hint: bool,
}

impl Tool {
    /// The definition `value`, when it is an object with a string `name`.
    pub fn from_value(value: &Value) -> Result<Self, NotATool> {
        let obj = value.as_object().ok_or(NotATool::NotAnObject)?;
        let name = obj
            .get("name")
            .and_then(Value::as_str)
            .ok_or(NotATool::NoName)?;
        let read_only_hint = obj
            .get("annotations")
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // Serialising a `Value` cannot fail (its keys are strings); the error is kept anyway.
        let json = serde_json::value::to_raw_value(value)
            .map_err(|e| NotATool::Unreadable(e.to_string()))?;
        Ok(Self {
            json,
            name: name.into(),
            read_only_hint,
        })
    }

    /// The definition in `text` (any JSON layout; it is held compact).
    pub fn from_json(text: &str) -> Result<Self, NotATool> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| NotATool::Unreadable(e.to_string()))?;
        Self::from_value(&value)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `annotations.readOnlyHint` as the upstream declared it (`false` when absent).
    pub fn read_only_hint(&self) -> bool {
        self.read_only_hint
    }

    /// The definition as compact JSON.
    pub fn json(&self) -> &str {
        self.json.get()
    }

    pub fn raw(&self) -> &RawValue {
        &self.json
    }

    /// The whole definition, parsed: the same value it was made from (serde_json's
    /// `float_roundtrip` reads every number it writes back as the same number).
    pub fn parsed(&self) -> Result<Value, NotATool> {
        serde_json::from_str(self.json.get()).map_err(|e| NotATool::Unreadable(e.to_string()))
    }

    /// The whole definition for reading (search, describe); `Null` only if it failed to parse,
    /// which its making rules out. Decisions (pins, hashes) use `parsed`.
    pub fn to_value(&self) -> Value {
        self.parsed().unwrap_or(Value::Null)
    }

    /// One member of the definition, parsed (`description`, `inputSchema`...).
    pub fn field(&self, key: &str) -> Option<Value> {
        match self.to_value() {
            Value::Object(mut map) => map.remove(key),
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_) => None,
        }
    }

    /// The definition's top-level members in order, their values unparsed: what a listing needs
    /// to write the definition under another name without building it.
    pub fn members(&self) -> Vec<(Cow<'_, str>, &RawValue)> {
        serde_json::from_str::<Members<'_>>(self.json.get())
            .map(|m| m.0)
            .unwrap_or_default()
    }

    /// The definition's `description`, when it is a string.
    pub fn description(&self) -> Option<String> {
        match self.field("description")? {
            Value::String(s) => Some(s),
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::Array(_)
            | Value::Object(_) => None,
        }
    }
}

/// An object's members, keys borrowed where they hold no escapes.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

/// A key, borrowed from the text unless it holds escapes (serde's `borrow` for `Cow<str>`).
#[derive(Deserialize)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    out.push((k.0, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.json.get())
    }
}

/// Two definitions are equal when their texts are: both were written from parsed values, member
/// order kept.
impl PartialEq for Tool {
    fn eq(&self, other: &Self) -> bool {
        self.json.get() == other.json.get()
    }
}

impl Eq for Tool {}

impl Serialize for Tool {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Self::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// Test and tool-building shorthand: the definition `value`, which must be a tool.
impl TryFrom<Value> for Tool {
    type Error = NotATool;
    fn try_from(value: Value) -> Result<Self, NotATool> {
        Self::from_value(&value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_keeps_its_definition_compact_and_in_order() {
        let text = r#"{ "name": "get", "z": 1, "annotations": {"readOnlyHint": true},
            "inputSchema": {"type": "object", "properties": {"b": {}, "a": {}}} }"#;
        let t = Tool::from_json(text).unwrap();
        assert_eq!(t.name(), "get");
        assert!(t.read_only_hint());
        assert_eq!(
            t.json(),
            r#"{"name":"get","z":1,"annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"b":{},"a":{}}}}"#
        );
        assert_eq!(t.to_value(), serde_json::from_str::<Value>(text).unwrap());
        assert_eq!(t.field("z"), Some(json!(1)));
        let members: Vec<(String, String)> = t
            .members()
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v.get().to_string()))
            .collect();
        assert_eq!(members[0], ("name".into(), "\"get\"".into()));
        assert_eq!(members[1], ("z".into(), "1".into()));
        assert_eq!(members.len(), 4);
        let escaped = Tool::from_json(r#"{"name":"x","a\"b":2}"#).unwrap();
        assert_eq!(escaped.members()[1].0, "a\"b");
        assert_eq!(serde_json::to_string(&t).unwrap(), t.json());
        let back: Tool = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn numbers_read_back_as_the_same_numbers() {
        // f32::MAX as schema generators write it, a 17-digit float, an integer past u64.
        let text = r#"{"name":"n","a":3.4028234663852886e38,"b":97.454309730877213,"c":123456789012345678901234567890,"d":-0.0,"e":18446744073709551615}"#;
        let first: Value = serde_json::from_str(text).unwrap();
        let t = Tool::from_value(&first).unwrap();
        assert_eq!(t.parsed().unwrap(), first);
        let again = Tool::from_json(t.json()).unwrap();
        assert_eq!(again.json(), t.json(), "stable through a disk copy");
    }

    #[test]
    fn only_named_objects_are_tools() {
        assert_eq!(Tool::from_value(&json!([1])), Err(NotATool::NotAnObject));
        assert_eq!(Tool::from_value(&json!({"name": 1})), Err(NotATool::NoName));
        assert!(matches!(Tool::from_json("{"), Err(NotATool::Unreadable(_))));
        let t = Tool::from_value(&json!({"name": "w", "annotations": {"readOnlyHint": "yes"}}));
        assert!(!t.unwrap().read_only_hint(), "only a boolean counts");
        assert!(serde_json::from_str::<Tool>(r#"{"title":"x"}"#).is_err());
    }
}
