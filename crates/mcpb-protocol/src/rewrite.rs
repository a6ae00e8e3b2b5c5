//! Surgical edits of JSON objects kept as raw text: replace a few members, copy every other
//! member byte for byte. Used for the tool name and progress token of forwarded calls.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::value::RawValue;

type Members<'a> = BTreeMap<Cow<'a, str>, &'a RawValue>;

fn members(obj: &RawValue) -> Result<Members<'_>, serde_json::Error> {
    serde_json::from_str(obj.get())
}

fn build(members: &Members<'_>, set: &[(&str, &str)]) -> Result<Box<RawValue>, serde_json::Error> {
    let mut out =
        String::with_capacity(64 + members.values().map(|v| v.get().len() + 16).sum::<usize>());
    out.push('{');
    let mut first = true;
    let mut push = |out: &mut String, key: &str, value: &str| -> Result<(), serde_json::Error> {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&serde_json::to_string(key)?);
        out.push(':');
        out.push_str(value);
        Ok(())
    };
    for (key, value) in set {
        push(&mut out, key, value)?;
    }
    for (key, value) in members {
        if !set.iter().any(|(k, _)| k == key) {
            push(&mut out, key, value.get())?;
        }
    }
    out.push('}');
    RawValue::from_string(out)
}

/// `obj` without the given members; everything else byte for byte.
pub fn without_members(obj: &RawValue, drop: &[&str]) -> Result<Box<RawValue>, serde_json::Error> {
    let mut m = members(obj)?;
    m.retain(|k, _| !drop.contains(&k.as_ref()));
    build(&m, &[])
}

/// The raw value of one member of a JSON object, if present.
pub fn member<'a>(obj: &'a RawValue, key: &str) -> Option<&'a RawValue> {
    members(obj).ok()?.get(key).copied()
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
/// one) replaced by `token`. Of the client's other `_meta` keys only those in `forward` travel
/// on (never its envelope): a client's `_meta` can carry anything, credentials included, and an
/// upstream gets what MCP defines for it plus what the operator chose. Returns the new params
/// and the client's own token.
pub fn rewrite_call(
    params: &RawValue,
    name: &str,
    token: &str,
    envelope: &[(&str, &str)],
    forward: &[String],
) -> Result<(Box<RawValue>, Option<Box<RawValue>>), serde_json::Error> {
    let m = members(params)?;
    let name_json = serde_json::to_string(name)?;
    let Some(meta) = m.get("_meta").copied() else {
        if envelope.is_empty() {
            return Ok((build(&m, &[("name", &name_json)])?, None));
        }
        let meta = build(&Members::new(), envelope)?;
        return Ok((
            build(&m, &[("name", &name_json), ("_meta", meta.get())])?,
            None,
        ));
    };
    let mut meta_members = members(meta)?;
    meta_members.retain(|k, _| {
        k == "progressToken"
            || (!ENVELOPE_KEYS.contains(&k.as_ref()) && forward.iter().any(|f| f == k))
    });
    let client_token = meta_members.get("progressToken").map(|t| (*t).to_owned());
    let token_json = serde_json::to_string(token)?;
    let mut set: Vec<(&str, &str)> = envelope.to_vec();
    if client_token.is_some() {
        set.push(("progressToken", &token_json));
    }
    let new_meta = build(&meta_members, &set)?;
    let out = build(&m, &[("name", &name_json), ("_meta", new_meta.get())])?;
    Ok((out, client_token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn renames_and_keeps_the_rest_verbatim() {
        let p = raw(r#"{"name":"ex.echo","arguments":{"n":1.50,"s":"\u00e9"},"x":[1e3]}"#);
        let (out, token) = rewrite_call(&p, "echo", "mcpb-1", &[], &[]).unwrap();
        assert_eq!(
            out.get(),
            r#"{"name":"echo","arguments":{"n":1.50,"s":"\u00e9"},"x":[1e3]}"#
        );
        assert!(token.is_none());
    }

    #[test]
    fn puts_the_brokers_own_envelope_in_for_a_modern_upstream() {
        let p = raw(r#"{"name":"a.b","arguments":{}}"#);
        let env = [("io.modelcontextprotocol/protocolVersion", r#""2026-07-28""#)];
        let (out, _) = rewrite_call(&p, "b", "mcpb-1", &env, &[]).unwrap();
        assert_eq!(
            out.get(),
            r#"{"name":"b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{}}"#
        );
        let p = raw(
            r#"{"name":"a.b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":5}}"#,
        );
        let (out, token) = rewrite_call(&p, "b", "mcpb-2", &env, &[]).unwrap();
        assert_eq!(
            out.get(),
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
        let (out, token) = rewrite_call(&p, "b", "mcpb-3", &[], &forward).unwrap();
        assert_eq!(out.get(), r#"{"name":"b","_meta":{"vendor/k":1}}"#);
        assert!(token.is_none());
        let (out, _) = rewrite_call(&p, "b", "mcpb-3", &[], &[]).unwrap();
        assert_eq!(
            out.get(),
            r#"{"name":"b","_meta":{}}"#,
            "not on the allowlist"
        );
    }

    #[test]
    fn swaps_the_progress_token_and_returns_the_clients() {
        let p =
            raw(r#"{"name":"a.b","_meta":{"progressToken":7,"other":{"k":1.0}},"arguments":{}}"#);
        let (out, token) = rewrite_call(&p, "b", "mcpb-42", &[], &["other".into()]).unwrap();
        assert_eq!(
            out.get(),
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
