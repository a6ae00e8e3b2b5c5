//! Static text embeddings for search: Model2Vec's potion-base-2M (64 dimensions, a WordPiece
//! vocabulary of 29,528 tokens), shipped inside the program (assets/potion-base-2M, with its
//! licence notice and pinned hashes), so nothing is fetched at run time.
//!
//! A text's vector is the mean of its tokens' rows, L2-normalised: BERT's normaliser (control
//! characters dropped, CJK characters apart, accents stripped, lower case), a split on
//! whitespace and punctuation, then WordPiece's greedy longest match with `##` continuations;
//! unknown words add nothing. Hand-written rather than through the `tokenizers` crate: the
//! whole pipeline is these steps, and that crate would add about forty crates (rayon, C++) to
//! the build for them. The parity test holds it to the reference tokenizer's ids and vectors.
//!
//! The model is parsed on first use (the vocabulary into a map; the table stays in the
//! binary's read-only data and is read in place), so a daemon that never searches pays nothing.

use std::collections::HashMap;
use std::sync::OnceLock;

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

const TOKENIZER: &[u8] = include_bytes!("../assets/potion-base-2M/tokenizer.json");
const TABLE: &[u8] = include_bytes!("../assets/potion-base-2M/model.safetensors");

/// Dimensions of a vector.
pub const DIM: usize = 64;

/// What keys the shipped model's cached vectors: the model and this encoder's version (bump it
/// when a text would map to another vector, so no cached vector of the old mapping is used).
pub const VECTORS_KEY: &str = "potion-base-2M/encoder-1";
/// Tokens of one text that count; the rest is ignored (as the model was trained).
const MAX_TOKENS: usize = 512;
/// Longer words are unknown to WordPiece.
const MAX_WORD_CHARS: usize = 100;

/// A unit vector (or all zeros for a text with no known token).
pub type Vector = [f32; DIM];

/// A WordPiece vocabulary (BERT's uncased tokenizer, as both shipped models use).
pub(crate) struct WordPieces {
    vocab: HashMap<String, u32>,
    unk: u32,
    /// Characters of the longest piece (without `##`): no longer match is tried, which keeps a
    /// crafted long word at a cost linear in its length instead of quadratic.
    longest: usize,
    /// Every character some piece holds: a word with any other can have no pieces, which is
    /// known without trying them.
    known: std::collections::HashSet<char>,
}

impl WordPieces {
    /// From a tokenizer.json of the `tokenizers` library (its WordPiece model's vocabulary).
    pub(crate) fn from_tokenizer_json(bytes: &[u8]) -> Option<Self> {
        let file: TokenizerFile = serde_json::from_slice(bytes).ok()?;
        let unk = *file.model.vocab.get(&file.model.unk_token)?;
        let longest = file
            .model
            .vocab
            .keys()
            .map(|k| k.strip_prefix("##").unwrap_or(k).chars().count())
            .max()
            .unwrap_or(1);
        let known = file
            .model
            .vocab
            .keys()
            .flat_map(|k| k.strip_prefix("##").unwrap_or(k).chars())
            .collect();
        Some(Self {
            vocab: file.model.vocab,
            unk,
            longest,
            known,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.vocab.len()
    }

    #[cfg_attr(not(feature = "semantic-minilm"), allow(dead_code))]
    pub(crate) fn id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }

    /// Token ids of `text` (at most `max`), unknown words left out.
    pub(crate) fn ids(&self, text: &str, max: usize) -> Vec<u32> {
        let mut ids = Vec::new();
        for word in words(&normalise(text)) {
            self.word_pieces(&word, &mut ids);
            if ids.len() >= max {
                ids.truncate(max);
                break;
            }
        }
        ids
    }

    fn word_pieces(&self, word: &str, out: &mut Vec<u32>) {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > MAX_WORD_CHARS || chars.iter().any(|(_, c)| !self.known.contains(c)) {
            return;
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut piece = String::new();
        while start < chars.len() {
            let mut end = chars.len().min(start + self.longest);
            let mut found = None;
            while end > start {
                let from = chars[start].0;
                let to = chars.get(end).map_or(word.len(), |c| c.0);
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.push_str(&word[from..to]);
                if let Some(&id) = self.vocab.get(piece.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => pieces.push(id),
                // One piece missing makes the whole word unknown.
                None => return,
            }
            start = end;
        }
        out.extend(pieces.into_iter().filter(|&id| id != self.unk));
    }
}

/// The loaded model: the vocabulary and where the table's rows are.
pub struct Model {
    words: WordPieces,
    /// The table's bytes (F32, little-endian, row-major), in the binary.
    rows: &'static [u8],
}

static MODEL: OnceLock<Option<Model>> = OnceLock::new();

/// The shipped model, parsed once; `None` if its files cannot be read (a test holds them).
pub fn model() -> Option<&'static Model> {
    MODEL.get_or_init(Model::load).as_ref()
}

/// The shipped model if a search already loaded it (never loads it).
pub fn loaded() -> Option<&'static Model> {
    MODEL.get().and_then(Option::as_ref)
}

#[derive(serde::Deserialize)]
struct TokenizerFile {
    model: WordPieceFile,
}

#[derive(serde::Deserialize)]
struct WordPieceFile {
    unk_token: String,
    vocab: HashMap<String, u32>,
}

impl Model {
    fn load() -> Option<Self> {
        let words = WordPieces::from_tokenizer_json(TOKENIZER)?;
        let rows = table(TABLE, words.len())?;
        Some(Self { words, rows })
    }

    /// Token ids of `text` as the model's tokenizer gives them, unknown words left out.
    pub fn ids(&self, text: &str) -> Vec<u32> {
        // The tokens kept come from the text's first few kilobytes: a description of megabytes
        // is not normalised whole to keep its first words.
        let mut end = text.len().min(MAX_TOKENS * 32);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.words.ids(&text[..end], MAX_TOKENS)
    }

    fn row(&self, id: u32, into: &mut [f32; DIM]) {
        let at = id as usize * DIM * 4;
        let Some(bytes) = self.rows.get(at..at + DIM * 4) else {
            return;
        };
        for (v, b) in into.iter_mut().zip(bytes.chunks_exact(4)) {
            *v += f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    }

    /// The text's unit vector: the mean of its tokens' rows, normalised.
    pub fn embed(&self, text: &str) -> Vector {
        let mut v = [0f32; DIM];
        let ids = self.ids(text);
        for &id in &ids {
            self.row(id, &mut v);
        }
        // The mean's direction is the sum's: normalising is all that is left to do.
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 1e-12 {
            for x in &mut v {
                *x /= norm;
            }
        }
        v
    }
}

/// Dot product of two vectors (their cosine, both being unit vectors). Eight partial sums
/// instead of one running sum: the compiler may not reorder float additions, so a single sum is
/// a chain of 64 dependent adds; eight independent lanes vectorise (a search over 10,000 tools
/// spent most of its time here before, `mcpb-bench --retrieval`).
pub fn dot(a: &Vector, b: &Vector) -> f32 {
    let mut lanes = [0f32; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum()
}

/// The F32 table of a safetensors file holding one `[rows, DIM]` tensor.
fn table(file: &'static [u8], rows: usize) -> Option<&'static [u8]> {
    let len = u64::from_le_bytes(file.get(..8)?.try_into().ok()?);
    let header_end = 8usize.checked_add(usize::try_from(len).ok()?)?;
    let header: serde_json::Value = serde_json::from_slice(file.get(8..header_end)?).ok()?;
    let t = header
        .as_object()?
        .values()
        .find(|v| v.get("dtype").is_some())?;
    let shape: Vec<u64> = serde_json::from_value(t.get("shape")?.clone()).ok()?;
    if t["dtype"] != "F32" || shape != [rows as u64, DIM as u64] {
        return None;
    }
    let offsets: Vec<usize> = serde_json::from_value(t.get("data_offsets")?.clone()).ok()?;
    let (from, to) = (*offsets.first()?, *offsets.get(1)?);
    if to - from != rows * DIM * 4 {
        return None;
    }
    file.get(header_end + from..header_end + to)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Unassigned
            | GeneralCategory::PrivateUse
            | GeneralCategory::Surrogate
    )
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            get_general_category(c),
            GeneralCategory::ConnectorPunctuation
                | GeneralCategory::DashPunctuation
                | GeneralCategory::OpenPunctuation
                | GeneralCategory::ClosePunctuation
                | GeneralCategory::InitialPunctuation
                | GeneralCategory::FinalPunctuation
                | GeneralCategory::OtherPunctuation
        )
}

/// BERT's normaliser: control characters out, whitespace to spaces, CJK characters apart,
/// accents stripped, lower case.
fn normalise(text: &str) -> String {
    let mut clean = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{FFFD}' || is_control(c) {
            continue;
        }
        if c.is_whitespace() {
            clean.push(' ');
        } else if is_cjk(c) {
            clean.push(' ');
            clean.push(c);
            clean.push(' ');
        } else {
            clean.push(c);
        }
    }
    clean
        .nfd()
        .filter(|&c| get_general_category(c) != GeneralCategory::NonspacingMark)
        .flat_map(char::to_lowercase)
        .collect()
}

/// Words split on whitespace, each punctuation character a word of its own.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in text.split_whitespace() {
        let mut word = String::new();
        for c in chunk.chars() {
            if is_punctuation(c) {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                out.push(c.to_string());
            } else {
                word.push(c);
            }
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

#[cfg(test)]
#[path = "embed_tests.rs"]
mod tests;
