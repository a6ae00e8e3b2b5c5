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
