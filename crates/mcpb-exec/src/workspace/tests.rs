//! Workspaces on a real disk: ids, confinement, profiles, persisted caps, quotas.

use std::path::Component;

use super::paths::MAX_PATH_DEPTH;
use super::*;

#[test]
fn only_canonical_v4_ids_are_accepted() {
    let id = Uuid::new_v4().hyphenated().to_string();
    assert!(parse_id(&id).is_ok());
    for bad in [
        "../etc",
        "/etc/passwd",
        "",
        "a\0b",
        &id.to_uppercase(),
        &id.replace('-', ""),
        &format!("{id}/.."),
        &format!("../{id}"),
        "00000000-0000-1000-8000-000000000000",
    ] {
        assert!(
            matches!(parse_id(bad), Err(ExecError::UnknownExec(_))),
            "{bad}"
        );
    }
}

#[test]
fn upload_paths_stay_in_the_workspace() {
    assert_eq!(confined("a/./b.txt").unwrap(), PathBuf::from("a/b.txt"));
    for bad in [
        "../x",
        "/etc/passwd",
        "a/../../x",
        "",
        ".",
        "a\0b",
        ".tmp/x",
    ] {
        assert!(matches!(confined(bad), Err(ExecError::BadPath(_))), "{bad}");
    }
}

#[test]
fn a_workspace_belongs_to_its_profile_and_uploads_never_follow_links() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspaces::new(dir.path().to_path_buf(), 4);
    let id = ws.open("a", false).unwrap().hyphenated().to_string();
    assert_eq!(ws.upload("a", &id, "d/x.txt", b"hi", 1 << 20).unwrap(), 2);
    assert!(matches!(
        ws.upload("b", &id, "x.txt", b"hi", 1 << 20),
        Err(ExecError::UnknownExec(_))
    ));
    let work = dir.path().join("a").join(&id).join("work");
    std::os::unix::fs::symlink("/etc", work.join("link")).unwrap();
    assert!(matches!(
        ws.upload("a", &id, "link/passwd", b"x", 1 << 20),
        Err(ExecError::BadPath(_))
    ));
    let lease = ws.lease("a", &id).unwrap();
    assert!(matches!(ws.lease("a", &id), Err(ExecError::Busy(_))));
    drop(lease);
    assert!(ws.close("a", &id, false).unwrap());
    assert!(matches!(
        ws.close("a", &id, false),
        Err(ExecError::UnknownExec(_))
    ));
}

fn persisted_rules(max: u32, ttl: Duration, disk_bytes: u64) -> Persisted {
    Persisted {
        max,
        ttl,
        disk_bytes,
    }
}

#[test]
fn persisted_workspaces_have_their_own_cap_and_never_stop_other_work() {
    let root = tempfile::tempdir().unwrap();
    let ws = Workspaces::new(root.path().to_path_buf(), 2).with_persisted(persisted_rules(
        3,
        Duration::from_secs(3600),
        1 << 20,
    ));
    let kept: Vec<String> = (0..3)
        .map(|_| ws.open("p", true).unwrap().hyphenated().to_string())
        .collect();
    for id in &kept {
        assert!(!ws.close("p", id, false).unwrap(), "a persisted one stays");
    }
    assert!(matches!(
        ws.open("p", true),
        Err(ExecError::TooManyPersisted(3))
    ));
    let open = ws.open("p", false).unwrap();
    let shot = ws.open_one_shot("p").unwrap();
    ws.remove("p", shot);
    assert!(ws.close("p", &kept[0], true).unwrap(), "discard removes it");
    assert!(ws.open("p", true).is_ok());
    ws.remove("p", open);
    let listed = ws.list(Some("p"));
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|w| w.persisted && !w.running));
    assert_eq!(ws.prune(Some("p"), false), 0, "none expired");
    assert_eq!(ws.prune(Some("p"), true), 3);
}

#[test]
fn persisted_workspaces_expire_after_their_time_to_live() {
    let root = tempfile::tempdir().unwrap();
    let ws = Workspaces::new(root.path().to_path_buf(), 2).with_persisted(persisted_rules(
        4,
        Duration::from_secs(60),
        1 << 20,
    ));
    let old = ws.open("p", true).unwrap();
    let fresh = ws.open("p", true).unwrap();
    let marker = ws.dir("p", old).join(PERSIST);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(marker)
        .unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(120))
        .unwrap();
    assert_eq!(ws.expire(None), 1);
    assert!(!ws.dir("p", old).exists());
    assert!(ws.dir("p", fresh).exists());
}

#[test]
fn uploads_past_the_quota_are_refused_before_anything_is_written() {
    let root = tempfile::tempdir().unwrap();
    let ws = Workspaces::new(root.path().to_path_buf(), 4).with_persisted(persisted_rules(
        4,
        Duration::from_secs(3600),
        300,
    ));
    let id = ws.open("p", false).unwrap().hyphenated().to_string();
    ws.upload("p", &id, "a", &[1; 100], 250).unwrap();
    ws.upload("p", &id, "a", &[1; 150], 250).unwrap();
    let e = ws.upload("p", &id, "b", &[1; 101], 250).unwrap_err();
    assert!(matches!(e, ExecError::Quota(_)), "{e}");
    assert!(
        !ws.dir("p", Uuid::parse_str(&id).unwrap())
            .join("work/b")
            .exists()
    );
    // Persisted workspaces of a profile share one budget.
    let k1 = ws.open("p", true).unwrap().hyphenated().to_string();
    let k2 = ws.open("p", true).unwrap().hyphenated().to_string();
    ws.upload("p", &k1, "a", &[1; 200], 250).unwrap();
    ws.upload("p", &k2, "a", &[1; 100], 250).unwrap();
    let e = ws.upload("p", &k2, "b", &[1; 1], 250).unwrap_err();
    assert!(e.to_string().contains("persisted"), "{e}");
}

mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// Whatever path an upload names, what is accepted stays inside the workspace:
        /// relative, plain components only, not too deep, never the run's scratch space.
        #[test]
        fn an_accepted_upload_path_stays_in_the_workspace(
            parts in prop::collection::vec(
                prop_oneof![
                    Just("..".to_string()),
                    Just(".".to_string()),
                    Just("".to_string()),
                    Just(".tmp".to_string()),
                    Just("/".to_string()),
                    "[a-z.]{1,4}",
                    any::<String>(),
                ],
                0..20,
            ),
        ) {
            let path = parts.join("/");
            if let Ok(p) = confined(&path) {
                prop_assert!(p.is_relative());
                prop_assert!(p.components().all(|c| matches!(c, Component::Normal(_))));
                prop_assert!(p.components().count() <= MAX_PATH_DEPTH);
                prop_assert!(p.components().next().is_some_and(|c| c.as_os_str() != ".tmp"));
                prop_assert!(!path.contains('\0'));
            }
        }
    }
}
