//! Checks on JSON text the broker forwards without parsing it: how deep it nests and whether its
//! strings are text. serde_json reads raw values without its depth limit and lets a lone UTF-16
//! surrogate escape through, so a call's arguments could reach an upstream that chokes on them
//! (and the caller would wait the whole call timeout) although the broker itself would refuse
//! the same text from an upstream.

/// The deepest nesting the broker reads anywhere (serde_json's own limit).
pub const MAX_DEPTH: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonTextError {
    #[error("nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("holds a \\u escape that is not text (a lone UTF-16 surrogate)")]
    LoneSurrogate,
}

fn hex4(b: &[u8]) -> Option<u16> {
    let s = std::str::from_utf8(b.get(..4)?).ok()?;
    u16::from_str_radix(s, 16).ok()
}

/// Checks already well-formed JSON text (a raw value serde_json accepted) for nesting past
/// [`MAX_DEPTH`] and for escapes that decode to no character. One pass, no allocation.
pub fn check_text(raw: &str) -> Result<(), JsonTextError> {
    let b = raw.as_bytes();
    // Nesting past the limit takes more brackets than a short text has, and an escape takes a
    // backslash: most calls' arguments are both short and plain.
    if b.len() <= MAX_DEPTH && memchr::memchr(b'\\', b).is_none() {
        return Ok(());
    }
    let (mut depth, mut i) = (0usize, 0usize);
    let mut in_string = false;
    while i < b.len() {
        if in_string {
            // Inside a string only its end and escapes matter.
            match memchr::memchr2(b'"', b'\\', &b[i..]) {
                Some(k) => i += k,
                None => break,
            }
        }
        let c = b[i];
        if in_string {
            match c {
                b'"' => in_string = false,
                b'\\' => {
                    if b.get(i + 1) == Some(&b'u') {
                        let unit = hex4(&b[i + 2..]).unwrap_or(0);
                        if (0xD800..0xDC00).contains(&unit) {
                            let low = (b.get(i + 6) == Some(&b'\\') && b.get(i + 7) == Some(&b'u'))
                                .then(|| hex4(&b[i + 8..]))
                                .flatten();
                            if !low.is_some_and(|l| (0xDC00..0xE000).contains(&l)) {
                                return Err(JsonTextError::LoneSurrogate);
                            }
                            i += 12;
                            continue;
                        }
                        if (0xDC00..0xE000).contains(&unit) {
                            return Err(JsonTextError::LoneSurrogate);
                        }
                        i += 6;
                        continue;
                    }
                    i += 2;
                    continue;
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(JsonTextError::TooDeep);
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        format!("{}{}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn depth_up_to_the_parsers_limit_is_fine_and_past_it_is_refused() {
        assert_eq!(check_text(&nested(MAX_DEPTH)), Ok(()));
        assert_eq!(
            check_text(&nested(MAX_DEPTH + 1)),
            Err(JsonTextError::TooDeep)
        );
        assert_eq!(check_text(&nested(100_000)), Err(JsonTextError::TooDeep));
        // Brackets inside strings are text.
        let s = format!("{{\"a\":\"{}\"}}", "[".repeat(1000));
        assert_eq!(check_text(&s), Ok(()));
        let escaped = format!("{{\"a\":\"\\\"{}\"}}", "{".repeat(1000));
        assert_eq!(check_text(&escaped), Ok(()));
    }

    #[test]
    fn lone_surrogates_are_refused_and_pairs_are_text() {
        assert_eq!(
            check_text(r#"{"a":"\ud800"}"#),
            Err(JsonTextError::LoneSurrogate)
        );
        assert_eq!(
            check_text(r#"{"a":"\udc00x"}"#),
            Err(JsonTextError::LoneSurrogate)
        );
        assert_eq!(
            check_text(r#"{"a":"\ud800\u0041"}"#),
            Err(JsonTextError::LoneSurrogate)
        );
        assert_eq!(
            check_text(r#"{"a":"\ud83d\ude00 \u00e9 \\u d800"}"#),
            Ok(())
        );
    }

    #[test]
    fn what_serde_json_lets_through_is_caught_here() {
        // The reason this module exists: both pass a raw-value parse.
        let deep = nested(300);
        assert!(serde_json::from_str::<&serde_json::value::RawValue>(&deep).is_ok());
        assert!(check_text(&deep).is_err());
        let lone = r#"{"a":"\ud800"}"#;
        assert!(serde_json::from_str::<&serde_json::value::RawValue>(lone).is_ok());
        assert!(check_text(lone).is_err());
    }
}
