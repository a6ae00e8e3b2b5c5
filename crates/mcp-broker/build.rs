//! Names the commit the binary was built from, for `mcp-broker --version` (a build outside a
//! git checkout says "unknown").

use std::path::Path;

fn main() {
    let git = Path::new("../../.git");
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MCPB_COMMIT={commit}");
    // Run again when the checkout moves: HEAD, and the branch file it points to.
    if git.join("HEAD").is_file() {
        println!("cargo:rerun-if-changed=../../.git/HEAD");
        if let Ok(head) = std::fs::read_to_string(git.join("HEAD"))
            && let Some(branch) = head.trim().strip_prefix("ref: ")
            && git.join(branch).is_file()
        {
            println!("cargo:rerun-if-changed=../../.git/{branch}");
        }
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
}
