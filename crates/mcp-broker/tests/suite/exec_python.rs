//! Code runs with a Python installed outside /usr, as pyenv or an /opt install leaves it: the
//! jail binds that one installation read-only at its own path and nothing beside it. An
//! interpreter whose installation is not one directory (a venv's copy) is refused, saying why.

use std::path::{Path, PathBuf};

use super::exec_escape::Jail;

fn config(python: &Path) -> String {
    format!(
        r#"
schema_version: 1
broker:
  exec: {{python: "{}"}}
upstreams:
  example:
    command: "{{broker.exe}}"
    args: [example-server]
    trust_annotations: true
profiles:
  code:
    compact_tools_enabled: true
    exec: {{languages: [python]}}
"#,
        python.display()
    )
}

/// The tree at `from` again at `to`, file by file as hard links (same filesystem) or copies.
fn mirror(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            mirror(&src, &dst);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The machine's Python (Debian's, under /usr) installed again under `prefix`: its binary and
/// standard library, which is all CPython needs to find its prefix from where it runs.
fn install_outside_usr(prefix: &Path) -> PathBuf {
    let exe = std::fs::canonicalize("/usr/bin/python3").unwrap();
    let name = exe.file_name().unwrap().to_str().unwrap().to_string();
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    let to = prefix.join("bin").join(&name);
    if std::fs::hard_link(&exe, &to).is_err() {
        std::fs::copy(&exe, &to).unwrap();
    }
    mirror(
        &Path::new("/usr/lib").join(&name),
        &prefix.join("lib").join(&name),
    );
    to
}

#[test]
fn an_interpreter_outside_usr_runs_with_its_installation_bound_and_nothing_beside_it() {
    // Not under /tmp or /work, which the jail has its own of (the last test).
    let place = tempfile::tempdir_in("/var/tmp").unwrap();
    let prefix = place.path().join("opt/python");
    let exe = install_outside_usr(&prefix);
    std::fs::write(place.path().join("opt/beside.txt"), "not for the jail").unwrap();
    let jail = Jail::with_config(&config(&exe));
    let a = jail.run(
        "import os, sys\n\
         print('prefix', sys.base_prefix)\n\
         print('exe', sys.executable)\n\
         print('stdlib', os.__file__.startswith(sys.base_prefix))\n\
         print('beside', os.path.exists(os.path.join(os.path.dirname(sys.base_prefix), 'beside.txt')))\n\
         try:\n\
         \x20   open(os.path.join(sys.base_prefix, 'planted'), 'w')\n\
         \x20   print('write ok')\n\
         except OSError:\n\
         \x20   print('write refused')\n",
        &[],
    );
    assert_eq!(a["status"], "ok", "{a}");
    let out = a["stdout"].as_str().unwrap();
    for line in [
        format!("prefix {}", prefix.display()),
        format!("exe {}", exe.display()),
        "stdlib True".into(),
        "beside False".into(),
        "write refused".into(),
    ] {
        assert!(out.contains(&line), "{line:?} not in {out}");
    }
    assert!(!prefix.join("planted").exists());
}

#[test]
fn an_interpreter_whose_installation_is_elsewhere_is_refused_with_the_reason() {
    let place = tempfile::tempdir().unwrap();
    // A copy of the binary alone: its standard library (found from /usr) is not beside it.
    let exe = std::fs::canonicalize("/usr/bin/python3").unwrap();
    let copy = place.path().join("bin/python3");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(&exe, &copy).unwrap();
    let jail = Jail::with_config(&config(&copy));
    let a = jail.run("print('ran')\n", &[]);
    assert_eq!(a["status"], "refused", "{a}");
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&copy.display().to_string()) && reason.contains("not one directory"),
        "{reason}"
    );
    assert!(!a["stdout"].as_str().unwrap_or_default().contains("ran"));
}

#[test]
fn an_installation_under_a_place_the_jail_has_its_own_of_is_refused_with_the_reason() {
    let place = tempfile::tempdir_in("/tmp").unwrap();
    let prefix = place.path().join("python");
    let exe = install_outside_usr(&prefix);
    let jail = Jail::with_config(&config(&exe));
    let a = jail.run("print('ran')\n", &[]);
    assert_eq!(a["status"], "refused", "{a}");
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("({}) is under /tmp", prefix.display()))
            && reason.contains("hint: install it elsewhere"),
        "{reason}"
    );
}
