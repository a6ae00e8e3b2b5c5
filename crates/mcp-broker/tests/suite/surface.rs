//! The command surface the design names, as a user who read it types it: every make target
//! resolves and runs the broker's own command or a script (no logic of its own); the release
//! version check agrees here and names a disagreement; the pre-commit hook's secret scan stops
//! a new secret and `hooks-install` installs the hook once; `profile snippet` prints an entry
//! that a client can start.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::support::{Home, Shim, deps, fixture_config};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The targets the Makefile declares, with the per-client variants.
fn targets() -> Vec<String> {
    let makefile = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    let phony: String = makefile
        .split(".PHONY:")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace('\\', " ");
    let clients = makefile
        .lines()
        .find_map(|l| l.strip_prefix("CLIENTS := "))
        .unwrap();
    let mut all: Vec<String> = phony.split_whitespace().map(String::from).collect();
    for c in clients.split_whitespace() {
        all.push(format!("facade-smoke-{c}"));
        all.push(format!("profile-validation-{c}"));
    }
    all
}

#[test]
fn every_make_target_resolves_to_the_brokers_own_command_or_a_script() {
    let targets = targets();
    for design in [
        "setup",
        "test",
        "test-unit",
        "test-cov",
        "quality-gate",
        "release-gate",
        "release-smoke",
        "release-version-check",
        "mutation",
        "precommit",
        "hooks-install",
        "broker-start",
        "broker-status",
        "broker-stop",
        "broker-reap",
        "broker-smoke",
        "doctor",
        "config-init",
        "config-validate",
        "config-render",
        "config-backup",
        "config-rollback",
        "tools-count",
        "profile-validation",
        "facade-smoke",
        "discovery-parity",
        "codex-deferred-acceptance",
        "codex-app-policy",
        "profile-snippet",
        "systemd-install",
        "systemd-load",
        "systemd-unload",
        "systemd-uninstall",
        "facade-smoke-codex",
        "profile-validation-claude-code",
    ] {
        assert!(
            targets.iter().any(|t| t == design),
            "no make target {design}"
        );
    }
    for t in &targets {
        let out = Command::new("make")
            .args(["-n", "--no-print-directory", t])
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(out.status.success(), "make -n {t}: {}", text(&out.stderr));
        let recipe = text(&out.stdout);
        assert!(!recipe.trim().is_empty(), "make {t} does nothing");
        for line in recipe.lines().filter(|l| !l.trim().is_empty()) {
            let line = line.trim_start_matches('@').trim();
            assert!(
                line.starts_with("target/debug/mcp-broker ")
                    || line.starts_with("scripts/")
                    || line.starts_with("cargo build")
                    || line.starts_with("cargo test")
                    || line.starts_with("grep "),
                "make {t} runs something of its own: {line}"
            );
        }
    }
}

/// The files the version check reads, copied into a folder of their own (a git repository
/// with no tag).
fn release_copy(dir: &Path) {
    for f in ["Cargo.toml", "CHANGELOG.md", "Formula/mcp-broker.rb"] {
        let to = dir.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo().join(f), &to).unwrap();
    }
    for f in [
        "packaging/pypi/pyproject.toml",
        "packaging/npm/cli/package.json",
        "packaging/npm/linux-x64/package.json",
    ] {
        let to = dir.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo().join(f), &to).unwrap();
    }
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(git.success());
}

#[test]
fn the_release_version_check_agrees_here_and_names_a_disagreement() {
    let check = repo().join("scripts/release-version-check");
    let out = Command::new(&check).output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let home = Home::new();
    let dir = home.root().join("copy");
    release_copy(&dir);
    let out = Command::new(&check).arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The formula left behind on a bump.
    let formula = dir.join("Formula/mcp-broker.rb");
    let f = std::fs::read_to_string(&formula).unwrap();
    let version = f
        .lines()
        .find_map(|l| l.trim().strip_prefix("version \""))
        .unwrap()
        .trim_end_matches('"')
        .to_string();
    std::fs::write(&formula, f.replace(&format!("\"{version}\""), "\"9.9.9\"")).unwrap();
    let out = Command::new(&check).arg(&dir).output().unwrap();
    let said = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("mismatch: Formula/mcp-broker.rb says version 9.9.9")
            && said.contains("hint: "),
        "{said}"
    );
    // A release needs its tag and its CHANGELOG section.
    std::fs::copy(repo().join("Formula/mcp-broker.rb"), &formula).unwrap();
    let out = Command::new(&check)
        .args(["--release"])
        .arg(&dir)
        .output()
        .unwrap();
    let said = text(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("HEAD carries no version tag"), "{said}");
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@localhost")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@localhost")
        .status()
        .unwrap();
    assert!(ok.success(), "git {args:?}");
}

#[test]
fn the_precommit_scan_stops_a_new_secret_and_the_hook_installs_once() {
    let home = Home::new();
    let dir = home.root().join("repo");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    for s in ["precommit", "hooks-install"] {
        std::fs::copy(repo().join("scripts").join(s), dir.join("scripts").join(s)).unwrap();
    }
    git(&dir, &["init", "-q"]);
    let precommit = || {
        Command::new(dir.join("scripts/precommit"))
            .arg("--secrets-only")
            .current_dir(&dir)
            .env("MCP_BROKER_TEST_DEPS", deps())
            .output()
            .unwrap()
    };
    std::fs::write(dir.join("clean.txt"), "nothing to see\n").unwrap();
    git(&dir, &["add", "clean.txt"]);
    let out = precommit();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // A private key, as a careless commit carries one.
    std::fs::write(
        dir.join("deploy.pem"),
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n-----END RSA PRIVATE KEY-----\n",
    )
    .unwrap();
    git(&dir, &["add", "deploy.pem"]);
    let out = precommit();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("deploy.pem") && said.contains("hint: take it out"),
        "{said}"
    );

    let install = || {
        Command::new(dir.join("scripts/hooks-install"))
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let out = install();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let hook = std::fs::read_to_string(dir.join(".git/hooks/pre-commit")).unwrap();
    assert!(hook.contains("scripts/precommit"), "{hook}");
    let out = install();
    assert!(text(&out.stdout).contains("is installed"));
    std::fs::write(dir.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    let out = install();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("is not this project's"));
}

#[test]
fn a_snippet_entry_starts_a_session_a_client_can_use() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let out = home
        .cmd(&["profile", "snippet", "default", "--typed"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = &doc["mcpServers"]["mcp-broker"];
    assert_eq!(entry["type"], "stdio");
    assert_eq!(entry["args"], json!(["stdio", "--profile", "default"]));
    // Started as a client would: its command, its args, its env and nothing of this shell.
    let mut cmd = Command::new(entry["command"].as_str().unwrap());
    cmd.env_clear().env("HOME", home.root()).args(
        entry["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    );
    for (k, v) in entry["env"].as_object().unwrap() {
        cmd.env(k, v.as_str().unwrap());
    }
    let mut shim = Shim::spawn(cmd);
    shim.initialize("2025-11-25");
    let names = shim.tool_names();
    assert!(names.iter().any(|n| n.starts_with("fx.")), "{names:?}");
    let out = home.cmd(&["profile", "snippet", "nope"]).output().unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no profile named nope"));
}
