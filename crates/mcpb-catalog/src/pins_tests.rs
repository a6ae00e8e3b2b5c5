//! The verdicts a person reads in `pins list` and the console, case by case: which kind of
//! quarantine each change gets, what the store says about itself, and how a repair starts over.

use super::*;
use serde_json::json;

fn tool(name: &str, desc: &str) -> Tool {
    Tool::from_value(&json!({"name": name, "description": desc,
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}))
    .unwrap()
}

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pins.json");
    (dir, path)
}

#[test]
fn the_configured_mode_is_the_store_mode() {
    let (_dir, path) = store();
    assert_eq!(
        PinMode::from(mcpb_config::PinModeSetting::RequireApproval),
        PinMode::RequireApproval
    );
    assert_eq!(
        PinMode::from(mcpb_config::PinModeSetting::Tofu),
        PinMode::Tofu
    );
    assert_eq!(
        Pins::open(path.clone(), PinMode::RequireApproval).mode(),
        PinMode::RequireApproval
    );
    assert_eq!(Pins::open(path, PinMode::Tofu).mode(), PinMode::Tofu);
}

#[test]
fn a_digest_equals_only_its_own_text() {
    let a = crate::canonical::hash_text("a");
    let b = crate::canonical::hash_text("b");
    assert!(PinHash::new(&a) == a);
    assert!(PinHash::new(&a) != b);
    assert!(PinHash::new("x") != "y".to_string());
}

#[test]
fn every_quarantine_says_why_in_words() {
    let said: Vec<String> = [
        Quarantine::Changed,
        Quarantine::Renamed { from: "old".into() },
        Quarantine::New,
        Quarantine::AwaitingApproval,
        Quarantine::Flagged,
        Quarantine::StoreUnreadable {
            error: "bad json".into(),
        },
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        said,
        [
            "definition changed since it was approved",
            "renamed from 'old'",
            "new since the upstream was approved",
            "awaiting approval",
            "the description scan flagged it; review and approve it by hand",
            "pin store unreadable: bad json",
        ]
    );
}

#[test]
fn a_store_that_is_not_a_file_reports_its_own_error_not_a_lost_store() {
    let (_dir, path) = store();
    std::fs::create_dir(&path).unwrap();
    std::fs::write(marker(&path), "used").unwrap();
    let pins = Pins::open(path, PinMode::Tofu);
    let error = pins.error().unwrap();
    assert!(!error.contains("missing"), "{error}");
}

#[test]
fn the_pins_of_an_upstream_are_what_was_approved() {
    let (_dir, path) = store();
    let mut pins = Pins::open(path, PinMode::Tofu);
    assert!(pins.pins("fs").is_none());
    pins.judge(
        "fs",
        &[tool("read", "Reads"), tool("list", "Lists")],
        &[],
        1,
    );
    let names: Vec<&String> = pins.pins("fs").unwrap().keys().collect();
    assert_eq!(names, ["list", "read"]);
    assert!(pins.pins("other").is_none());
}

#[test]
fn a_scanned_list_is_judged_by_its_findings() {
    let (_dir, path) = store();
    let mut pins = Pins::open(path, PinMode::Tofu);
    let finding = crate::Finding {
        tool: "b".into(),
        kind: "instruction",
        detail: "contains \"ignore previous\"".into(),
        severity: crate::Severity::Quarantine,
    };
    let judged = pins.judge_scanned(
        "fs",
        &[tool("a", "A"), tool("b", "B")],
        vec![vec![], vec![finding]],
        1,
    );
    assert_eq!(judged.verdicts, vec![None, Some(Quarantine::Flagged)]);
    assert_eq!(judged.findings[1].len(), 1);
    assert!(judged.changed);
}

/// A scanner that learned a new rule flags a definition approved on first use before it: it
/// goes back to a person. One a person approved stays approved; a changed one is a change.
#[test]
fn a_pinned_tool_flagged_later_needs_a_person_unless_one_approved_it() {
    let (_dir, path) = store();
    let mut pins = Pins::open(path, PinMode::Tofu);
    let list = vec![tool("a", "A"), tool("b", "B")];
    pins.judge("fs", &list, &[], 1);
    assert_eq!(
        pins.judge("fs", &list, &[true, false], 2).0,
        vec![Some(Quarantine::Flagged), None]
    );
    pins.approve("fs", &list[0], None, 3);
    assert_eq!(
        pins.judge("fs", &list, &[true, false], 4).0,
        vec![None, None]
    );
    let changed = vec![tool("a", "A, changed"), tool("b", "B, changed")];
    assert_eq!(
        pins.judge("fs", &changed, &[true, true], 5).0,
        vec![Some(Quarantine::Changed), Some(Quarantine::Changed)]
    );
}

/// A rename is a pinned body under a new name while the old name is gone: a new tool beside
/// a removed one is new, and a copy of a tool still present is no rename of it.
#[test]
fn only_a_gone_tool_with_the_same_body_is_a_rename() {
    let (_dir, path) = store();
    let mut pins = Pins::open(path, PinMode::Tofu);
    pins.judge(
        "fs",
        &[tool("read", "Reads"), tool("list", "Lists")],
        &[],
        1,
    );
    let replaced = vec![tool("list", "Lists"), tool("exfil", "Sends files")];
    assert_eq!(
        pins.judge("fs", &replaced, &[], 2).0,
        vec![None, Some(Quarantine::New)]
    );
    let copied = vec![
        tool("read", "Reads"),
        tool("list", "Lists"),
        tool("read2", "Reads"),
    ];
    assert_eq!(
        pins.judge("fs", &copied, &[], 2).0[2],
        Some(Quarantine::New)
    );
}

#[test]
fn a_reset_starts_an_unreadable_store_over() {
    let (_dir, path) = store();
    std::fs::write(&path, "{not json").unwrap();
    let mut pins = Pins::open(path.clone(), PinMode::Tofu);
    assert!(pins.error().is_some());
    pins.reset();
    assert!(pins.error().is_none());
    assert!(pins.pins("fs").is_none());
    pins.save().unwrap();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved["upstreams"], json!({}));
}
