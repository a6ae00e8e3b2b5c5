//! Invisible characters judged by what they do to a reader, not by their presence.
//!
//! Two kinds. *Quiet* ones (zero-width space and joiners, the word joiner, a byte-order mark,
//! the soft hyphen, the directional marks) are everywhere in pasted documentation and change
//! nothing a model reads: the scan removes them before matching (and reads them as spaces too,
//! so one cannot glue or split a phrase out of sight) and reports them as a note. They hold a
//! tool only when they carry something of their own: a run of them, or so many in one text,
//! is a message spelled in invisible characters. *Loud* ones change or hide what is read:
//! tag characters (an invisible copy of ASCII), bidirectional embeddings, overrides and
//! isolates (which reorder words), variation selectors outside a picture or an ideograph
//! (which can spell bytes), blank fillers, other format characters, private-use and control
//! characters. Each of those holds the tool until a person approves it.

/// Consecutive quiet characters from this many on spell something: pasted text has one or two
/// in a row (a zero-width space pair after a space is common in generated docs), data needs more.
pub(crate) const QUIET_RUN: usize = 4;
/// Quiet characters in one text from this many on are a message spread one per gap.
pub(crate) const QUIET_TOTAL: usize = 33;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Normalised away for matching; a note.
    Quiet(&'static str),
    /// Holds the tool.
    Loud(&'static str),
}

#[expect(
    clippy::wildcard_enum_match_arm,
    reason = "the general categories are non-exhaustive; only three are findings"
)]
pub(crate) fn class(c: char) -> Option<Class> {
    use Class::{Loud, Quiet};
    match c as u32 {
        // Tab and the line breaks (vertical tab, form feed and NEL of generated docs too): a
        // reader sees them as layout, and matching reads them as spaces.
        0x09..=0x0D | 0x85 => None,
        0xE0000..=0xE007F => Some(Loud("Unicode tag character")),
        0x202A..=0x202E | 0x2066..=0x2069 => Some(Loud("bidirectional control")),
        0x200E | 0x200F | 0x061C => Some(Quiet("directional mark")),
        0x200B..=0x200D | 0x2060..=0x2064 | 0xFEFF | 0x180E | 0x00AD => {
            Some(Quiet("zero-width character"))
        }
        // Khmer's inherent vowels show nothing; counted like the zero-width ones.
        0x17B4 | 0x17B5 => Some(Quiet("invisible vowel")),
        // The grapheme joiner has no use in the scripts a phrase could be written in.
        0x034F => Some(Loud("zero-width character")),
        0xFE00..=0xFE0F | 0xE0100..=0xE01EF | 0x180B..=0x180D => Some(Loud("variation selector")),
        0x3164 | 0x115F | 0x1160 | 0xFFA0 | 0x2800 => Some(Loud("blank filler character")),
        _ => match unicode_general_category::get_general_category(c) {
            unicode_general_category::GeneralCategory::Format => Some(Loud("format character")),
            unicode_general_category::GeneralCategory::PrivateUse => {
                Some(Loud("private-use character"))
            }
            unicode_general_category::GeneralCategory::Control => Some(Loud("control character")),
            _ => None,
        },
    }
}

/// Whether `c` is any invisible character the scan knows.
pub(crate) fn hidden(c: char) -> bool {
    class(c).is_some()
}

pub(crate) fn quiet(c: char) -> bool {
    matches!(class(c), Some(Class::Quiet(_)))
}

/// A pictograph that emoji sequences join, modify or tag.
fn emoji(c: char) -> bool {
    matches!(c as u32,
        0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2300..=0x23FF | 0x2B00..=0x2BFF
        | 0x2190..=0x21FF | 0x3030 | 0x303D | 0x3297 | 0x3299 | 0x00A9 | 0x00AE | 0x203C
        | 0x2049 | 0x2122 | 0x2139)
}

/// A CJK ideograph, which an ideographic variation selector may follow (a name's glyph form).
fn ideograph(c: char) -> bool {
    matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3134F)
}

/// Whether the invisible character at `i` belongs to what a reader sees: a presentation
/// selector after a pictograph, a zero-width joiner between two, the tags of a subdivision flag
/// (U+1F3F4 followed by tags up to U+E007F), one ideographic selector after an ideograph, a
/// joiner inside a word of a script that shapes with it.
pub(crate) fn seen(chars: &[char], i: usize) -> bool {
    let c = chars[i];
    let prev = i.checked_sub(1).map(|p| chars[p]);
    let next = chars.get(i + 1).copied();
    match c as u32 {
        0xFE0E | 0xFE0F => {
            prev.is_some_and(|p| !p.is_ascii() && !hidden(p) && !p.is_alphanumeric())
                // A keycap: 1️⃣, #️⃣.
                || (prev.is_some_and(|p| p.is_ascii_digit() || p == '#' || p == '*')
                    && next == Some('\u{20E3}'))
        }
        0xE0100..=0xE01EF => prev.is_some_and(ideograph),
        0x200D => {
            (prev.is_some_and(|p| emoji(p) || p == '\u{FE0F}') && next.is_some_and(emoji))
                || joins_letters(prev, next)
        }
        // Persian, Urdu and the Indic scripts shape words with the non-joiner.
        0x200C => joins_letters(prev, next),
        // A subdivision flag is U+1F3F4, the tags of one of the three that Unicode recommends
        // (England, Scotland, Wales), then the cancel tag: any other run of tags spells text,
        // even when it looks like a flag (six letters at a time would carry a message).
        0xE0020..=0xE007F => {
            let code = |x: &char| matches!(*x as u32, 0xE0030..=0xE0039 | 0xE0061..=0xE007A);
            let Some(start) = chars[..i].iter().rposition(|x| !code(x)) else {
                return false;
            };
            let letters: String = chars[start + 1..]
                .iter()
                .take_while(|x| code(x))
                .filter_map(|x| char::from_u32(*x as u32 - 0xE0000))
                .collect();
            let end = start + 1 + letters.chars().count();
            chars[start] == '\u{1F3F4}'
                && chars.get(end) == Some(&'\u{E007F}')
                && matches!(letters.as_str(), "gbeng" | "gbsct" | "gbwls")
                && i <= end
        }
        _ => false,
    }
}

/// A joiner between two letters of a script that uses joiners inside words (not Latin, Greek
/// or Cyrillic, whose words never need one).
fn joins_letters(prev: Option<char>, next: Option<char>) -> bool {
    // A virama or vowel sign (a combining mark) is part of the letter before a joiner.
    // Arabic (Persian, Urdu), Syriac, Thaana, N'Ko, the Indic scripts and Sinhala, Myanmar,
    // Khmer and Mongolian: scripts whose words use the joiners. Not CJK, where a run of them
    // between ideographs spells data.
    let shaped = |c: char| {
        (c.is_alphabetic() || unicode_normalization::char::is_combining_mark(c))
            && matches!(c as u32,
                0x0600..=0x07FF | 0x0860..=0x08FF | 0x0900..=0x0DFF | 0x1000..=0x109F
                | 0x1780..=0x18AF | 0xA8E0..=0xA8FF | 0xFB50..=0xFDFF | 0xFE70..=0xFEFF)
    };
    prev.is_some_and(shaped) && next.is_some_and(shaped)
}

/// What one text's invisible characters amount to: (holds the tool, detail) pairs, each detail
/// once.
pub(crate) fn judge(chars: &[char]) -> Vec<(bool, String)> {
    let mut out: Vec<(bool, String)> = Vec::new();
    let mut push = |holds: bool, detail: String| {
        if !out.iter().any(|(h, d)| *h == holds && *d == detail) {
            out.push((holds, detail));
        }
    };
    let (mut run, mut longest, mut total) = (0usize, 0usize, 0usize);
    for (i, &c) in chars.iter().enumerate() {
        let Some(class) = class(c).filter(|_| !seen(chars, i)) else {
            run = 0;
            continue;
        };
        match class {
            Class::Loud(what) => {
                run = 0;
                push(true, format!("{what} U+{:04X}", c as u32));
            }
            Class::Quiet(what) => {
                run += 1;
                total += 1;
                longest = longest.max(run);
                push(false, format!("{what} U+{:04X}", c as u32));
            }
        }
    }
    if longest >= QUIET_RUN {
        push(
            true,
            format!("hidden data: a run of {longest} invisible characters"),
        );
    } else if total >= QUIET_TOTAL {
        push(
            true,
            format!("hidden data: {total} invisible characters in one text"),
        );
    }
    out
}
