//! The user service as a service manager sees it: the unit `service install` writes passes
//! systemd's own check (`systemd-analyze verify`, the real one, in user mode), and `service
//! load` / `unload` hand the installed unit to the manager and take it back (a fake
//! `systemctl` on PATH: this machine has no user manager, and a test never touches a real one).

use std::path::Path;
use std::process::Output;

use super::adoption::fake_systemctl;
use super::support::{Home, fixture_config};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(home: &Home, user: &Path, path: &str, args: &[&str]) -> Output {
    home.cmd(args)
        .env("HOME", user)
        .env("PATH", path)
        .output()
        .unwrap()
}

/// systemd's own check of a unit file, in user mode; its output when it refuses the file.
fn verify(unit: &Path, runtime: &Path) -> Result<(), String> {
    std::fs::create_dir_all(runtime).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", runtime)
        .output()
        .expect("systemd-analyze (Debian's systemd package) runs here");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", text(&out.stdout), text(&out.stderr)))
    }
}

#[test]
fn the_unit_install_writes_passes_systemds_own_check_and_a_broken_one_does_not() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = home.root().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let path = fake_systemctl(&home.root().join("sd"), "ok");
    let out = run(
        &home,
        &user,
        &path,
        &["service", "install", "--apply", "--no-start"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let unit = user.join(".config/systemd/user/mcp-broker.service");
    let runtime = home.root().join("xdg");
    verify(&unit, &runtime).unwrap();
    // The check is real: the same unit with a relative command and an unknown type fails it.
    let bad_dir = home.root().join("bad");
    std::fs::create_dir_all(&bad_dir).unwrap();
    let bad = bad_dir.join("mcp-broker.service");
    let written = std::fs::read_to_string(&unit).unwrap();
    std::fs::write(
        &bad,
        written
            .replace("ExecStart=/", "ExecStart=")
            .replace("Type=notify", "Type=bogus"),
    )
    .unwrap();
    let said = verify(&bad, &runtime).unwrap_err();
    assert!(said.contains("bad unit file setting"), "{said}");
}

#[test]
fn load_and_unload_hand_the_installed_unit_to_the_manager_and_take_it_back() {
    let home = Home::with_config(&fixture_config(&[("fx", "")], ""));
    let user = home.root().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let sd = home.root().join("sd");
    let path = fake_systemctl(&sd, "ok");
    // Nothing installed: a clear refusal that names the command that installs it.
    let out = run(&home, &user, &path, &["service", "load"]);
    let said = text(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("is not installed") && said.contains("hint: `mcp-broker service install"),
        "{said}"
    );
    let out = run(
        &home,
        &user,
        &path,
        &["service", "install", "--apply", "--no-start"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = std::fs::remove_file(sd.join("bin/calls"));

    let out = run(&home, &user, &path, &["service", "load"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("runs the daemon"));
    let out = run(&home, &user, &path, &["service", "unload"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("the unit stays installed"));
    let calls = std::fs::read_to_string(sd.join("bin/calls")).unwrap();
    assert!(
        calls.contains("--user daemon-reload\n--user start mcp-broker\n")
            && calls.ends_with("--user stop mcp-broker\n"),
        "{calls}"
    );
    assert!(
        user.join(".config/systemd/user/mcp-broker.service")
            .is_file()
    );

    // A manager that does not answer: said, with what to do meanwhile.
    let path = fake_systemctl(&home.root().join("nobus"), "no-bus");
    let out = run(&home, &user, &path, &["service", "load"]);
    let said = text(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("no service manager answers") && said.contains("mcp-broker start"),
        "{said}"
    );
}
