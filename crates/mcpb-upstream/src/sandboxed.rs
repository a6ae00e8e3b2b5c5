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

/// Where a server may write a path its command line or environment names: the path when it
/// exists; for one it will make (a log, a memory file), its folder, unless that folder is the
/// root or one of its top-level folders (`/etc`, `/tmp`): naming `/etc/new` grants nothing.
fn writable(p: PathBuf) -> Option<PathBuf> {
    let found = if p.exists() {
        std::fs::canonicalize(&p).unwrap_or(p)
    } else {
        let parent = p.parent()?;
        if parent.components().count() <= 2 || !parent.is_dir() {
            return None;
        }
        std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf())
    };
    // The system's own files are read-only to a server whatever its command line names (a
    // script under /usr/lib, an interpreter in its environment).
    const SYSTEM: &[&str] = &[
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/proc",
        "/sys", "/dev", "/run", "/var/lib", "/snap", "/opt",
    ];
    (!SYSTEM.iter().any(|s| found.starts_with(s)) && found != Path::new("/")).then_some(found)
}

/// The paths a server's arguments and environment name: `/data`, `--root=/data`, `./repo`
/// (from its cwd), `MEMORY_FILE_PATH=/data/memory.jsonl`.
fn named_paths<'a>(values: impl Iterator<Item = &'a str>, cwd: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in values {
        let value = a.split_once('=').map_or(a, |(_, v)| v);
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
        out.extend(writable(p));
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
    // The environment's values as the server gets them (its secrets resolved, never kept).
    let values = settings.args.iter().map(String::as_str).chain(
        settings
            .env
            .keys()
            .filter_map(|k| env.get(k).map(String::as_str)),
    );
    write.extend(named_paths(values, settings.cwd.as_deref()));
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

/// What the server may not see of the broker's runtime dir: every entry of it (secrets,
/// sockets, state, logs, backups, the config) except one a grant lies in (a folder of data a
/// user keeps there). A grant that holds the runtime dir itself would show all of it: one the
/// policy names is refused, one taken from the command line is dropped. Nothing to hide when
/// the runtime dir is under the home, which the server's private home replaces.
type Grants = (Vec<PathBuf>, Vec<PathBuf>, Vec<PathBuf>);

fn hidden(
    root: &Path,
    home: &Path,
    mut read: Vec<PathBuf>,
    mut write: Vec<PathBuf>,
    policy: &SandboxPolicy,
) -> Result<Grants, String> {
    let holds_root = |g: &PathBuf| root.starts_with(g);
    if let Some(g) = policy
        .read
        .iter()
        .chain(&policy.write)
        .find(|g| holds_root(g))
    {
        return Err(format!(
            "its sandbox grants {}, which holds the broker's runtime dir {}",
            g.display(),
            root.display()
        ));
    }
    read.retain(|g| !holds_root(g));
    write.retain(|g| !holds_root(g));
    // Under the home, only what is granted of it is bound into the private home.
    if root.starts_with(home) {
        return Ok((read, write, Vec::new()));
    }
    let granted: Vec<&PathBuf> = read.iter().chain(&write).collect();
    let hide = std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| !granted.iter().any(|g| g.starts_with(p)))
                .collect()
        })
        .unwrap_or_default();
    Ok((read, write, hide))
}

/// A start: the program, its arguments and its whole environment.
pub type StartLine = (PathBuf, Vec<OsString>, BTreeMap<String, String>);

/// A sandboxed server as the daemon would start it, for a check outside the daemon (its
/// environment's secrets resolved, never shown).
pub fn start_line(
    settings: &UpstreamSettings,
    policy: &SandboxPolicy,
    passthrough: &[String],
    runtime_root: &Path,
) -> Result<StartLine, UpstreamError> {
    let lookup = |k: &str| std::env::var(k).ok();
    let env = crate::env::child_env(
        settings,
        passthrough,
        &lookup,
        &runtime_root.join("secrets"),
    )?;
    let (exe, args) = command(settings, policy, &env, runtime_root)?;
    Ok((exe, args, env))
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
    let (read, write, hide) = hidden(runtime_root, &home, read, write, policy).map_err(refused)?;
    let spec = ServerSpec {
        name: settings.name.clone(),
        home: home.clone(),
        private_home,
        hide,
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
