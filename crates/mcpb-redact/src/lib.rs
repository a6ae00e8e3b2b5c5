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
    /// What each pattern of the matcher is: its form, and where in it the pattern starts
    /// (windows of long secrets are patterns too).
    patterns: Vec<(usize, usize)>,
    matcher: Option<AhoCorasick>,
    /// The longest form, in characters, at most STREAM_TAIL (what a line stream keeps).
    longest_chars: usize,
}

static SECRETS: LazyLock<RwLock<Arc<Secrets>>> = LazyLock::new(RwLock::default);

/// The length, in characters, of the windows of a secret of `n` characters that are matched on
/// their own, so that a part of a secret shown anywhere in a text is found. Secrets of up to
/// WINDOW characters are matched whole.
fn window(n: usize) -> Option<usize> {
    (n > WINDOW).then_some(WINDOW)
}

/// Any run of this many characters of a secret is found wherever it stands (and then as far
/// as the text goes on matching): fewer would start to hit ordinary text.
const WINDOW: usize = 8;

/// Secrets longer than this (in characters) have a window starting every WINDOW characters
/// instead of at every one: any run of 2 x WINDOW - 1 of their characters is found, and the
/// matcher holds an eighth of the patterns (a 1 MiB certificate would otherwise be a million).
pub const DENSE_WINDOWS_UP_TO: usize = 4096;

/// Windows are taken every WINDOW characters from a secret's first this many characters only
/// (64 Ki), and every SPARSE_STRIDE characters after: registering a 1 MiB value costs about
/// what a 64 KiB one does. Past the first 64 Ki characters a piece is found when it is
/// SPARSE_STRIDE + WINDOW - 1 characters long or holds the secret's last window; the whole
/// value, and any copy with a character changed here and there, is found as before.
pub const WINDOWED_UP_TO: usize = 64 << 10;

/// The distance between windows past WINDOWED_UP_TO.
pub const SPARSE_STRIDE: usize = 1024;

/// The longest piece of a secret at either end of a text that the windows may miss: the cut
/// ends are looked for up to this many characters, whatever the secret's length.
const CUT_MAX: usize = 2 * WINDOW;

/// What a line stream keeps of the lines before, in characters.
const STREAM_TAIL: usize = 4096;

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
    let mut texts: Vec<&str> = Vec::new();
    let mut patterns = Vec::new();
    for (i, f) in forms.iter().enumerate() {
        let bounds: Vec<usize> = f.char_indices().map(|(b, _)| b).chain([f.len()]).collect();
        let chars = bounds.len() - 1;
        // A value past the cap is found by its windows (and extended as far as it matches), not
        // as one pattern of its own: the matcher stays the size of the cap.
        if chars <= WINDOWED_UP_TO {
            texts.push(f);
            patterns.push((i, 0));
        }
        if let Some(w) = window(chars) {
            let stride = if chars > DENSE_WINDOWS_UP_TO { w } else { 1 };
            let until = chars.min(WINDOWED_UP_TO);
            let sparse =
                (until.saturating_sub(w) + 1..chars.saturating_sub(w) + 1).step_by(SPARSE_STRIDE);
            for start in (1..until.saturating_sub(w) + 1)
                .step_by(stride)
                .chain(sparse)
            {
                texts.push(&f[bounds[start]..bounds[start + w]]);
                patterns.push((i, bounds[start]));
            }
            // The last window too, so a secret's end is found whatever the stride.
            if stride > 1 {
                let last = chars - w;
                texts.push(&f[bounds[last]..]);
                patterns.push((i, bounds[last]));
            }
            texts.push(&f[..bounds[w]]);
            patterns.push((i, 0));
        }
    }
    let matcher = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(&texts)
        .ok();
    let longest_chars = forms
        .first()
        .map_or(0, |f| f.chars().take(STREAM_TAIL).count());
    *guard = Arc::new(Secrets {
        forms,
        patterns,
        matcher,
        longest_chars,
    });
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

/// The byte ranges of `text` that show a secret or a part of one: whole values, windows
/// (extended as far as the text goes on matching the secret, both ways), and a secret's start
/// at the very end of the text or its end at the very start. Sorted, not overlapping.
fn ranges(set: &Secrets, text: &str) -> Vec<(usize, usize)> {
    let Some(matcher) = &set.matcher else {
        return Vec::new();
    };
    let mut out: Vec<(usize, usize)> = Vec::new();
    let tb = text.as_bytes();
    // How far the ranges so far reach: a match inside it adds nothing, and extensions never
    // scan it again, so the whole pass is linear in the text (a text that shows a long secret
    // with one character changed would otherwise be scanned once per window).
    let mut reach = 0;
    for m in matcher.find_iter(text) {
        if m.end() <= reach {
            continue;
        }
        let (form, offset) = set.patterns[m.pattern().as_usize()];
        let fb = set.forms[form].as_bytes();
        let (mut start, mut end) = (m.start(), m.end());
        let (mut fs, mut fe) = (offset, offset + (end - start));
        while fs > 0 && start > reach && tb[start - 1] == fb[fs - 1] {
            start -= 1;
            fs -= 1;
        }
        while fe < fb.len() && end < tb.len() && tb[end] == fb[fe] {
            end += 1;
            fe += 1;
        }
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while !text.is_char_boundary(end) {
            end += 1;
        }
        reach = reach.max(end);
        out.push((start, end));
    }
    if let Some(n) = cut_end(&set.forms, text) {
        out.push((text.len() - n, text.len()));
    }
    if let Some(n) = cut_start(&set.forms, text) {
        out.push((0, n));
    }
    out.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(out.len());
    for (s, e) in out {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// `text` with each range replaced by [`REDACTED`]; line breaks inside a range stay.
fn replaced(text: &str, ranges: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(start, end) in ranges {
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        out.extend(text[start..end].chars().filter(|c| *c == '\n'));
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// `text` with every registered secret replaced by [`REDACTED`]: whole occurrences, parts of
/// one (any 8 characters of it and on as far as it matches), ones split across line breaks, and a secret's start
/// at the very end of the text or its end at the very start (a line cut, or one of several
/// lines logged apart).
pub fn redact(text: &str) -> Cow<'_, str> {
    let set = current();
    if set.matcher.is_none() {
        return Cow::Borrowed(text);
    }
    let found = if text.contains(['\n', '\r']) {
        // Match on the text without its line breaks, then map each range back.
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
        ranges(&set, &joined)
            .into_iter()
            .map(|(s, e)| {
                let end = if e == joined.len() {
                    text.len()
                } else {
                    map[e]
                };
                (map[s], end)
            })
            .collect()
    } else {
        ranges(&set, text)
    };
    if found.is_empty() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(replaced(text, &found))
    }
}

/// Bytes at the end of `text` that are the start of a secret (at least MIN_SECRET_CHARS).
/// Only pieces of up to CUT_MAX characters are looked for: a longer one holds a whole window
/// and is found by the matcher; so the cost is the same for a secret of any length.
fn cut_end(forms: &[String], text: &str) -> Option<usize> {
    forms
        .iter()
        .filter_map(|f| {
            // The byte ends of the first CUT_MAX characters, shorter than the whole secret.
            let ends: Vec<usize> = f
                .char_indices()
                .skip(1)
                .map(|(i, _)| i)
                .take(CUT_MAX)
                .collect();
            ends.iter()
                .enumerate()
                .rev()
                .filter(|(k, _)| k + 1 >= MIN_SECRET_CHARS)
                .find(|(_, i)| text.ends_with(&f[..**i]))
                .map(|(_, i)| *i)
        })
        .max()
}

/// Bytes at the start of `text` that are the end of a secret (at least MIN_SECRET_CHARS),
/// looked for up to CUT_MAX characters like `cut_end`.
fn cut_start(forms: &[String], text: &str) -> Option<usize> {
    forms
        .iter()
        .filter_map(|f| {
            // The byte starts of the last CUT_MAX characters, after the secret's first.
            let starts: Vec<usize> = f
                .char_indices()
                .rev()
                .map(|(i, _)| i)
                .take(CUT_MAX)
                .filter(|&i| i > 0)
                .collect();
            starts
                .iter()
                .enumerate()
                .rev()
                .filter(|(k, _)| k + 1 >= MIN_SECRET_CHARS)
                .find(|(_, i)| text.starts_with(&f[**i..]))
                .map(|(_, i)| f.len() - i)
        })
        .max()
}

/// Redacts a stream of lines (an upstream's stderr) one at a time, remembering the end of what
/// came before: a secret written across several lines, in pieces of any size, is taken out of
/// each line that shows part of it (but for a first piece under four characters).
#[derive(Default)]
pub struct LineStream {
    /// The last characters of the stream so far, line breaks left out.
    tail: String,
}

impl LineStream {
    pub fn line(&mut self, line: &str) -> String {
        let set = current();
        if set.matcher.is_none() {
            return line.to_string();
        }
        let joined = format!("{}{line}", self.tail);
        let offset = self.tail.len();
        let found: Vec<(usize, usize)> = ranges(&set, &joined)
            .into_iter()
            .filter(|(_, e)| *e > offset)
            .map(|(s, e)| (s.saturating_sub(offset), e - offset))
            .collect();
        let longest = set.longest_chars;
        let keep = joined.chars().rev().take(longest).count();
        let cut = joined
            .char_indices()
            .rev()
            .nth(keep.saturating_sub(1))
            .map_or(0, |(i, _)| i);
        self.tail = joined[cut..].to_string();
        if found.is_empty() {
            line.to_string()
        } else {
            replaced(line, &found)
        }
    }
}

/// Each line of `lines` redacted as one text (a secret split across them is found), written
/// back in place.
pub fn redact_lines(lines: &mut [String]) {
    if lines.is_empty() || !any() {
        return;
    }
    let mut stream = LineStream::default();
    for line in lines.iter_mut() {
        let r = stream.line(line);
        if r != *line {
            *line = r;
        }
    }
}

/// JSON text with every secret taken out of its strings, decoded as a reader decodes them
/// (escapes of any kind), and a number written like a secret replaced by the string
/// "[redacted]": for what an upstream writes (errors, notifications, requests). The result is
/// valid JSON; text that is not JSON is redacted as text.
pub fn redact_json(raw: &str) -> Cow<'_, str> {
    if !any() {
        return Cow::Borrowed(raw);
    }
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(raw) else {
        return redact(raw);
    };
    if redact_value(&mut value) {
        Cow::Owned(value.to_string())
    } else {
        Cow::Borrowed(raw)
    }
}

/// Redacts every string (keys included) and secret-like number of `value`; whether any changed.
pub fn redact_value(value: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) => match redact(s) {
            Cow::Owned(r) => {
                *s = r;
                true
            }
            Cow::Borrowed(_) => false,
        },
        Value::Number(n) => {
            let text = n.to_string();
            if matches!(redact(&text), Cow::Owned(_)) {
                *value = Value::String(REDACTED.to_string());
                true
            } else {
                false
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, v| redact_value(v) | changed),
        Value::Object(map) => {
            let old = std::mem::take(map);
            let mut changed = false;
            for (k, mut v) in old {
                changed |= redact_value(&mut v);
                let key = match redact(&k) {
                    Cow::Owned(r) => {
                        changed = true;
                        r
                    }
                    Cow::Borrowed(_) => k,
                };
                map.insert(key, v);
            }
            changed
        }
        Value::Null | Value::Bool(_) => false,
    }
}

/// Our own JSON lines (the audit log): only the forms the broker itself writes can occur, so the
/// text is scanned as it is, string literals alone.
pub fn redact_own_json(raw: &str) -> Cow<'_, str> {
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
        assert_eq!(lines, vec!["key=[redacted]", "[redacted] ok"]);
        // One piece a line, each with words around it.
        let mut stream = LineStream::default();
        let shown: Vec<String> = ["a split-sec", "b ret-BBBBBBBB c"]
            .iter()
            .map(|l| stream.line(l))
            .collect();
        assert_eq!(shown.concat().matches("BB").count(), 0, "{shown:?}");
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
        let r = redact_own_json(raw);
        let v: serde_json::Value = serde_json::from_str(&r).unwrap();
        assert_eq!(v["a"], "x [redacted] y");
        assert_eq!(v["b"], "[redacted]");
        assert_eq!(v["n"], 1);
        assert!(matches!(redact_own_json(r#"{"a":"b"}"#), Cow::Borrowed(_)));
        // What an upstream writes is decoded first: any escape, numbers too.
        register("98765432");
        let upstream = r#"{"message":"\u0070lainsecret\u0045EEE","data":{"n":98765432,"s":"json\"secret\\DDDD"}}"#;
        let r = redact_json(upstream);
        assert!(
            !r.contains("EEE") && !r.contains("98765432") && !r.contains("DDDD"),
            "{r}"
        );
        assert!(serde_json::from_str::<serde_json::Value>(&r).is_ok(), "{r}");
    }

    #[test]
    fn a_part_of_a_secret_anywhere_in_a_text_is_found() {
        register("mid-secret-0123456789-abcdef");
        let shown = redact("x id-secret-0123456789-abcde y");
        assert_eq!(shown, "x [redacted] y");
        let long = "L".repeat(10) + &"0123456789".repeat(10);
        register(&long);
        let part = &long[30..80];
        assert_eq!(redact(&format!("<{part}>")), "<[redacted]>");
    }

    /// A secret of 1 MiB: shown whole, with one character changed every 64 KiB, cut at the end
    /// of a text, or in pieces of 15 characters anywhere, it is taken out; the work is linear
    /// in the text (mcpb-bench --redact measures it).
    #[test]
    fn a_long_secret_is_found_whole_changed_or_in_pieces() {
        // Base64-like, as a long credential is: no run of 8 characters occurs twice.
        const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let secret: String = (0..1 << 20)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(B64[(x >> 58) as usize])
            })
            .collect();
        register(&secret);
        let whole = format!("<{secret}>");
        assert_eq!(redact(&whole), "<[redacted]>");
        let mut changed = secret.clone().into_bytes();
        for i in (1000..changed.len()).step_by(64 << 10) {
            changed[i] = b'#';
        }
        let changed = String::from_utf8(changed).unwrap();
        let shown = redact(&changed);
        assert!(shown.len() < 200, "{}", &shown[..200.min(shown.len())]);
        let cut = format!("said {}", &secret[..12]);
        assert_eq!(redact(&cut), "said [redacted]");
        for at in [7, 4095, 60_001, (1 << 20) - 15] {
            let piece = &secret[at..at + 15];
            assert_eq!(redact(&format!("x {piece} y")), "x [redacted] y", "{at}");
        }
        // The cap, as documented: past the first 64 Ki characters, a piece is looked for on its
        // own from 1,031 characters on.
        let past = &secret[500_001..500_016];
        assert_eq!(redact(&format!("x {past} y")), format!("x {past} y"));
        let past = &secret[500_001..501_032];
        assert_eq!(redact(&format!("x {past} y")), "x [redacted] y");
    }
}
