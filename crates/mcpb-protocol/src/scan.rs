//! The members of a JSON object read from text that is already known to be JSON (a raw value
//! serde_json accepted, or text the broker wrote itself): where each member starts and ends,
//! nothing decoded, nothing checked again.
//!
//! Hand-written on purpose: every call passes through here on its way in and out (the call's
//! params, the answer's `resultType`), and serde's visitor, which checks every byte again and
//! builds a `RawValue` per member, was a tenth of the daemon's own instructions per call
//! (callgrind, docs/benchmarks.md). Text that is not a JSON object gives `None`; the callers
//! then fall back to serde, which says what is wrong.

use std::borrow::Cow;

/// One member of an object, borrowed from its text.
#[derive(Debug, Clone)]
pub(crate) struct Member<'a> {
    /// The name, unescaped (borrowed unless it had escapes).
    pub(crate) key: Cow<'a, str>,
    /// The value's JSON text.
    pub(crate) value: &'a str,
    /// `"name":value` as written, for copying the member on byte for byte.
    pub(crate) whole: &'a str,
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index just past the string that opens at `i` (`b[i]` is its quote).
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        // Names and most values are short: a plain loop finds their end before memchr's vector
        // search would have started. Long text goes to memchr.
        let at = match b.get(j..j + SHORT) {
            Some(head) => match head.iter().position(|&c| c == b'"' || c == b'\\') {
                Some(k) => j + k,
                None => j + SHORT + memchr::memchr2(b'"', b'\\', b.get(j + SHORT..)?)?,
            },
            None => j + b.get(j..)?.iter().position(|&c| c == b'"' || c == b'\\')?,
        };
        if b[at] == b'"' {
            return Some(at + 1);
        }
        j = at + 2;
    }
}

/// How far `string_end` looks byte by byte before it hands the rest to memchr.
const SHORT: usize = 32;

/// The index just past the value that starts at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let (mut depth, mut j) = (0usize, i);
            loop {
                match *b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while !matches!(
                b.get(j),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// A member name's text (between its quotes) unescaped.
fn key(raw: &str) -> Option<Cow<'_, str>> {
    // Names are short: a plain loop, not `contains`' memchr.
    if !raw.bytes().any(|c| c == b'\\') {
        return Some(Cow::Borrowed(raw));
    }
    serde_json::from_str::<String>(&format!("\"{raw}\""))
        .ok()
        .map(Cow::Owned)
}

/// Calls `each` with the members of the object `text` in the order written; `None` when
/// `text` is not an object.
fn each_member<'a>(text: &'a str, mut each: impl FnMut(Member<'a>)) -> Option<()> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return (skip_ws(b, i + 1) == b.len()).then_some(());
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let start = i;
        let key_end = string_end(b, i)?;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let value_start = skip_ws(b, i + 1);
        let end = value_end(b, value_start)?;
        each(Member {
            key: key(text.get(start + 1..key_end - 1)?)?,
            value: text.get(value_start..end)?,
            whole: text.get(start..end)?,
        });
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return (skip_ws(b, i + 1) == b.len()).then_some(()),
            _ => return None,
        }
    }
}

/// The members of the object `text` in the order written, or `None` when `text` is not an
/// object.
pub(crate) fn members(text: &str) -> Option<Vec<Member<'_>>> {
    let mut out = Vec::with_capacity(4);
    each_member(text, |m| out.push(m))?;
    Some(out)
}

/// The text of one member's value (the last, if the name is written twice), or `None` when
/// the object has no such member or `text` is not an object.
pub fn member_text<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let mut found = None;
    each_member(text, |m| {
        if m.key == name {
            found = Some(m.value);
        }
    })?;
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_members_as_written() {
        let m =
            members(r#" { "a" : 1 , "b\u0022q":{"x":[1,"]}",{"y":"\\"}]},"c":"s\"}", "d":[] } "#)
                .unwrap();
        let keys: Vec<&str> = m.iter().map(|m| m.key.as_ref()).collect();
        assert_eq!(keys, ["a", "b\"q", "c", "d"]);
        assert_eq!(m[0].value, "1");
        assert_eq!(m[0].whole, r#""a" : 1"#);
        assert_eq!(m[1].value, r#"{"x":[1,"]}",{"y":"\\"}]}"#);
        assert_eq!(m[2].value, r#""s\"}""#);
        assert_eq!(m[3].value, "[]");
        assert_eq!(members("{}").unwrap().len(), 0);
        assert_eq!(member_text(r#"{"a":1,"a":true}"#, "a"), Some("true"));
        assert_eq!(member_text(r#"{"a":null}"#, "b"), None);
    }

    #[test]
    fn what_is_not_an_object_gives_none() {
        for text in [
            "",
            "[1]",
            "1",
            "\"a\"",
            "{",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{} x",
        ] {
            assert!(members(text).is_none(), "{text}");
        }
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".*".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                prop::collection::btree_map(".*", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn agrees_with_serde(map in prop::collection::btree_map(".*", json(), 0..8), pretty in any::<bool>()) {
            let object = serde_json::Value::Object(map.clone().into_iter().collect());
            let text = if pretty {
                serde_json::to_string_pretty(&object).unwrap()
            } else {
                serde_json::to_string(&object).unwrap()
            };
            let read = members(&text).unwrap();
            prop_assert_eq!(read.len(), map.len());
            for (m, (k, v)) in read.iter().zip(map.iter()) {
                prop_assert_eq!(m.key.as_ref(), k.as_str());
                let value: serde_json::Value = serde_json::from_str(m.value).unwrap();
                prop_assert_eq!(&value, v);
            }
        }
    }
}
