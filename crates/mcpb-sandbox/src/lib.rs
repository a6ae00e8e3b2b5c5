//! The code sandbox: one untrusted program run inside new user, mount, PID, network, IPC and UTS
//! namespaces, on a minimal read-only root with only its workspace writable, behind landlock,
//! seccomp, no_new_privs and rlimits, with a cleared environment and no fd but 0/1/2 and the
//! SDK channel. It owns the jail and nothing else: it never reads the broker's config, never
//! talks MCP, and knows no tool. mcpb-exec decides what runs and with which limits.
//!
//! The daemon starts the helper mode of its own binary (`mcp-broker __sandbox`), which reads a
//! [`JailSpec`] from stdin and reports [`Event`]s as JSON lines on fd 4. A layer that cannot be
//! applied ends the run as `Refused` naming the layer: nothing ever runs with fewer layers than
//! asked. Process tree: helper → holder (unshares, gets its id maps from the helper) → init
//! (PID 1 of the new PID namespace: mounts, copies the workspace in and out) → the program.
//! When init exits the kernel kills everything left in the namespace. A sandboxed server
//! (`__sandbox-server`) needs less: its helper enters the namespaces itself and its one fork
//! becomes the server (see `server.rs`).
//!
//! A jail is started before its run is known, so that a run can take over one that is ready
//! (the interpreter started and confined): init waits on fd 5 for the run's workspace, and the
//! program waits on the SDK channel for its job (see [`JailSpec`]).

// fork, unshare, taking the inherited fds, close_range, getrusage: each block says why it is
// sound. The modules that need none forbid it.
#![allow(unsafe_code)]

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(target_os = "linux")]
mod cgroup;
pub mod coverage;
#[cfg(target_os = "linux")]
pub use cgroup::{CgroupBase, RunCgroup};
#[cfg(target_os = "linux")]
mod confine;
#[cfg(target_os = "linux")]
mod copy;
pub mod env;
#[cfg(target_os = "linux")]
mod helper;
#[cfg(target_os = "linux")]
mod host;
#[cfg(target_os = "linux")]
mod jail;
#[cfg(target_os = "linux")]
mod launch;
#[cfg(target_os = "linux")]
mod relay;
#[cfg(target_os = "linux")]
mod report;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
mod server;
#[cfg(target_os = "linux")]
mod server_root;
#[cfg(target_os = "linux")]
mod trace;
/// The file `sandbox check` asks the sandbox's tracer to write what the kernel refused to.
pub use trace::FILE_VAR as TRACE_FILE_VAR;

/// The argument that selects the helper mode of the broker's binary.
pub const HELPER_ARG: &str = "__sandbox";
/// The argument that selects the server mode: `__sandbox-server SPEC-JSON PROGRAM ARGS...`, the
/// program's stdio and environment being the helper's own.
pub const SERVER_ARG: &str = "__sandbox-server";
/// The SDK channel's fd number, in the helper and inside the jail.
pub const SDK_FD: i32 = 3;
/// The helper's report pipe (never inside the jail).
pub const REPORT_FD: i32 = 4;
/// The take-over socket, in the helper, the holder and init (never in the program): the daemon
/// sends one byte with the run's two workspace directories (SCM_RIGHTS: the workspace, then
/// the empty directory that receives it), init copies the workspace in and answers one byte.
/// The daemon closing it first means the jail was never taken: init ends it, saying nothing.
pub const CONTROL_FD: i32 = 5;
/// Where the workspace appears inside the jail.
pub const JAIL_WORK: &str = "/work";
/// Where `JailSpec::files` appear inside the jail (read-only).
pub const JAIL_SDK: &str = "/sdk";
/// The places the jail has its own of: a host path under one of them is never bound into it
/// (`JailSpec::read_only`).
pub const JAIL_OWN: [&str; 6] = [JAIL_WORK, JAIL_SDK, "/tmp", "/proc", "/dev", "/etc"];

/// Everything the helper needs: what to start and within which limits. Nothing in it names a
/// run: the workspace comes over [`CONTROL_FD`] and the program's job over the SDK channel
/// (see the runtimes in mcpb-exec), so one started jail serves whichever run takes it over, and
/// two specs that are equal start interchangeable jails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JailSpec {
    /// Host paths the jail sees read-only at the same place (an interpreter outside /usr).
    pub read_only: Vec<PathBuf>,
    /// Run the runtime built into this binary (given to [`helper_main`]) with `argv` after the
    /// last layer, instead of exec'ing `argv[0]`: no host executable enters the jail, and the
    /// run is spared loading the binary a second time.
    #[serde(default)]
    pub in_process: bool,
    /// Files written read-only under `/sdk` (runner, SDK module, the snippet).
    pub files: Vec<JailFile>,
    /// The program and its arguments, as paths inside the jail.
    pub argv: Vec<String>,
    /// The program's whole environment.
    pub env: Vec<(String, String)>,
    pub limits: JailLimits,
    /// The host uid and gid the jail's user maps to (its own when the daemon is not root).
    pub host_uid: u32,
    pub host_gid: u32,
    /// The memory cgroup the daemon made for this run; the helper moves the jail into it or
    /// refuses the run. None only where the machine gives the daemon no memory cgroup.
    #[serde(default)]
    pub cgroup: Option<JailCgroup>,
}

/// How a stdio MCP server runs (the server mode): the host's root read-only, the user's home
/// replaced by a private one, a private /tmp, the broker's runtime root hidden, the granted
/// paths bound where they are; its own user, mount, PID, IPC and UTS namespaces (and network,
/// unless `network`), no capabilities, no_new_privs, landlock, seccomp. Holds no secret: it
/// travels on the helper's command line; the server's environment is the helper's own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSpec {
    /// The upstream's name, for messages.
    pub name: String,
    /// The home the server's user has on the host; `private_home` is bound over it.
    pub home: PathBuf,
    /// A host directory the broker keeps for this server (`state/upstreams/<name>/home`).
    pub private_home: PathBuf,
    /// Host paths covered by an empty directory: the broker's runtime root, where it is not
    /// under `home`.
    pub hide: Vec<PathBuf>,
    /// Host paths the server may read (the rest of the host is readable too, but these stay
    /// visible where a hidden or replaced path would cover them).
    pub read: Vec<PathBuf>,
    /// Host paths the server may write.
    pub write: Vec<PathBuf>,
    /// The host's network; otherwise a network namespace of its own (nothing to reach).
    pub network: bool,
    /// The folder the server starts in (host path; granted by the caller).
    pub cwd: Option<PathBuf>,
    pub host_uid: u32,
    pub host_gid: u32,
    /// RLIMIT_NPROC of the server's user.
    #[serde(default)]
    pub processes: Option<u64>,
    /// Size of the private /tmp in MiB (its /dev/shm: at most 256); 0 means the kernel's
    /// default (half the memory).
    #[serde(default)]
    pub tmp_mb: u64,
    /// The memory cgroup the daemon made for this server, when it has a memory limit.
    #[serde(default)]
    pub cgroup: Option<JailCgroup>,
    /// Follow the server's system calls and say each refusal (`sandbox check` only).
    #[serde(default)]
    pub trace: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JailCgroup {
    pub dir: PathBuf,
    pub v2: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JailFile {
    /// Relative to `/sdk`.
    pub name: String,
    pub contents: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JailLimits {
    /// RLIMIT_AS of the program.
    pub memory_bytes: u64,
    /// RLIMIT_NPROC: processes and threads of the jail's user.
    pub processes: u64,
    /// RLIMIT_FSIZE.
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// RLIMIT_CPU, a backstop behind the daemon's wall-clock deadline.
    pub cpu_seconds: u64,
    /// The size of the jail's `/work` (and so of `/tmp`, which lives in it).
    pub disk_bytes: u64,
}

/// The user inside the jail: the conventional unprivileged id.
pub const JAIL_UID: u32 = 65534;

/// A layer of the sandbox, in the order it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Spec,
    UserNamespace,
    IdMap,
    Cgroup,
    MountNamespace,
    PidNamespace,
    NetNamespace,
    IpcNamespace,
    UtsNamespace,
    Root,
    Workspace,
    Proc,
    PivotRoot,
    Hostname,
    Identity,
    Rlimits,
    Fds,
    NoNewPrivs,
    Landlock,
    Seccomp,
    Exec,
    Supervise,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Spec => "spec",
            Layer::UserNamespace => "user namespace",
            Layer::IdMap => "uid/gid map",
            Layer::Cgroup => "memory cgroup",
            Layer::MountNamespace => "mount namespace",
            Layer::PidNamespace => "pid namespace",
            Layer::NetNamespace => "network namespace",
            Layer::IpcNamespace => "ipc namespace",
            Layer::UtsNamespace => "uts namespace",
            Layer::Root => "minimal root",
            Layer::Workspace => "workspace",
            Layer::Proc => "/proc",
            Layer::PivotRoot => "pivot_root",
            Layer::Hostname => "hostname",
            Layer::Identity => "jail user",
            Layer::Rlimits => "rlimits",
            Layer::Fds => "file descriptors",
            Layer::NoNewPrivs => "no_new_privs",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
            Layer::Exec => "exec",
            Layer::Supervise => "supervision",
        }
    }
}

/// One line on the report pipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A layer is in place; `us` since the helper started.
    Applied { layer: Layer, us: u64 },
    /// A layer could not be applied: the program never ran.
    Refused { layer: Layer, reason: String },
    /// The program ended by itself (or by a signal from inside the jail or the kernel).
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
        cpu_ms: u64,
        max_rss_kb: u64,
    },
    /// The kernel's OOM killer stopped a process of the run (its memory cgroup was full).
    OutOfMemory,
    /// The workspace was copied back; `complete` is false when it was over the quota.
    Saved {
        files: u64,
        bytes: u64,
        complete: bool,
    },
}

/// SIGSYS: what a seccomp kill looks like from outside.
pub const SIGSYS: i32 = 31;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the code sandbox needs Linux")]
    Unsupported,
    #[error("{layer}: {reason}", layer = .layer.name())]
    Layer { layer: Layer, reason: String },
}

impl SandboxError {
    pub(crate) fn at(layer: Layer, reason: impl std::fmt::Display) -> Self {
        SandboxError::Layer {
            layer,
            reason: reason.to_string(),
        }
    }
}

/// A runtime built into the binary, run inside the jail on `argv`; returns the exit status.
pub type InProcess = fn(&[String]) -> i32;

/// The built-in runtime of this binary, for specs with `in_process`.
#[cfg(target_os = "linux")]
pub(crate) static IN_PROCESS: std::sync::OnceLock<crate::InProcess> = std::sync::OnceLock::new();

/// The helper mode's entry: call first thing in `main`, before any thread exists (namespaces
/// and forks need a single-threaded process). `in_process` runs specs that ask for it. Never
/// returns.
#[cfg(target_os = "linux")]
pub fn helper_main(in_process: Option<InProcess>) -> ! {
    helper::main(in_process)
}

/// The server mode's entry (see [`SERVER_ARG`]): call first thing in `main`, like
/// [`helper_main`]. Never returns; its exit status is the server's.
#[cfg(target_os = "linux")]
pub fn server_main() -> ! {
    server::main()
}

#[cfg(not(target_os = "linux"))]
pub fn server_main() -> ! {
    eprintln!("{}", SandboxError::Unsupported);
    std::process::exit(2)
}

#[cfg(not(target_os = "linux"))]
pub fn helper_main(_in_process: Option<InProcess>) -> ! {
    eprintln!("{}", SandboxError::Unsupported);
    std::process::exit(2)
}

/// What stands in the way of user namespaces on this machine, when something does: the
/// sysctl or AppArmor setting a refusal names.
pub fn userns_hint() -> Option<String> {
    userns_hint_from(|p| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    })
}

/// [`userns_hint`] with the settings read by `read` (a path under /proc/sys, trimmed).
fn userns_hint_from(read: impl Fn(&str) -> Option<String>) -> Option<String> {
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Some(
            "user.max_user_namespaces is 0: sysctl -w user.max_user_namespaces=15000".into(),
        );
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Some(
            "kernel.unprivileged_userns_clone is 0: sysctl -w kernel.unprivileged_userns_clone=1"
                .into(),
        );
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Some(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns=1): allow them for mcp-broker with an \
             AppArmor profile granting `userns,`, or set the sysctl to 0"
                .into(),
        );
    }
    None
}

/// The SDK channel as the program inside the jail has it (fd 3), for a runtime written in Rust
/// (the JavaScript worker).
#[cfg(unix)]
pub fn sdk_channel() -> Option<std::fs::File> {
    use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
    // SAFETY: the fd is only borrowed for fcntl(F_GETFD), which fails cleanly when it is closed.
    let open = unsafe { BorrowedFd::borrow_raw(SDK_FD) };
    rustix::io::fcntl_getfd(open).ok()?;
    // SAFETY: fd 3 is open (checked above) and, by the contract of a run, is the SDK channel
    // given to this process alone; nothing else in it has taken ownership of the number.
    Some(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(SDK_FD) }))
}

/// Whether runs on this machine get a memory cgroup (see the `cgroup` module), for `doctor`
/// and tests.
#[cfg(target_os = "linux")]
pub fn memory_cgroup_available() -> bool {
    let Some(base) = cgroup::CgroupBase::find() else {
        return false;
    };
    let probe = format!(
        "probe-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    base.create(std::process::id(), &probe, 64 << 20)
        .is_ok_and(|cg| cg.remove())
}

#[cfg(test)]
mod tests {
    use super::userns_hint_from;

    #[test]
    fn a_user_namespace_refusal_names_the_setting_in_the_way_and_how_to_change_it() {
        let with = |path: &'static str, value: &'static str| {
            userns_hint_from(move |p| (p == path).then(|| value.to_string()))
        };
        let cases = [
            (
                "/proc/sys/user/max_user_namespaces",
                "0",
                "sysctl -w user.max_user_namespaces=15000",
            ),
            (
                "/proc/sys/kernel/unprivileged_userns_clone",
                "0",
                "kernel.unprivileged_userns_clone=1",
            ),
            (
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1",
                "AppArmor profile granting `userns,`",
            ),
        ];
        for (path, value, said) in cases {
            let hint = with(path, value).unwrap_or_default();
            assert!(hint.contains(said), "{path}={value}: {hint}");
        }
        assert_eq!(with("/proc/sys/user/max_user_namespaces", "15000"), None);
        assert_eq!(
            with("/proc/sys/kernel/unprivileged_userns_clone", "1"),
            None
        );
        assert_eq!(userns_hint_from(|_| None), None);
    }
}
