//! The secret values the daemon has resolved (`${ENV}` and `${file:}` references of upstream
//! environments and headers, HTTP front tokens, OAuth tokens) and their removal from every text
//! that leaves the daemon: error texts, status, search answers, forwarded log notifications,
//! the daemon log and the audit log. A value is registered where it is resolved and never
//! forgotten (a rotated secret must not leak either); text is redacted where it leaves.
//!
//! It owns the set of values and the matching, nothing else: it reads no configuration, does no
//! I/O and knows no protocol beyond JSON string literals.

#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use aho_corasick::{AhoCorasick, MatchKind};
use parking_lot::RwLock;

/// What a secret becomes.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not taken as secrets: a value of one to three characters
/// would wipe ordinary text and protects nothing. Anything longer counts, however short.
pub const MIN_SECRET_CHARS: usize = 4;

#[derive(Default)]
struct Secrets {
    /// Each value, and its JSON-escaped form where that differs.
    forms: Vec<String>,
    matcher: Option<AhoCorasick>,
}

static SECRETS: LazyLock<RwLock<Arc<Secrets>>> = LazyLock::new(RwLock::default);

/// Takes `value` as a secret from now on. Cheap when it is known already.
pub fn register(value: &str) {
    let value = value.trim();
    if value.chars().count() < MIN_SECRET_CHARS {
        return;
    }
    if SECRETS.read().forms.iter().any(|f| f == value) {
        return;
    }
    let mut guard = SECRETS.write();
    let mut forms = guard.forms.clone();
    for form in forms_of(value) {
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    // Longest first, so that one secret inside another is never left half shown.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let matcher = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(&forms)
        .ok();
    *guard = Arc::new(Secrets { forms, matcher });
}

/// The value and the way it is written inside a JSON string, when that differs.
fn forms_of(value: &str) -> Vec<String> {
    let mut out = vec![value.to_string()];
    let quoted = serde_json::Value::String(value.to_string()).to_string();
    let escaped = &quoted[1..quoted.len() - 1];
    if escaped != value {
        out.push(escaped.to_string());
    }
    out
}

fn current() -> Arc<Secrets> {
    SECRETS.read().clone()
}

/// Whether any secret is registered (callers may skip work when none is).
pub fn any() -> bool {
    !SECRETS.read().forms.is_empty()
}

/// `text` with every registered secret replaced by [`REDACTED`]: whole occurrences, ones split
/// across line breaks, and a secret's start at the very end of the text or its end at the very
/// start (a line cut, or one of several lines logged apart).
pub fn redact(text: &str) -> Cow<'_, str> {
    let set = current();
    let Some(matcher) = &set.matcher else {
        return Cow::Borrowed(text);
    };
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    if text.contains(['\n', '\r']) {
        // Match on the text without its line breaks, then map each match back.
        let (joined, map): (String, Vec<usize>) = {
            let mut joined = String::with_capacity(text.len());
            let mut map = Vec::with_capacity(text.len() + 1);
            for (i, c) in text.char_indices() {
                if c == '\n' || c == '\r' {
                    continue;
                }
                joined.push(c);
                map.extend(std::iter::repeat_n(i, c.len_utf8()));
            }
            map.push(text.len());
            (joined, map)
        };
        for m in matcher.find_iter(&joined) {
            let start = map[m.start()];
            let end = map[m.end() - 1] + last_char_len(&joined, m.end());
            ranges.push((start, end));
        }
    } else {
        ranges.extend(matcher.find_iter(text).map(|m| (m.start(), m.end())));
    }
    if let Some(n) = cut_end(&set.forms, text)
        && ranges.last().is_none_or(|r| r.1 <= text.len() - n)
    {
        ranges.push((text.len() - n, text.len()));
    }
    if let Some(n) = cut_start(&set.forms, text)
        && ranges.first().is_none_or(|r| r.0 >= n)
    {
        ranges.insert(0, (0, n));
    }
    if ranges.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in ranges {
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        // Line breaks inside a split secret stay, so lines stay lines.
        out.extend(text[start..end].chars().filter(|c| *c == '\n'));
        at = end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// The byte length of the character ending at `end` in `s`.
fn last_char_len(s: &str, end: usize) -> usize {
    s[..end].chars().next_back().map_or(1, char::len_utf8)
}

/// Bytes at the end of `text` that are the start of a secret (at least MIN_SECRET_CHARS).
fn cut_end(forms: &[String], text: &str) -> Option<usize> {
    forms
        .iter()
        .filter_map(|f| {
            f.char_indices()
                .map(|(i, _)| i)
                .chain([f.len()])
                .filter(|&i| f[..i].chars().count() >= MIN_SECRET_CHARS && i < f.len())
                .rev()
                .find(|&i| text.ends_with(&f[..i]))
        })
        .max()
}

/// Bytes at the start of `text` that are the end of a secret (at least MIN_SECRET_CHARS).
fn cut_start(forms: &[String], text: &str) -> Option<usize> {
    forms
        .iter()
        .filter_map(|f| {
            f.char_indices()
                .map(|(i, _)| i)
                .filter(|&i| i > 0 && f[i..].chars().count() >= MIN_SECRET_CHARS)
                .find(|&i| text.starts_with(&f[i..]))
                .map(|i| f.len() - i)
        })
        .max()
}

/// Each line of `lines` redacted as one text (a secret split across them is found), written
/// back in place.
pub fn redact_lines(lines: &mut [String]) {
    if lines.is_empty() || !any() {
        return;
    }
    let joined = lines.join("\n");
    let redacted = redact(&joined);
    if let Cow::Owned(text) = redacted {
        let parts: Vec<&str> = text.split('\n').collect();
        if parts.len() == lines.len() {
            for (line, part) in lines.iter_mut().zip(parts) {
                if *line != part {
                    *line = part.to_string();
                }
            }
        }
    }
    for line in lines.iter_mut() {
        if let Cow::Owned(t) = redact(line) {
            *line = t;
        }
    }
}

/// Raw JSON text with every secret inside its string literals replaced; the result is still
/// valid JSON (a string whose redaction would break an escape is replaced whole).
pub fn redact_json(raw: &str) -> Cow<'_, str> {
    let set = current();
    let Some(matcher) = &set.matcher else {
        return Cow::Borrowed(raw);
    };
    if !matcher.is_match(raw) {
        return Cow::Borrowed(raw);
    }
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut j = start;
        while j < b.len() && b[j] != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        let end = j.min(b.len());
        let inner = &raw[start..end];
        if let Cow::Owned(r) = redact(inner) {
            let valid = serde_json::from_str::<String>(&format!("\"{r}\"")).is_ok();
            out.push_str(&raw[copied..start]);
            out.push_str(if valid { &r } else { REDACTED });
            copied = end;
        }
        i = end + 1;
    }
    if copied == 0 {
        return Cow::Borrowed(raw);
    }
    out.push_str(&raw[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The set is process-wide: each test uses values of its own.

    #[test]
    fn whole_and_short_secrets_are_replaced() {
        register("hunter2-whole-AAAA");
        register("Qz7x");
        register("ab");
        assert_eq!(
            redact("token hunter2-whole-AAAA and pin Qz7x, ab stays"),
            "token [redacted] and pin [redacted], ab stays"
        );
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_split_across_lines_is_found() {
        register("split-secret-BBBBBBBB");
        let text = "error: key split-sec\nret-BBBBBBBB refused\nnext";
        let r = redact(text);
        assert!(!r.contains("split-sec") && !r.contains("BBBB"), "{r}");
        assert_eq!(r.lines().count(), 3, "{r}");
        let mut lines = vec!["key=split-secr".to_string(), "et-BBBBBBBB ok".to_string()];
        redact_lines(&mut lines);
        assert_eq!(lines, vec!["key=[redacted]", " ok"]);
    }

    #[test]
    fn a_secret_cut_at_either_end_of_a_text_is_replaced() {
        register("cut-secret-CCCCCCCC");
        assert_eq!(redact("said cut-secr"), "said [redacted]");
        assert_eq!(redact("CCCCCCCC and more"), "[redacted] and more");
        assert_eq!(redact("said cut"), "said cut", "under four characters");
    }

    #[test]
    fn json_stays_json() {
        register("json\"secret\\DDDD");
        register("plainsecretEEEE");
        let raw = r#"{"a":"x plainsecretEEEE y","b":"json\"secret\\DDDD","n":1}"#;
        let r = redact_json(raw);
        let v: serde_json::Value = serde_json::from_str(&r).unwrap();
        assert_eq!(v["a"], "x [redacted] y");
        assert_eq!(v["b"], "[redacted]");
        assert_eq!(v["n"], 1);
        assert!(matches!(redact_json(r#"{"a":"b"}"#), Cow::Borrowed(_)));
    }
}
