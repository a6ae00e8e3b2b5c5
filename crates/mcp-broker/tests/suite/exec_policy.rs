//! A code run's policy as the MCP Exec Broker states it: limits above the profile's refused
//! before the run, `result.json` as the answer, and large answers held to a budget.

use super::exec_escape::Jail;

#[test]
fn limits_asked_above_the_profiles_are_refused_before_the_run_naming_them() {
    let jail = Jail::new();
    let file = jail.file("print('ran')");
    let out = jail
        .home
        .cmd(&[
            "exec",
            "run",
            file.to_str().unwrap(),
            "--json",
            "--profile",
            "code",
            "--allow",
            "example.*",
            "--limits",
            r#"{"wall_clock_ms": 900000, "max_calls": 3}"#,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("wall_clock_ms 900000 (this profile allows 45000)"),
        "{err}"
    );
    assert!(
        !err.contains("max_calls"),
        "a lower limit is no problem: {err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ran"));
    jail.still_works();
}

/// The MCP Exec Broker's workflow: a program that writes `result.json` and never calls
/// `result()` answers with the file; `result()` wins when both are there.
#[test]
fn result_json_in_the_workspace_is_the_answer_when_result_was_not_called() {
    let jail = Jail::new();
    let a = jail.run(
        "import json\nwith open('/work/result.json', 'w') as f:\n    json.dump({'rows': 3, 'ok': True}, f)\nprint('wrote')",
        &[],
    );
    assert_eq!(a["status"], "ok", "{a}");
    assert_eq!(
        a["result"],
        serde_json::json!({"rows": 3, "ok": true}),
        "{a}"
    );
    let b = jail.run(
        "import json\nfrom mcp_sdk import result\nwith open('/work/result.json', 'w') as f:\n    json.dump({'from': 'file'}, f)\nresult({'from': 'sdk'})",
        &[],
    );
    assert_eq!(b["result"], serde_json::json!({"from": "sdk"}), "{b}");
    let c = jail.run(
        "with open('/work/result.json', 'w') as f:\n    f.write('not json')",
        &[],
    );
    assert_eq!(c["result"], "not json", "{c}");
}

/// A run's large answer is held to a budget even when the profile sets none: the model gets a
/// preview and an artifact, and the run's status and usage stay beside it.
#[test]
fn a_large_run_answer_is_previewed_with_its_status_kept() {
    let jail = Jail::new();
    // `rw` sets no result_budget_chars: the default run budget applies.
    let a = jail.run_in("rw", "print('z' * 60000)", &[]);
    assert_eq!(a["status"], "ok", "{a}");
    assert!(a["usage"]["wall_ms"].is_u64(), "{a}");
    assert!(
        a.get("stdout").is_none(),
        "the 60,000 characters stayed out: {a}"
    );
    let small = jail.run_in("rw", "print('short')", &[]);
    assert_eq!(small["stdout"], "short\n", "{small}");
}
