//! The two eras of MCP on the wire, for both sides of the broker. Handshake revisions
//! (2024-11-05 to 2025-11-25) agree on a revision once, in `initialize`; the stateless revision
//! (2026-07-28) has no initialize: every request carries an envelope in `_meta` naming its
//! revision, client and capabilities, and every result carries `resultType`. Everything that
//! differs between the two lives here: the envelope keys, the broker's own envelope towards an
//! upstream, and how a result of one era is adapted for a peer of the other.

use serde_json::value::RawValue;

use crate::rewrite;

pub use crate::rewrite::{CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY};
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";
pub const STATELESS_REVISION: &str = "2026-07-28";

/// Which way a peer speaks MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    /// `initialize` first; results without `resultType`.
    #[default]
    Handshake,
    /// 2026-07-28: per-request envelope, `resultType` on every result.
    Stateless,
}

impl Era {
    pub fn of_revision(revision: &str) -> Self {
        if crate::revision::is_modern(revision) {
            Era::Stateless
        } else {
            Era::Handshake
        }
    }

    pub fn is_stateless(self) -> bool {
        self == Era::Stateless
    }

    /// An upstream's result, adapted for a client of this era. A stateless client requires
    /// `resultType`; a handshake-era client has no such field. Everything else stays byte for
    /// byte as the upstream wrote it.
    pub fn adapt_result(self, result: Box<RawValue>) -> Box<RawValue> {
        let kind = ResultKind::of(&result);
        self.adapt_kind(result, kind)
    }

    /// `adapt_result` of a call's answer, as the text to write out, or `Err` with the answer
    /// when it asks the client for more input first (`needs_input`): `resultType` read once
    /// for both, and a result rebuilt without it is not parsed again.
    pub fn adapt_call_result(self, result: Box<RawValue>) -> Result<String, Box<RawValue>> {
        // Read once for both: the members found tell the kind and make the rebuilt text.
        let Some(members) = crate::scan::members(result.get()) else {
            return Ok(String::from(Box::<str>::from(result)));
        };
        let said = members.iter().rev().find(|m| m.key == "resultType");
        let rebuilt = match (self, ResultKind::of_text(said.map(|m| m.value))) {
            (_, ResultKind::InputRequired) => return Err(result),
            (Era::Stateless, ResultKind::Absent) => {
                rewrite::rebuilt_text(members, &[], &[("resultType", "\"complete\"")])
            }
            (Era::Handshake, ResultKind::Complete) => {
                rewrite::rebuilt_text(members, &["resultType"], &[])
            }
            _ => return Ok(String::from(Box::<str>::from(result))),
        };
        Ok(rebuilt.unwrap_or_else(|_| String::from(Box::<str>::from(result))))
    }

    fn adapt_kind(self, result: Box<RawValue>, kind: ResultKind) -> Box<RawValue> {
        match (self, kind) {
            (Era::Stateless, ResultKind::Absent) => {
                rewrite::with_members(&result, &[("resultType", "\"complete\"")]).unwrap_or(result)
            }
            (Era::Handshake, ResultKind::Complete) => {
                rewrite::without_members(&result, &["resultType"]).unwrap_or(result)
            }
            _ => result,
        }
    }

    /// `complete_listing` on a listing already written as JSON text (a large tool list is
    /// written once, never built as a tree).
    pub fn complete_listing_raw(self, result: Box<RawValue>) -> Box<RawValue> {
        if self != Era::Stateless {
            return result;
        }
        let set = [
            ("resultType", "\"complete\""),
            ("ttlMs", "0"),
            ("cacheScope", "\"private\""),
        ];
        rewrite::with_members(&result, &set).unwrap_or(result)
    }

    /// Adds what a stateless client requires on a listing or discovery result the broker
    /// writes itself: `resultType` and the cache hints (never cached, private to this client).
    pub fn complete_listing(self, result: &mut serde_json::Value) {
        if self == Era::Stateless
            && let Some(obj) = result.as_object_mut()
        {
            obj.insert("resultType".into(), "complete".into());
            obj.insert("ttlMs".into(), 0.into());
            obj.insert("cacheScope".into(), "private".into());
        }
    }
}

/// A stateless upstream's multi-round-trip answer: it needs the client to supply input first.
pub fn needs_input(result: &RawValue) -> bool {
    ResultKind::of(result) == ResultKind::InputRequired
}

/// A result's `resultType`, as far as the eras tell results apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResultKind {
    Absent,
    Complete,
    InputRequired,
    Other,
}

impl ResultKind {
    fn of(result: &RawValue) -> Self {
        Self::of_text(crate::scan::member_text(result.get(), "resultType"))
    }

    fn of_text(said: Option<&str>) -> Self {
        match said {
            None => ResultKind::Absent,
            Some("\"complete\"") => ResultKind::Complete,
            Some("\"input_required\"") => ResultKind::InputRequired,
            Some(_) => ResultKind::Other,
        }
    }
}

/// The broker's own envelope towards a stateless upstream, as `_meta` members (raw JSON),
/// written once.
pub fn broker_envelope() -> &'static [(&'static str, &'static str); 3] {
    static ENVELOPE: std::sync::LazyLock<[(&'static str, &'static str); 3]> =
        std::sync::LazyLock::new(|| {
            let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
            [
                (
                    PROTOCOL_VERSION_KEY,
                    leak(format!("\"{STATELESS_REVISION}\"")),
                ),
                (
                    CLIENT_INFO_KEY,
                    leak(format!(
                        "{{\"name\":\"mcp-broker\",\"version\":\"{}\"}}",
                        env!("CARGO_PKG_VERSION")
                    )),
                ),
                (CLIENT_CAPABILITIES_KEY, "{}"),
            ]
        });
    &ENVELOPE
}

/// `broker_envelope` as one `_meta` object text, written once: a call from a client that sent
/// no `_meta` of its own carries exactly this.
pub fn broker_envelope_object() -> &'static str {
    static OBJECT: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| meta_object(broker_envelope()));
    &OBJECT
}

/// `_meta` members as one JSON object text.
pub fn meta_object(pairs: &[(&str, &str)]) -> String {
    let members: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}", members.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn the_envelope_written_once_is_the_one_built_each_time() {
        let env = broker_envelope();
        let p = raw(
            r#"{"name":"a.b","arguments":{"s":"a long enough string to pass the short scan \" of names"}}"#,
        );
        let built = rewrite::rewrite_call(&p, "b", || "mcpb-1".into(), env, &[]).unwrap();
        let kept = rewrite::rewrite_call_with(
            &p,
            "b",
            || "mcpb-1".into(),
            (env, Some(broker_envelope_object())),
            &[],
        )
        .unwrap();
        assert_eq!(built.0, kept.0);
        let v: serde_json::Value = serde_json::from_str(&kept.0).unwrap();
        assert_eq!(
            v["_meta"][rewrite::PROTOCOL_VERSION_KEY],
            STATELESS_REVISION
        );
        assert_eq!(
            v["arguments"]["s"],
            "a long enough string to pass the short scan \" of names"
        );
    }

    #[test]
    fn results_gain_or_lose_result_type_by_era() {
        let plain = r#"{"content":[]}"#;
        assert_eq!(
            Era::Stateless.adapt_result(raw(plain)).get(),
            r#"{"resultType":"complete","content":[]}"#
        );
        assert_eq!(Era::Handshake.adapt_result(raw(plain)).get(), plain);
        let modern = r#"{"resultType":"complete","content":[1]}"#;
        assert_eq!(Era::Stateless.adapt_result(raw(modern)).get(), modern);
        assert_eq!(
            Era::Handshake.adapt_result(raw(modern)).get(),
            r#"{"content":[1]}"#
        );
        // Anything but "complete" is not ours to drop.
        let other = r#"{"resultType":"input_required"}"#;
        assert_eq!(Era::Handshake.adapt_result(raw(other)).get(), other);
        assert!(needs_input(&raw(other)));
        assert!(!needs_input(&raw(modern)));
    }

    #[test]
    fn eras_of_revisions_and_their_list_fields() {
        assert_eq!(Era::of_revision("2026-07-28"), Era::Stateless);
        assert_eq!(Era::of_revision("2025-11-25"), Era::Handshake);
        let mut old = serde_json::json!({"tools": []});
        Era::Handshake.complete_listing(&mut old);
        assert_eq!(old, serde_json::json!({"tools": []}));
        let mut new = serde_json::json!({"tools": []});
        Era::Stateless.complete_listing(&mut new);
        assert_eq!(new["resultType"], "complete");
        assert_eq!(new["ttlMs"], 0);
        assert_eq!(new["cacheScope"], "private");
        // The same fields on a listing written as text.
        let listed = r#"{"tools":[{"name":"a"}]}"#;
        assert_eq!(
            Era::Handshake.complete_listing_raw(raw(listed)).get(),
            listed
        );
        let text = Era::Stateless.complete_listing_raw(raw(listed));
        let v: serde_json::Value = serde_json::from_str(text.get()).unwrap();
        let mut expected = serde_json::json!({"tools": [{"name": "a"}]});
        Era::Stateless.complete_listing(&mut expected);
        assert_eq!(v, expected);
        let text = meta_object(broker_envelope());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v[PROTOCOL_VERSION_KEY], "2026-07-28");
        assert_eq!(v[CLIENT_INFO_KEY]["name"], "mcp-broker");
    }
}
