//! Config loading against hostile YAML, bounded to run in seconds: any text, and documents
//! built from the parts that trip parsers (anchors and aliases, tags, deep flow collections,
//! long scalars, duplicate keys) must give settings or a clear error, never a panic or a hang.

use mcpb_config::load::parse_raw;
use proptest::prelude::*;

const PARTS: &[&str] = &[
    "schema_version: 1\n",
    "upstreams:\n",
    "  a: &a {command: x, args: [y]}\n",
    "  b: *a\n",
    "  c: {<<: *a, command: z}\n",
    "  d: !!binary aGk=\n",
    "  e: !custom {command: x}\n",
    "  f: {command: [[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]}\n",
    "profiles: {p: {upstreams: [a, a, a]}}\n",
    "broker: {max_clients: 99999999999999999999999}\n",
    "broker: {call_timeout_ms: \"1h 30m\"}\n",
    "x: &x [1, 2, 3]\ny: &y [*x, *x, *x, *x]\nz: [*y, *y, *y, *y]\n",
    "- list at top\n",
    "? complex key\n: value\n",
    "%YAML 1.2\n---\n",
    "...\n",
    "\t tab indented: 1\n",
    "key: 'unterminated\n",
    "upstreams: {a: {command: x}, a: {command: y}}\n",
];

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_loads_or_fails_cleanly(text in any::<String>()) {
        let _ = parse_raw(&text, "fuzz.yaml");
    }

    #[test]
    fn hostile_documents_load_or_fail_cleanly(
        parts in prop::collection::vec(prop::sample::select(PARTS), 0..12),
        long in 0usize..200_000,
    ) {
        let mut text: String = parts.concat();
        text.push_str(&format!("note: \"{}\"\n", "x".repeat(long)));
        let started = std::time::Instant::now();
        let _ = parse_raw(&text, "fuzz.yaml");
        prop_assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}

/// Aliases nested ten deep, ten each (a billion leaves if expanded): refused or read as
/// written, at once.
#[test]
fn alias_bombs_are_not_expanded() {
    let mut doc = String::from("schema_version: 1\na: &a [x,x,x,x,x,x,x,x,x,x]\n");
    for (p, q) in "bcdefghi".chars().zip("abcdefgh".chars()) {
        doc.push_str(&format!(
            "{p}: &{p} [*{q},*{q},*{q},*{q},*{q},*{q},*{q},*{q},*{q},*{q}]\n"
        ));
    }
    let started = std::time::Instant::now();
    assert!(parse_raw(&doc, "bomb.yaml").is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}
