//! Syntax and shape errors as a person sees them: each at its line and column, under the key
//! path written in the file (block, list or flow style, quoted keys, comments in between), with
//! the hint for its kind, every entry's error in one pass and nothing the masking caused.

use mcpb_config::load::{parse_raw, runtime_root_hint};

fn rendered(text: &str) -> String {
    match parse_raw(text, "b.yaml") {
        Ok(_) => "ok".to_string(),
        Err(e) => e.to_string(),
    }
}

const CASES: &[(&str, &str)] = &[
    (
        "a flow mapping inside a block key",
        "schema_version: 1\nupstreams:\n  gh: {command: x, comand: y}\n",
    ),
    (
        "a quoted key and a comment above the error",
        "schema_version: 1\nupstreams:\n  \"gh\":\n    # the token is read from the environment\n    command: x\n    comand: y\n",
    ),
    (
        "an error inside a list item",
        "schema_version: 1\nupstreams:\n  gh:\n    command: x\nprofiles:\n  p:\n    upstreams:\n      - gh\n      - {name: x}\n",
    ),
    (
        "a list where a mapping belongs",
        "schema_version: 1\nupstreams:\n  - command: x\n",
    ),
    (
        "a mapping where a list belongs",
        "schema_version: 1\nupstreams:\n  gh:\n    command: x\n    args: {a: b}\n",
    ),
    (
        "a negative number",
        "schema_version: 1\nbroker:\n  max_clients: -3\n",
    ),
    (
        "a key no mapping near it resembles",
        "schema_version: 1\nbroker:\n  zzzz_qqq: 1\n",
    ),
    (
        "a key spelt with dashes",
        "schema_version: 1\nbroker:\n  max-clients: 3\n",
    ),
    (
        "the version line missing",
        "upstreams:\n  gh:\n    command: x\n",
    ),
    (
        "the only entry of a mapping wrong, then another mapping wrong",
        "schema_version: 1\nbroker:\n  max_clients: many\nupstreams:\n  gh:\n    command: x\n    lifecycle: forever\n",
    ),
    (
        "two errors in one entry: the first is reported",
        "schema_version: 1\nupstreams:\n  gh:\n    comand: x\n    lifecycle: forever\n  ok:\n    command: y\n",
    ),
    (
        "an anchor whose entry was set aside",
        "schema_version: 1\nupstreams:\n  a: &base\n    command: x\n    comand: y\n  b: *base\n",
    ),
    (
        "a client's own JSON pasted whole",
        "{\"mcpServers\": {\"gh\": {\"command\": \"npx\"}}}\n",
    ),
    (
        "a duplicate key in the last entry",
        "schema_version: 1\nupstreams:\n  gh:\n    command: x\n    command: y\n",
    ),
    ("only comments", "# nothing here\n\n  # still nothing\n"),
];

#[test]
fn each_kind_of_mistake_is_reported_where_it_is_written() {
    let mut out = String::new();
    for (what, text) in CASES {
        out.push_str(&format!("## {what}\n{}\n\n", rendered(text)));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn the_runtime_root_is_found_in_a_file_that_is_otherwise_wrong() {
    let text = "schema_version: 9\nruntime:\n  root: /srv/broker\nupstreams: nope\n";
    assert_eq!(runtime_root_hint(text).as_deref(), Some("/srv/broker"));
    assert_eq!(runtime_root_hint("schema_version: 1\n"), None);
    assert_eq!(runtime_root_hint(": : :"), None);
}
