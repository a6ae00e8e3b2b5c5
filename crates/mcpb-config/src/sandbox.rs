//! `upstreams.<name>.sandbox` and `broker.upstream_sandbox`: whether a stdio server runs in the
//! broker's sandbox, and what it is granted beyond the standard policy. Paths are resolved here
//! (`~` expanded, absolute required); the grants a server gets from its own command line
//! (its cwd, paths in its args, its tool caches) are added where it starts, which knows them.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `off`, or `standard`: the host read-only, a private home (`state/upstreams/<name>/home`)
/// and /tmp, the broker's runtime dir hidden, the server's cwd and the existing paths in its
/// args writable; its own namespaces, no capabilities, landlock and seccomp.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    #[default]
    Off,
    Standard,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// The host's network, as without the sandbox.
    #[default]
    Host,
    /// A network namespace of its own: nothing to connect to, not even the host's loopback.
    None,
}

/// Paths a sandboxed server is granted beyond the standard policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFsGrants {
    /// Readable (everything outside the home and the runtime dir is readable anyway).
    #[serde(default)]
    pub read: Vec<String>,
    /// Readable and writable. A path of its args listed under `read` stays read-only.
    #[serde(default)]
    pub write: Vec<String>,
}

/// The standard policy with settings of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSandboxPolicy {
    #[serde(default)]
    pub fs: RawFsGrants,
    /// `host` (default) or `none`.
    #[serde(default)]
    pub network: NetworkMode,
    /// Memory of the server's whole process tree, in MiB: a memory cgroup (a start is refused
    /// where the machine gives the daemon none).
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// Processes and threads of the server's user (RLIMIT_NPROC); default 1024.
    #[serde(default)]
    pub processes: Option<u64>,
    /// Size of the server's private /tmp, in MiB (a tmpfs, in memory); default 1024.
    /// Its /dev/shm holds at most 256 MiB, or this when smaller.
    #[serde(default)]
    pub tmp_mb: Option<u64>,
}

/// What the standard policy bounds when the config does not say: a runaway server forks or
/// fills its in-memory /tmp up to these, not to the machine's limits.
pub const DEFAULT_PROCESSES: u64 = 1024;
pub const DEFAULT_TMP_MB: u64 = 1024;

/// `off`, `standard`, or the standard policy with settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum RawSandbox {
    Mode(SandboxMode),
    Policy(RawSandboxPolicy),
}

/// A sandboxed server's policy, paths resolved. The default is the standard policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxPolicy {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub network: NetworkMode,
    pub memory_mb: Option<u64>,
    pub processes: Option<u64>,
    /// The private /tmp's size, in MiB.
    pub tmp_mb: u64,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self {
            read: Vec::new(),
            write: Vec::new(),
            network: NetworkMode::default(),
            memory_mb: None,
            processes: Some(DEFAULT_PROCESSES),
            tmp_mb: DEFAULT_TMP_MB,
        }
    }
}

impl SandboxPolicy {
    /// The policy `raw` asks for (`None`: the server runs unsandboxed), with `default` for an
    /// upstream that does not say; each path `~`-expanded by `expand` and required absolute
    /// (the error names the path).
    pub fn resolve(
        raw: Option<&RawSandbox>,
        default: SandboxMode,
        expand: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Option<Self>, String> {
        let raw = match raw {
            None => RawSandbox::Mode(default),
            Some(r) => r.clone(),
        };
        let p = match raw {
            RawSandbox::Mode(SandboxMode::Off) => return Ok(None),
            RawSandbox::Mode(SandboxMode::Standard) => RawSandboxPolicy::default(),
            RawSandbox::Policy(p) => p,
        };
        let paths = |list: &[String]| -> Result<Vec<PathBuf>, String> {
            list.iter()
                .map(|s| {
                    let path = expand(s);
                    if path.is_absolute() {
                        Ok(path)
                    } else {
                        Err(format!("{s} is not an absolute path (or ~/…)"))
                    }
                })
                .collect()
        };
        Ok(Some(Self {
            read: paths(&p.fs.read)?,
            write: paths(&p.fs.write)?,
            network: p.network,
            memory_mb: p.memory_mb,
            processes: Some(p.processes.unwrap_or(DEFAULT_PROCESSES)),
            tmp_mb: p.tmp_mb.unwrap_or(DEFAULT_TMP_MB).max(1),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(s: &str) -> PathBuf {
        crate::layout::expand_home(s, Some(std::path::Path::new("/home/u")))
    }

    #[test]
    fn absent_follows_the_default_and_paths_resolve() {
        assert_eq!(
            SandboxPolicy::resolve(None, SandboxMode::Off, &expand),
            Ok(None)
        );
        assert_eq!(
            SandboxPolicy::resolve(None, SandboxMode::Standard, &expand),
            Ok(Some(SandboxPolicy::default()))
        );
        let raw: RawSandbox = serde_json::from_value(serde_json::json!(
            {"fs": {"write": ["~/notes"]}, "network": "none"}
        ))
        .unwrap();
        let p = SandboxPolicy::resolve(Some(&raw), SandboxMode::Off, &expand)
            .unwrap()
            .unwrap();
        assert_eq!(p.write, [PathBuf::from("/home/u/notes")]);
        assert_eq!(p.network, NetworkMode::None);
        let off: RawSandbox = serde_json::from_value(serde_json::json!("off")).unwrap();
        assert_eq!(
            SandboxPolicy::resolve(Some(&off), SandboxMode::Standard, &expand),
            Ok(None)
        );
        let rel: RawSandbox =
            serde_json::from_value(serde_json::json!({"fs": {"read": ["data"]}})).unwrap();
        assert!(SandboxPolicy::resolve(Some(&rel), SandboxMode::Off, &expand).is_err());
    }
}
