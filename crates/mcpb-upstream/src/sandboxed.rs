//! A stdio upstream started in the broker's sandbox: this binary's server mode
//! (`mcp-broker __sandbox-server SPEC PROGRAM ARGS...`) in front of its command. What the server
//! is granted is decided here, where its command line and environment are known: the policy's
//! own paths, its cwd, the paths its arguments name, and the tool directories and caches its
//! command needs.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use mcpb_config::UpstreamSettings;
use mcpb_config::sandbox::{NetworkMode, SandboxPolicy};
use mcpb_sandbox::ServerSpec;

use crate::UpstreamError;

/// Package managers' caches, granted read-write to a server started through one, so it
/// installs and runs as it would outside (paths under the home; only those that exist).
fn caches(program: &str) -> &'static [&'static str] {
    match program {
        "npx" | "npm" | "pnpm" | "pnpx" | "yarn" | "node" => {
            &[".npm", ".cache/node", ".cache/pnpm"]
        }
        "bunx" | "bun" => &[".bun", ".cache/bun"],
        "uvx" | "uv" => &[".cache/uv", ".local/share/uv"],
        "pipx" => &[".local/share/pipx", ".local/pipx", ".cache/pip"],
        "python" | "python3" | "pip" | "pip3" => &[".cache/pip"],
        _ => &[],
    }
}

/// The paths a server's arguments name that exist: `/data`, `--root=/data`, `./repo` (from
/// its cwd).
fn arg_paths(args: &[String], cwd: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in args {
        let value = a.split_once('=').map_or(a.as_str(), |(_, v)| v);
        let p = Path::new(value);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else if value.starts_with("./") || value.starts_with("../") || value == "." {
            match cwd {
                Some(c) => c.join(p),
                None => continue,
            }
        } else {
            continue;
        };
        if p.exists() {
            out.push(std::fs::canonicalize(&p).unwrap_or(p));
        }
    }
    out
}

/// Where a program name is found on `path`.
fn which(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path.split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// The grants a server gets: (read, write), each path once, a path listed under the policy's
/// `read` never writable.
pub fn grants(
    settings: &UpstreamSettings,
    policy: &SandboxPolicy,
    env: &BTreeMap<String, String>,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let home = env.get("HOME").map(PathBuf::from);
    let mut read = policy.read.clone();
    let mut write = policy.write.clone();
    write.extend(settings.cwd.iter().cloned());
    write.extend(arg_paths(&settings.args, settings.cwd.as_deref()));
    let command = settings.command.clone().unwrap_or_default();
    let program = Path::new(&command)
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    if let Some(home) = &home {
        write.extend(
            caches(&program)
                .iter()
                .map(|c| home.join(c))
                .filter(|p| p.exists()),
        );
        // Tools installed under the home (~/.local/bin, ~/.nvm/versions/node/v22/bin, ~/.cargo/bin)
        // would be hidden by the private home: their installation is granted read-only.
        let path = env.get("PATH").cloned().unwrap_or_default();
        let installed = which(&command, &path)
            .into_iter()
            .map(|p| p.parent().map(Path::to_path_buf).unwrap_or(p));
        for dir in path.split(':').map(PathBuf::from).chain(installed) {
            if !dir.starts_with(home) || !dir.is_dir() {
                continue;
            }
            let root = if dir.ends_with("bin") && dir.parent() != Some(home.as_path()) {
                dir.parent().map(Path::to_path_buf).unwrap_or(dir)
            } else {
                dir
            };
            // ~/.local holds more than tools (keyrings, other apps' data): only its tool parts.
            if root == home.join(".local") {
                read.extend(
                    ["bin", "lib", "share/uv", "share/pipx"]
                        .iter()
                        .map(|p| root.join(p))
                        .filter(|p| p.exists()),
                );
            } else {
                read.push(root);
            }
        }
    }
    write.retain(|w| !policy.read.iter().any(|r| r == w));
    write.sort();
    write.dedup();
    read.retain(|r| !write.contains(r));
    read.sort();
    read.dedup();
    (read, write)
}

/// The program and arguments that start `settings`' server under `policy`.
pub(crate) fn command(
    settings: &UpstreamSettings,
    policy: &SandboxPolicy,
    env: &BTreeMap<String, String>,
    runtime_root: &Path,
) -> Result<(PathBuf, Vec<OsString>), UpstreamError> {
    let refused = |reason: String| UpstreamError::Spawn {
        upstream: settings.name.clone(),
        command: settings.command.clone().unwrap_or_default(),
        reason,
    };
    let home = env
        .get("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .ok_or_else(|| refused("the sandbox replaces the home, but HOME is not set".into()))?;
    let private_home = runtime_root
        .join("state/upstreams")
        .join(&settings.name)
        .join("home");
    mcpb_config::layout::create_private_dir(&private_home)
        .map_err(|e| refused(format!("cannot make {}: {e}", private_home.display())))?;
    let (read, write) = grants(settings, policy, env);
    let spec = ServerSpec {
        name: settings.name.clone(),
        home: home.clone(),
        private_home,
        hide: if runtime_root.starts_with(&home) {
            Vec::new()
        } else {
            vec![runtime_root.to_path_buf()]
        },
        read,
        write,
        network: policy.network == NetworkMode::Host,
        cwd: settings.cwd.clone(),
        host_uid: rustix::process::getuid().as_raw(),
        host_gid: rustix::process::getgid().as_raw(),
        processes: policy.processes,
        cgroup: None,
    };
    let exe = std::env::current_exe()
        .map_err(|e| refused(format!("cannot find the broker's own binary: {e}")))?;
    let mut args: Vec<OsString> = vec![
        mcpb_sandbox::SERVER_ARG.into(),
        serde_json::to_string(&spec)
            .map_err(|e| refused(e.to_string()))?
            .into(),
        settings.command.clone().unwrap_or_default().into(),
    ];
    args.extend(settings.args.iter().map(OsString::from));
    Ok((exe, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_granted_its_cwd_its_argument_paths_and_its_tools() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let data = dir.path().join("data");
        let tools = home.join(".nvm/versions/node/v22/bin");
        for d in [&data, &tools, &home.join(".npm"), &home.join(".ssh")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(tools.join("npx"), "").unwrap();
        let text = format!(
            "schema_version: 1\nupstreams:\n  u: {{command: npx, args: [-y, server, \"--root={}\", /nowhere]}}\n",
            data.display()
        );
        let settings = mcpb_config::load_str(
            &text,
            "t",
            mcpb_config::ConfigSource::Embedded,
            &mcpb_config::ResolveContext::default(),
        )
        .unwrap()
        .upstreams["u"]
            .clone();
        let env = BTreeMap::from([
            ("HOME".to_string(), home.display().to_string()),
            ("PATH".to_string(), format!("{}:/usr/bin", tools.display())),
        ]);
        let (read, write) = grants(&settings, &SandboxPolicy::default(), &env);
        let canon = std::fs::canonicalize(&data).unwrap();
        let mut want = vec![canon.clone(), home.join(".npm")];
        want.sort();
        assert_eq!(write, want);
        assert_eq!(read, [home.join(".nvm/versions/node/v22")]);
        // Listed as read: never writable.
        let policy = SandboxPolicy {
            read: vec![canon.clone()],
            ..SandboxPolicy::default()
        };
        let (read, write) = grants(&settings, &policy, &env);
        assert!(read.contains(&canon) && !write.contains(&canon));
        assert!(!read.iter().chain(&write).any(|p| p.ends_with(".ssh")));
    }
}
