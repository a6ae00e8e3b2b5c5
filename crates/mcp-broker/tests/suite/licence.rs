//! The licence the manifests declare is the one the repository ships, as files.

use std::path::Path;

#[test]
fn the_declared_licence_is_shipped_as_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("license = \"MIT OR Apache-2.0\""),
        "the workspace declares another licence"
    );
    let apache = std::fs::read_to_string(root.join("LICENSE-APACHE")).unwrap();
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    let mit = std::fs::read_to_string(root.join("LICENSE-MIT")).unwrap();
    assert!(mit.contains("Permission is hereby granted, free of charge"));
    // Every crate takes the workspace's licence.
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let toml = entry.unwrap().path().join("Cargo.toml");
        let text = std::fs::read_to_string(&toml).unwrap();
        assert!(
            text.contains("license.workspace = true"),
            "{}",
            toml.display()
        );
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(readme.contains("LICENSE-APACHE") && readme.contains("LICENSE-MIT"));
}
