//! Durations in the file: every `_ms` key takes milliseconds (`30000`) or a duration as people
//! write it (`"30s"`, `"10m"`, `"1h 30m"`, `"1 minute"`).

use schemars::JsonSchema;
use serde::de::{self, Deserializer, Visitor};

/// What the schema says an `_ms` key takes. Never built: only its schema is used.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(crate) enum MsOrText {
    /// Milliseconds.
    Ms(u64),
    /// A duration such as "30s", "10m" or "1h 30m".
    Text(String),
}

/// Milliseconds in a duration as people write it; `None` when it is not one.
pub fn parse_ms(text: &str) -> Option<u64> {
    let t = text.trim();
    // "1 minute" and "90 s": humantime wants the unit right after the number.
    let joined: String = {
        let mut out = String::new();
        let mut last_digit = false;
        for c in t.chars() {
            if c == ' ' && last_digit {
                continue;
            }
            last_digit = c.is_ascii_digit();
            out.push(c);
        }
        out
    };
    let d = humantime::parse_duration(&joined).ok()?;
    u64::try_from(d.as_millis()).ok()
}

/// An `_ms` key's value: milliseconds, written as a number (`30000`) or as a duration people
/// write (`"30s"`). Its schema is `MsOrText`'s; every `_ms` key is an `Option<Millis>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis(pub u64);

impl Millis {
    pub fn duration(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0)
    }
}

impl serde::Serialize for Millis {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Ms)?
            .map(Millis)
            .ok_or_else(|| de::Error::custom("a duration is required"))
    }
}

impl JsonSchema for Millis {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        MsOrText::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        MsOrText::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        MsOrText::json_schema(generator)
    }

    fn inline_schema() -> bool {
        MsOrText::inline_schema()
    }
}

struct Ms;

impl<'de> Visitor<'de> for Ms {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("milliseconds (30000) or a duration such as \"30s\", \"10m\" or \"1h 30m\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        u64::try_from(v)
            .map(Some)
            .map_err(|_| E::custom("a duration cannot be negative"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if let Ok(n) = v.trim().parse::<u64>() {
            return Ok(Some(n));
        }
        parse_ms(v).map(Some).ok_or_else(|| {
            E::custom(format!(
                "{v:?} is not a duration: write milliseconds (30000) or e.g. \"30s\", \"10m\", \"1h 30m\""
            ))
        })
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Ms)
    }
}

/// `deserialize_with` for an `Option<u64>` of milliseconds.
pub(crate) fn ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_option(Ms)
}

#[cfg(test)]
mod tests {
    use super::parse_ms;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_ms("30s"), Some(30_000));
        assert_eq!(parse_ms("10m"), Some(600_000));
        assert_eq!(parse_ms("1h 30m"), Some(5_400_000));
        assert_eq!(parse_ms("1 minute"), Some(60_000));
        assert_eq!(parse_ms("250ms"), Some(250));
        assert_eq!(parse_ms("soon"), None);
    }

    /// YAML hands integers over as signed ones; JSON as unsigned.
    #[test]
    fn a_key_takes_signed_and_unsigned_numbers_text_and_nothing() {
        use serde::de::IntoDeserializer;
        type E = serde::de::value::Error;
        let signed = |v: i64| super::ms(IntoDeserializer::<E>::into_deserializer(v));
        assert_eq!(signed(5).unwrap(), Some(5));
        assert!(signed(-5).unwrap_err().to_string().contains("negative"));
        let parse = |text: &str| serde_json::from_str::<super::Millis>(text);
        assert_eq!(parse("30000").unwrap(), super::Millis(30_000));
        assert_eq!(parse("\"2s\"").unwrap(), super::Millis(2_000));
        assert!(parse("null").unwrap_err().to_string().contains("required"));
        let wrong = parse("true").unwrap_err().to_string();
        assert!(
            wrong.contains("expected milliseconds (30000) or a duration"),
            "{wrong}"
        );
    }
}
