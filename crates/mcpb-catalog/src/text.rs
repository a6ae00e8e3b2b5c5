//! Turning names and prose into search terms: identifiers split at camelCase, snake_case,
//! kebab-case and dots, lower-cased, common English words dropped, and a light suffix stemmer so
//! "files", "filing" and "filed" meet "file". CJK text becomes one term per character, so tools
//! described in Chinese or Japanese stay findable.

/// Words too common in tool descriptions and requests to tell tools apart.
fn is_stopword(word: &str) -> bool {
    // A match compiles to a few length and byte comparisons, much cheaper per token than a
    // scan through a list.
    matches!(
        word,
        "a" | "an"
            | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "by"
            | "can"
            | "do"
            | "for"
            | "from"
            | "get"
            | "has"
            | "have"
            | "i"
            | "if"
            | "in"
            | "into"
            | "is"
            | "it"
            | "its"
            | "me"
            | "my"
            | "of"
            | "on"
            | "or"
            | "our"
            | "please"
            | "should"
            | "so"
            | "that"
            | "the"
            | "their"
            | "them"
            | "then"
            | "there"
            | "these"
            | "this"
            | "those"
            | "to"
            | "us"
            | "use"
            | "using"
            | "was"
            | "we"
            | "what"
            | "when"
            | "which"
            | "will"
            | "with"
            | "would"
            | "you"
            | "your"
            | "want"
            | "need"
            | "all"
            | "any"
            | "also"
            | "about"
            | "after"
            | "before"
            | "via"
            | "given"
            | "specified"
            | "provided"
            | "how"
            | "who"
            | "where"
            | "some"
            | "such"
            | "than"
    )
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// Raw words: identifier parts and prose words, lower-case, before stopwords and stemming.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(std::mem::take(cur));
        }
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush(&mut cur, &mut out);
            out.push(c.to_string());
            prev = None;
            continue;
        }
        if !c.is_alphanumeric() {
            flush(&mut cur, &mut out);
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            let camel = p.is_lowercase() && c.is_uppercase();
            let digit_edge = p.is_ascii_digit() != c.is_ascii_digit();
            if camel || digit_edge {
                flush(&mut cur, &mut out);
            }
        }
        if c.is_ascii() {
            cur.push(c.to_ascii_lowercase());
        } else {
            cur.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    flush(&mut cur, &mut out);
    out
}

/// A light English stemmer: plural and verb endings only, never below three letters.
pub fn stem(word: &str) -> String {
    stem_cow(word).into_owned()
}

fn stem_owned(word: String) -> String {
    match stem_cow(&word) {
        std::borrow::Cow::Borrowed(_) => word,
        std::borrow::Cow::Owned(s) => s,
    }
}

/// The stem, borrowed when the word has no ending to remove (most words): no allocation.
fn stem_cow(w: &str) -> std::borrow::Cow<'_, str> {
    let n = w.len();
    // Words whose final "s" is not a plural: "news" is not "new".
    if !w.is_ascii() || n <= 3 || matches!(w, "news" | "series" | "species" | "always" | "lens") {
        return std::borrow::Cow::Borrowed(w);
    }
    for (suffix, replace) in [
        ("ies", "y"),
        ("sses", "ss"),
        ("xes", "x"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("ing", ""),
        ("ed", ""),
        ("s", ""),
    ] {
        if let Some(base) = w.strip_suffix(suffix) {
            if suffix == "s" && (base.ends_with('s') || base.ends_with('u') || base.ends_with('i'))
            {
                continue;
            }
            if base.len() + replace.len() >= 3 {
                let mut b = base.to_string();
                // "running" -> "run", "stopped" -> "stop"
                if (suffix == "ing" || suffix == "ed") && b.len() >= 4 {
                    let bytes = b.as_bytes();
                    let l = bytes.len();
                    if bytes[l - 1] == bytes[l - 2] && !matches!(bytes[l - 1], b'l' | b's' | b'z') {
                        b.pop();
                    }
                }
                b.push_str(replace);
                return std::borrow::Cow::Owned(b);
            }
        }
    }
    std::borrow::Cow::Borrowed(w)
}

/// Calls `f` with each raw word of `text` (see `words`), reusing one buffer: no allocation per
/// word.
pub fn each_word(text: &str, mut f: impl FnMut(&str)) {
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    for c in text.chars() {
        if is_cjk(c) {
            if !cur.is_empty() {
                f(&cur);
                cur.clear();
            }
            let mut b = [0u8; 4];
            f(c.encode_utf8(&mut b));
            prev = None;
            continue;
        }
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                f(&cur);
                cur.clear();
            }
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            let camel = p.is_lowercase() && c.is_uppercase();
            let digit_edge = p.is_ascii_digit() != c.is_ascii_digit();
            if (camel || digit_edge) && !cur.is_empty() {
                f(&cur);
                cur.clear();
            }
        }
        if c.is_ascii() {
            cur.push(c.to_ascii_lowercase());
        } else {
            cur.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    if !cur.is_empty() {
        f(&cur);
    }
}

/// Calls `f` with each search term of `text` (see `terms`), allocating only when a word is
/// stemmed.
pub fn each_term(text: &str, mut f: impl FnMut(&str)) {
    each_word(text, |w| {
        if is_stopword(w) {
            return;
        }
        f(&stem_cow(w));
    });
}

/// Words people use in requests for what tool definitions usually call otherwise: the action
/// verbs and object nouns of tool vocabularies (stemmed forms). A request term adds these at a
/// lower weight.
pub fn related(term: &str) -> &'static [&'static str] {
    match term {
        "save" | "store" => &["write", "create"],
        "write" => &["save"],
        "find" | "look" | "lookup" => &["search", "query"],
        "search" => &["find", "query"],
        "show" | "display" => &["get", "list"],
        "check" | "see" => &["get", "search"],
        "make" | "build" => &["create", "generate"],
        "create" => &["generate", "new"],
        "remove" | "erase" => &["delete"],
        "delete" => &["remove"],
        "open" | "load" => &["read", "get"],
        "read" => &["get", "load"],
        "change" | "modify" | "edit" => &["update", "edit"],
        "run" | "launch" => &["execute", "start"],
        "download" => &["fetch", "get"],
        "fetch" => &["get", "download"],
        "picture" | "photo" => &["image"],
        "image" => &["picture", "photo"],
        "webpage" | "website" | "page" | "link" => &["url", "web"],
        "folder" => &["directory"],
        "directory" => &["folder"],
        "document" => &["file", "doc"],
        "recommend" => &["suggest"],
        "suggest" => &["recommend"],
        // A relative day needs today's date first.
        "today" | "tomorrow" | "yesterday" | "tonight" | "monday" | "tuesday" | "wednesday"
        | "thursday" | "friday" | "saturday" | "sunday" => &["current", "date", "time"],
        "trend" | "popular" => &["trend", "rank", "hot"],
        _ => &[],
    }
}

enum Verb {
    Read,
    Write,
}

/// Whether a path is written or read, from the words before it in its sentence: the nearest
/// verb of either kind decides ("export the table from the database to X" writes, "read the
/// data in X" reads); with no verb, the word right before the path does: "under", "of" or
/// "from" read ("a summary of X"), and "in", "to", "as", "at", "into" or "on" after a product
/// ("a markdown report in X") write.
fn governing_verb(before: &[&str]) -> Option<Verb> {
    const WRITE: &[&str] = &[
        "save", "saved", "saving", "write", "written", "writing", "store", "stored", "export",
        "exported", "draft", "output", "generate", "create", "make", "produce", "compile", "put",
    ];
    const READ: &[&str] = &[
        "read",
        "open",
        "load",
        "parse",
        "analyze",
        "analyse",
        "extract",
        "summarize",
        "summarise",
        "check",
        "inspect",
    ];
    const PRODUCT: &[&str] = &["report", "summary", "brief", "document", "note", "notes"];
    let plain = |t: &str| {
        t.trim_matches(|c: char| !c.is_alphanumeric())
            .to_ascii_lowercase()
    };
    let mut product = false;
    for (n, t) in before.iter().rev().enumerate() {
        if n >= 16 || (n > 0 && t.ends_with(['.', '!', '?'])) {
            break;
        }
        let w = plain(t);
        if WRITE.contains(&w.as_str()) {
            return Some(Verb::Write);
        }
        if READ.contains(&w.as_str()) {
            return Some(Verb::Read);
        }
        product |= PRODUCT.contains(&w.as_str());
    }
    match before.last().map(|t| plain(t)).as_deref() {
        Some("under" | "of" | "from") => Some(Verb::Read),
        Some("in" | "to" | "as" | "at" | "into" | "on") if product => Some(Verb::Write),
        _ => None,
    }
}

/// The parts of a request that may each ask for a different tool: its sentences and clauses
/// (split at `.`, `!`, `?`, `;` and "then"), those with at least two search terms, eight at
/// most; empty when the request is one part.
pub fn clauses(query: &str) -> Vec<&str> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let mut chars = query.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        // A full stop inside a path, a number or a domain name does not end anything.
        let ends = match c {
            ';' => true,
            '.' | '!' | '?' => chars.peek().is_none_or(|(_, n)| n.is_whitespace()),
            _ => false,
        };
        if ends {
            sentences.push(&query[start..i + 1]);
            start = i + 1;
        }
    }
    sentences.push(&query[start..]);
    // Each part costs the transformer tier a pass: a request of more steps than this is
    // judged by its first ones and by the whole.
    const MAX_PARTS: usize = 8;
    let parts: Vec<&str> = sentences
        .into_iter()
        .flat_map(|s| s.split(" then "))
        .filter(|p| terms(p).len() >= 2)
        .take(MAX_PARTS)
        .collect();
    if parts.len() < 2 { Vec::new() } else { parts }
}

/// Words a request implies without saying them: a file path means a file (and its extension a
/// kind of file), a URL means fetching from the web. Returned stemmed, with their weights.
pub fn implied(query: &str) -> Vec<(String, f32)> {
    let mut out: Vec<(&str, f32)> = Vec::new();
    let tokens: Vec<&str> = query.split_whitespace().collect();
    for (i, token) in tokens.iter().enumerate() {
        let token = token.trim_matches(|c: char| {
            matches!(
                c,
                ',' | ';' | ':' | '"' | '\'' | '(' | ')' | '`' | '?' | '!'
            )
        });
        let token = token.trim_end_matches('.');
        let lower = token.to_ascii_lowercase();
        if lower.starts_with("http://")
            || lower.starts_with("https://")
            || lower.starts_with("www.")
        {
            out.extend([("url", 1.0), ("web", 0.5), ("fetch", 0.5)]);
            continue;
        }
        let is_path = lower.starts_with('/') || lower.starts_with("~/") || lower.starts_with("./");
        match lower.rsplit_once('.') {
            Some((stem, e))
                if (is_path || stem.contains('/'))
                    && !e.is_empty()
                    && e.len() <= 5
                    && !e.contains('/') =>
            {
                out.extend([("file", 1.0), ("path", 0.5)]);
                match governing_verb(&tokens[..i]) {
                    Some(Verb::Write) => out.push(("write", 1.0)),
                    Some(Verb::Read) => out.push(("read", 1.0)),
                    None => {}
                }
                let kind: &[&str] = match e {
                    "md" | "txt" | "log" | "rst" => &["text", "markdown"],
                    "xlsx" | "xls" | "csv" | "tsv" => &["excel", "sheet", "spreadsheet"],
                    "docx" | "doc" | "odt" => &["word", "document"],
                    "pptx" | "ppt" => &["presentation", "slide"],
                    "pdf" => &["pdf", "document"],
                    "png" | "jpg" | "jpeg" | "gif" | "webp" | "svg" => &["image"],
                    "wav" | "mp3" | "flac" | "ogg" | "m4a" => &["audio"],
                    "mp4" | "mov" | "mkv" | "webm" => &["video"],
                    "html" | "htm" => &["html", "web"],
                    "json" | "yaml" | "yml" | "toml" => &["json", "config"],
                    _ => &[],
                };
                out.extend(kind.iter().map(|k| (*k, 0.5)));
            }
            _ if is_path => out.extend([("directory", 0.5), ("path", 0.5)]),
            _ => {}
        }
    }
    out.into_iter().map(|(w, q)| (stem(w), q)).collect()
}

/// Search terms: words without stopwords, stemmed.
pub fn terms(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .map(stem_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_identifiers_of_every_style() {
        assert_eq!(words("getCurrentTime"), ["get", "current", "time"]);
        assert_eq!(
            words("read_text-file.v2"),
            ["read", "text", "file", "v", "2"]
        );
        assert_eq!(words("HTTPRequest"), ["httprequest"]);
        assert_eq!(words("使用必应搜索"), ["使", "用", "必", "应", "搜", "索"]);
    }

    #[test]
    fn stems_only_common_endings() {
        for (w, s) in [
            ("files", "file"),
            ("searches", "search"),
            ("running", "run"),
            ("stopped", "stop"),
            ("queries", "query"),
            ("status", "status"),
            ("class", "class"),
            ("news", "news"),
            ("is", "is"),
        ] {
            assert_eq!(stem(w), s, "{w}");
        }
    }

    #[test]
    fn the_streaming_forms_agree_with_the_collecting_ones() {
        let text = "Search GitHub repositoriesByName in 東京 for running_jobs v2.0";
        let mut streamed = Vec::new();
        each_term(text, |t| streamed.push(t.to_string()));
        assert_eq!(streamed, terms(text));
        let mut raw = Vec::new();
        each_word(text, |t| raw.push(t.to_string()));
        assert_eq!(raw, words(text));
    }

    #[test]
    fn paths_and_urls_imply_files_and_fetching() {
        let hints =
            implied("save it to /root/markdown/report.md, then open https://example.org/x.");
        let words: Vec<&str> = hints.iter().map(|(w, _)| w.as_str()).collect();
        for w in ["file", "path", "text", "markdown", "url", "fetch", "write"] {
            assert!(words.contains(&stem(w).as_str()), "{w} in {words:?}");
        }
        assert!(implied("version 2.0 of the app, e.g. this").is_empty());
        let says = |q: &str, verb: &str| implied(q).iter().any(|(w, _)| w == verb);
        assert!(says("Read the data under /root/a.xlsx and plot it", "read"));
        assert!(says(
            "draft a Markdown intro document for it in /root/a.md",
            "write"
        ));
        assert!(says(
            "Give me a markdown report on /root/markdown/r.md",
            "write"
        ));
        assert!(says(
            "Open the data. Then give me a report in /root/r.md",
            "write"
        ));
        assert!(!says("Open the data. Then give me /root/r.md", "read"));
        assert!(says(
            "Export the table from the database to /root/out.csv",
            "write"
        ));
        assert!(says(
            "Save the chart from the data as /root/chart.png",
            "write"
        ));
        assert!(says("Give me a brief summary of /root/paper.pdf", "read"));
        assert!(says("the numbers under /root/a.xlsx", "read"));
        for neutral in [
            "What does the report /root/q3.pdf say",
            "Compare the note /a.md with the note /b.md",
        ] {
            assert!(
                !says(neutral, "read") && !says(neutral, "write"),
                "{neutral}"
            );
        }
        assert!(
            implied("list /root/git")
                .iter()
                .any(|(w, _)| w == "directory")
        );
    }

    #[test]
    fn a_request_of_several_steps_has_a_part_per_step() {
        assert_eq!(
            clauses("Read the sheet at /root/a.xlsx. Plot the totals; then save it as a PNG"),
            [
                "Read the sheet at /root/a.xlsx.",
                " Plot the totals;",
                "save it as a PNG"
            ]
        );
        assert!(clauses("What is the weather in Paris?").is_empty());
        assert!(clauses("version 2.0 of the app").is_empty());
    }

    #[test]
    fn drops_stopwords() {
        assert_eq!(terms("Get the weather for a city"), ["weather", "city"]);
    }
}
