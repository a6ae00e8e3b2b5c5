//! Surgical edits of JSON objects kept as raw text: replace a few members, copy every other
//! member byte for byte. Used for the tool name and progress token of forwarded calls.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::scan::{self, Member};

// Every call passes through these on its way in and out (the call's params, the answer's
// `resultType`, `isError`, `_meta`), so they read the object once with the scanner of text
// already known to be JSON (scan.rs), keep its members in the order written, copy each member
// on as one slice and never check a text they built themselves: a `BTreeMap<String, _>`, a
// second parse of the result and serde's visitor were most of the broker's own work per call
// (`mcpb-bench`, docs/benchmarks.md).

/// A member's name: borrowed from the text unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// An object's members in the order written. A name written twice keeps both; `get` answers
/// with the last, as a JSON object read into a map would.
struct Members<'a>(Vec<Member<'a>>);

impl<'a> Members<'a> {
    fn get(&self, key: &str) -> Option<&'a str> {
        self.0.iter().rev().find(|m| m.key == key).map(|m| m.value)
    }
}

fn members(obj: &RawValue) -> Result<Members<'_>, serde_json::Error> {
    members_of(obj.get())
}

/// The members of `text` (JSON); serde says what is wrong with a value that is not an object.
fn members_of(text: &str) -> Result<Members<'_>, serde_json::Error> {
    match scan::members(text) {
        Some(m) => Ok(Members(m)),
        None => Err(
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                .err()
                .unwrap_or_else(|| de::Error::custom("not a JSON object")),
        ),
    }
}

/// Finds one member while reading the object; every other value is skipped unparsed.
struct Seek<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for Seek<'_> {
    type Value = Option<&'de RawValue>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Seek<'_> {
    type Value = Option<&'de RawValue>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(Key(k)) = map.next_key()? {
            if k == self.0 {
                found = Some(map.next_value::<&'de RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A member name as JSON text; the names the broker meets need no escapes and are copied.
fn push_key(out: &mut String, key: &str) -> Result<(), serde_json::Error> {
    if key.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(key);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(key)?);
    }
    Ok(())
}

/// The object of `members` with `set` first: valid JSON by construction (names written by
/// `push_key`, the other members copied as written), so it is not parsed again.
fn build_text(members: &Members<'_>, set: &[(&str, &str)]) -> Result<String, serde_json::Error> {
    let mut out = String::with_capacity(
        2 + members.0.iter().map(|m| m.whole.len() + 1).sum::<usize>()
            + set
                .iter()
                .map(|(k, v)| k.len() + v.len() + 4)
                .sum::<usize>(),
    );
    out.push('{');
    for (key, value) in set {
        if out.len() > 1 {
            out.push(',');
        }
        push_key(&mut out, key)?;
        out.push(':');
        out.push_str(value);
    }
    for m in &members.0 {
        if !set.iter().any(|(k, _)| *k == m.key) {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(m.whole);
        }
    }
    out.push('}');
    Ok(out)
}

/// The object of `members` (read by `scan::members`) without the members named in `drop`,
/// with `set` first: for a caller that already read the object for something else.
pub(crate) fn rebuilt_text(
    members: Vec<Member<'_>>,
    drop: &[&str],
    set: &[(&str, &str)],
) -> Result<String, serde_json::Error> {
    let mut m = Members(members);
    m.0.retain(|m| !drop.contains(&m.key.as_ref()));
    build_text(&m, set)
}

fn build(members: &Members<'_>, set: &[(&str, &str)]) -> Result<Box<RawValue>, serde_json::Error> {
    RawValue::from_string(build_text(members, set)?)
}

/// `obj` without the given members; everything else byte for byte.
pub fn without_members(obj: &RawValue, drop: &[&str]) -> Result<Box<RawValue>, serde_json::Error> {
    RawValue::from_string(without_members_text(obj, drop)?)
}

/// `without_members` as text, for a caller that only writes it out.
pub fn without_members_text(obj: &RawValue, drop: &[&str]) -> Result<String, serde_json::Error> {
    let mut m = members(obj)?;
    m.0.retain(|m| !drop.contains(&m.key.as_ref()));
    build_text(&m, &[])
}

/// The raw value of one member of a JSON object, if present (the last, if written twice).
pub fn member<'a>(obj: &'a RawValue, key: &str) -> Option<&'a RawValue> {
    let mut de = serde_json::Deserializer::from_str(obj.get());
    Seek(key).deserialize(&mut de).ok().flatten()
}

/// `obj` with the given members set to the given raw JSON values.
pub fn with_members(
    obj: &RawValue,
    set: &[(&str, &str)],
) -> Result<Box<RawValue>, serde_json::Error> {
    build(&members(obj)?, set)
}

pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// The 2026-07-28 per-request envelope. It describes the client's connection to the broker, not
/// the broker's connection to an upstream, and a handshake-era upstream refuses requests that
/// carry it.
pub const ENVELOPE_KEYS: &[&str] = &[
    PROTOCOL_VERSION_KEY,
    CLIENT_INFO_KEY,
    CLIENT_CAPABILITIES_KEY,
    "io.modelcontextprotocol/logLevel",
];

/// Forwarded `tools/call` params: `name` replaced, `_meta.progressToken` (when the client sent
/// one) replaced by `token()` (made only then). Of the client's other `_meta` keys only those in `forward` travel
/// on (never its envelope): a client's `_meta` can carry anything, credentials included, and an
/// upstream gets what MCP defines for it plus what the operator chose. Returns the new params
/// and the client's own token.
pub fn rewrite_call(
    params: &RawValue,
    name: &str,
    token: impl FnOnce() -> String,
    envelope: &[(&str, &str)],
    forward: &[String],
) -> Result<(String, Option<Box<RawValue>>), serde_json::Error> {
    rewrite_call_with(params, name, token, (envelope, None), forward)
}

/// `rewrite_call` with the envelope also given as one object text when the caller keeps it
/// written (`broker_envelope_object` of the era module): a call without a `_meta` of its own then carries
/// that text as it is.
pub fn rewrite_call_with(
    params: &RawValue,
    name: &str,
    token: impl FnOnce() -> String,
    (envelope, envelope_object): (&[(&str, &str)], Option<&str>),
    forward: &[String],
) -> Result<(String, Option<Box<RawValue>>), serde_json::Error> {
    let m = members(params)?;
    let mut name_json = String::with_capacity(name.len() + 2);
    push_key(&mut name_json, name)?;
    let Some(meta) = m.get("_meta") else {
        if envelope.is_empty() {
            return Ok((build_text(&m, &[("name", &name_json)])?, None));
        }
        let meta = match envelope_object {
            Some(object) => Cow::Borrowed(object),
            None => Cow::Owned(build_text(&Members(Vec::new()), envelope)?),
        };
        return Ok((
            build_text(&m, &[("name", &name_json), ("_meta", &meta)])?,
            None,
        ));
    };
    let mut meta_members = members_of(meta)?;
    meta_members.0.retain(|m| {
        let k = m.key.as_ref();
        k == "progressToken" || (!ENVELOPE_KEYS.contains(&k) && forward.iter().any(|f| f == k))
    });
    let client_token = match meta_members.get("progressToken") {
        Some(t) => Some(RawValue::from_string(t.to_owned())?),
        None => None,
    };
    let token_json = match client_token {
        Some(_) => serde_json::to_string(&token())?,
        None => String::new(),
    };
    let mut set: Vec<(&str, &str)> = envelope.to_vec();
    if client_token.is_some() {
        set.push(("progressToken", &token_json));
    }
    let new_meta = build_text(&meta_members, &set)?;
    let out = build_text(&m, &[("name", &name_json), ("_meta", &new_meta)])?;
    Ok((out, client_token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn a_name_written_twice_answers_with_the_last_and_escaped_names_stay_escaped() {
        let o = raw(r#"{"a":1,"b\u0022q":{"x":[1,2]},"a":2}"#);
        assert_eq!(member(&o, "a").unwrap().get(), "2");
        assert_eq!(member(&o, "b\"q").unwrap().get(), r#"{"x":[1,2]}"#);
        assert!(member(&o, "c").is_none());
        assert!(member(&raw("[1]"), "a").is_none());
        let out = with_members(&o, &[("c", "true")]).unwrap();
        let v: serde_json::Value = serde_json::from_str(out.get()).unwrap();
        assert_eq!(v["b\"q"]["x"][1], 2);
        assert_eq!(v["c"], true);
        let out = without_members(&o, &["a"]).unwrap();
        assert_eq!(out.get(), r#"{"b\u0022q":{"x":[1,2]}}"#, "kept as written");
    }

    #[test]
    fn renames_and_keeps_the_rest_verbatim() {
        let p = raw(r#"{"name":"ex.echo","arguments":{"n":1.50,"s":"\u00e9"},"x":[1e3]}"#);
        let (out, token) = rewrite_call(&p, "echo", || "mcpb-1".into(), &[], &[]).unwrap();
        assert_eq!(
            out,
            r#"{"name":"echo","arguments":{"n":1.50,"s":"\u00e9"},"x":[1e3]}"#
        );
        assert!(token.is_none());
    }

    #[test]
    fn puts_the_brokers_own_envelope_in_for_a_modern_upstream() {
        let p = raw(r#"{"name":"a.b","arguments":{}}"#);
        let env = [("io.modelcontextprotocol/protocolVersion", r#""2026-07-28""#)];
        let (out, _) = rewrite_call(&p, "b", || "mcpb-1".into(), &env, &[]).unwrap();
        assert_eq!(
            out,
            r#"{"name":"b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{}}"#
        );
        let p = raw(
            r#"{"name":"a.b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":5}}"#,
        );
        let (out, token) = rewrite_call(&p, "b", || "mcpb-2".into(), &env, &[]).unwrap();
        assert_eq!(
            out,
            r#"{"name":"b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"mcpb-2"}}"#
        );
        assert_eq!(token.unwrap().get(), "5");
    }

    #[test]
    fn leaves_the_2026_envelope_out() {
        let p = raw(
            r#"{"name":"a.b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c"},"vendor/k":1}}"#,
        );
        let forward = ["vendor/k".to_string()];
        let (out, token) = rewrite_call(&p, "b", || "mcpb-3".into(), &[], &forward).unwrap();
        assert_eq!(out, r#"{"name":"b","_meta":{"vendor/k":1}}"#);
        assert!(token.is_none());
        let (out, _) = rewrite_call(&p, "b", || "mcpb-3".into(), &[], &[]).unwrap();
        assert_eq!(out, r#"{"name":"b","_meta":{}}"#, "not on the allowlist");
    }

    #[test]
    fn swaps_the_progress_token_and_returns_the_clients() {
        let p =
            raw(r#"{"name":"a.b","_meta":{"progressToken":7,"other":{"k":1.0}},"arguments":{}}"#);
        let (out, token) =
            rewrite_call(&p, "b", || "mcpb-42".into(), &[], &["other".into()]).unwrap();
        assert_eq!(
            out,
            r#"{"name":"b","_meta":{"progressToken":"mcpb-42","other":{"k":1.0}},"arguments":{}}"#
        );
        assert_eq!(token.unwrap().get(), "7");
        let note = raw(r#"{"progressToken":"mcpb-42","progress":1.5,"total":3}"#);
        assert_eq!(
            member(&note, "progressToken").unwrap().get(),
            r#""mcpb-42""#
        );
        let back = with_members(&note, &[("progressToken", "7")]).unwrap();
        assert_eq!(
            back.get(),
            r#"{"progressToken":7,"progress":1.5,"total":3}"#
        );
    }
}
