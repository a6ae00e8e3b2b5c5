//! The small public pieces other crates decide with: issue rendering, an error's issues, the
//! languages and limits of code runs, the clock.

use mcpb_config::{
    ConfigError, ConfigIssue, ConfigSource, ExecLimits, Language, Limits, ProfileExec,
    ResolveContext, load_str, unix_now,
};

fn ctx() -> ResolveContext {
    super::context(None)
}

#[test]
fn an_issue_without_a_line_names_only_its_file() {
    let mut issue = ConfigIssue {
        line: 0,
        column: 0,
        path: "upstreams.gh".into(),
        message: "bad".into(),
        hint: Some("fix it".into()),
    };
    assert_eq!(
        issue.render("broker.yaml"),
        "broker.yaml: upstreams.gh: bad\n  hint: fix it"
    );
    issue.line = 1;
    issue.column = 3;
    issue.path.clear();
    issue.hint = None;
    assert_eq!(issue.render("broker.yaml"), "broker.yaml:1:3: bad");
}

#[test]
fn an_invalid_config_hands_over_each_issue() {
    let text = "schema_version: 1\nupstreams:\n  gh:\n    command: npx\n    comand: oops\n";
    let err = load_str(text, "b.yaml", ConfigSource::File("b.yaml".into()), &ctx()).unwrap_err();
    let issues = err.issues();
    assert_eq!(issues.len(), 1, "{err}");
    assert_eq!(issues[0].line, 5);
    assert!(issues[0].path.contains("comand"), "{:?}", issues[0]);
    let other = ConfigError::Exists {
        path: "b.yaml".into(),
    };
    assert!(other.issues().is_empty());
}

#[test]
fn languages_have_the_names_the_file_uses() {
    assert_eq!(Language::Python.name(), "python");
    assert_eq!(Language::Javascript.name(), "javascript");
}

#[test]
fn a_profile_runs_only_the_languages_it_lists() {
    let python_only = ProfileExec {
        languages: vec![Language::Python],
        limits: Limits::DEFAULT,
        persist: false,
    };
    assert!(python_only.allows(Language::Python));
    assert!(!python_only.allows(Language::Javascript));
}

#[test]
fn asking_for_exactly_the_limit_does_not_exceed_it() {
    let limits = Limits::DEFAULT;
    let at = ExecLimits {
        max_calls: Some(limits.max_calls),
        ..ExecLimits::default()
    };
    assert!(limits.exceeded_by(&at).is_empty());
    let over = ExecLimits {
        max_calls: Some(limits.max_calls + 1),
        ..ExecLimits::default()
    };
    assert_eq!(
        limits.exceeded_by(&over),
        [("max_calls", limits.max_calls + 1, limits.max_calls)]
    );
}

#[test]
fn the_clock_reads_seconds_since_the_epoch() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(unix_now().abs_diff(now) <= 5);
}

#[test]
fn a_name_has_at_most_48_characters() {
    use mcpb_config::resolve::check_name;
    assert!(check_name(&"a".repeat(48)).is_ok());
    assert!(check_name(&"a".repeat(49)).is_err());
    assert!(check_name(&"a".repeat(60)).is_err());
    assert!(check_name("").is_err());
}

/// `ResolveContext::from_env` and `locate` read the process environment, which a test cannot
/// change for itself: the test binary runs this one test again in a child with the
/// environment each case needs, and the child prints what it read.
#[test]
fn the_environment_gives_the_context_and_the_file() {
    if std::env::var_os("MCPB_CONTEXT_CHILD").is_some() {
        let ctx = ResolveContext::from_env();
        println!(
            "CONTEXT home={:?} broker_home={:?} sandbox={:?} source={}",
            ctx.home,
            ctx.broker_home,
            ctx.upstream_sandbox,
            mcpb_config::locate(None, &ctx)
        );
        return;
    }
    let run = |env: &[(&str, &str)]| -> String {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "suite::parts::the_environment_gives_the_context_and_the_file",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_clear()
        .env("MCPB_CONTEXT_CHILD", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .find_map(|l| l.find("CONTEXT ").map(|at| l[at..].to_string()))
            .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_str().unwrap();
    assert_eq!(
        run(&[
            ("HOME", home),
            ("MCP_BROKER_HOME", "/srv/b"),
            ("MCP_BROKER_UPSTREAM_SANDBOX", "standard"),
            ("MCP_BROKER_CONFIG", "/etc/b.yaml"),
        ]),
        format!(
            "CONTEXT home=Some({home:?}) broker_home=Some(\"/srv/b\") sandbox=Some(\"standard\") source=/etc/b.yaml"
        )
    );
    // Empty values are unset ones; with no file in the home, the embedded default is used.
    assert_eq!(
        run(&[
            ("HOME", home),
            ("MCP_BROKER_HOME", ""),
            ("MCP_BROKER_UPSTREAM_SANDBOX", ""),
            ("MCP_BROKER_CONFIG", ""),
        ]),
        format!(
            "CONTEXT home=Some({home:?}) broker_home=None sandbox=None source={}",
            mcpb_config::ConfigSource::Embedded
        )
    );
    // The home's own file when there is one.
    let root = dir.path().join("mcp/mcp-broker");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("broker.yaml"), "schema_version: 1\n").unwrap();
    assert_eq!(
        run(&[("HOME", home), ("MCP_BROKER_HOME", "")]),
        format!(
            "CONTEXT home=Some({home:?}) broker_home=None sandbox=None source={}",
            root.join("broker.yaml").display()
        )
    );
    assert!(run(&[("HOME", "")]).starts_with("CONTEXT home=None "));
}
