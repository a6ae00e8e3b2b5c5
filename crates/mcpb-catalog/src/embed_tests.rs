use sha2::Digest;

use super::*;

/// The shipped files are the ones whose notice is in assets/potion-base-2M/NOTICE.md.
#[test]
fn shipped_files_are_the_pinned_ones() {
    let hex = |b: &[u8]| {
        sha2::Sha256::digest(b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    };
    assert_eq!(
        hex(TABLE),
        "f95ffde02ad06f63ae38eb9d400038cd5ccaf8411ec3cb650c6025113f96cbb8"
    );
    assert_eq!(
        hex(TOKENIZER),
        "e67e803f624fb4d67dea1c730d06e1067e1b14d830e2c2202569e3ef0f70bb50"
    );
}

/// Ids and vectors of the reference implementation (the `tokenizers` library and Model2Vec's
/// own encoder) for a few texts: accents, punctuation, a question, the empty text.
#[test]
fn matches_the_reference_encoder() {
    #[derive(serde::Deserialize)]
    struct Golden {
        text: String,
        ids: Vec<u32>,
        embedding: Vec<f32>,
    }
    let golden: Vec<Golden> =
        serde_json::from_str(include_str!("../assets/potion-base-2M/golden.json")).unwrap();
    let m = model().expect("the shipped model loads");
    for g in golden {
        assert_eq!(m.ids(&g.text), g.ids, "{:?}", g.text);
        let v = m.embed(&g.text);
        for (a, b) in v.iter().zip(&g.embedding) {
            assert!((a - b).abs() < 1e-4, "{:?}: {v:?}", g.text);
        }
    }
}

#[test]
fn related_texts_are_closer_than_unrelated_ones() {
    let m = model().unwrap();
    let q = m.embed("where can I stay for the night");
    let hotel = m.embed("Search for hotel rooms and vacation rentals");
    let git = m.embed("Show the working tree status of a git repository");
    assert!(
        dot(&q, &hotel) > dot(&q, &git),
        "{} {}",
        dot(&q, &hotel),
        dot(&q, &git)
    );
    assert!((dot(&hotel, &hotel) - 1.0).abs() < 1e-5);
}

#[test]
fn control_characters_cjk_and_long_words_are_handled_like_bert() {
    assert_eq!(normalise("A\u{0}b\u{200b}\tC"), "ab c");
    assert_eq!(normalise("東京"), " 東  京 ");
    assert_eq!(normalise("Crème"), "creme");
    assert_eq!(
        words("read_file(path)!"),
        ["read", "_", "file", "(", "path", ")", "!"]
    );
    let m = model().unwrap();
    assert!(m.ids(&"x".repeat(101)).is_empty());
    assert_eq!(m.ids(&"tokyo ".repeat(600)).len(), MAX_TOKENS);
}

/// Greedy longest match with no bound on a piece's length, as the reference describes it: the
/// bound (`WordPieces::longest`) must never change a word's pieces.
#[test]
fn the_bounded_match_finds_the_same_pieces_as_the_unbounded_one() {
    let m = model().expect("the shipped model loads");
    let w = &m.words;
    let naive = |word: &str| -> Option<Vec<u32>> {
        let chars: Vec<char> = word.chars().collect();
        let (mut start, mut out) = (0, Vec::new());
        while start < chars.len() {
            let mut end = chars.len();
            loop {
                if end == start {
                    return None;
                }
                let body: String = chars[start..end].iter().collect();
                let piece = if start > 0 { format!("##{body}") } else { body };
                if let Some(id) = w.id(&piece) {
                    out.push(id);
                    break;
                }
                end -= 1;
            }
            start = end;
        }
        Some(out)
    };
    let consonants: String = "bcdfghjklmnpqrstvwxz".chars().cycle().take(99).collect();
    for word in [
        "internationalization",
        "unbelievably",
        "pneumonoultramicroscopicsilicovolcanoconiosis",
        consonants.as_str(),
        "électricité",
        "a",
    ] {
        let mut ids = Vec::new();
        w.word_pieces(&normalise(word), &mut ids);
        let want = naive(&normalise(word)).unwrap_or_default();
        let want: Vec<u32> = want.into_iter().filter(|&id| id != w.unk).collect();
        assert_eq!(ids, want, "{word}");
        assert!(!ids.is_empty(), "{word}");
    }
    assert!(w.longest > 10 && w.longest < 40, "{}", w.longest);
    // A character no piece holds makes the word unknown, found before any piece is tried.
    let glued = format!("{consonants}\u{1F600}");
    assert_eq!(naive(&normalise(&glued)), None);
    let mut ids = Vec::new();
    w.word_pieces(&normalise(&glued), &mut ids);
    assert!(ids.is_empty());
}
