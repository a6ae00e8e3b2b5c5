//! The helper process: reads the spec, opens what the jail needs from the host while it still
//! can, forks the holder that unshares the namespaces, and writes the holder's id maps from
//! outside (only the parent user namespace may map a uid other than the writer's own).

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rustix::fs::{Mode, OFlags};
use rustix::process::{Gid, Pid, Signal, Uid, WaitOptions};
use rustix::thread::UnshareFlags;

use crate::{Event, JailSpec, Layer, REPORT_FD, SDK_FD, SandboxError, jail};

/// The spec is small (the snippet is its largest part); more is a broken caller.
const MAX_SPEC_BYTES: u64 = 16 << 20;

/// The report pipe, shared by every process of the tree (each holds a copy after fork).
pub(crate) struct Report {
    fd: OwnedFd,
    start: Instant,
}

impl Report {
    /// One JSON line. Lines stay under PIPE_BUF (reasons are cut), so each write is atomic
    /// even when two processes of the tree report at once.
    pub(crate) fn send(&self, event: &Event) {
        let mut event = event.clone();
        if let Event::Refused { reason, .. } = &mut event
            && reason.len() > 1000
        {
            let mut cut = 1000;
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            reason.truncate(cut);
        }
        if let Ok(mut line) = serde_json::to_vec(&event) {
            line.push(b'\n');
            let _ = rustix::io::write(&self.fd, &line);
        }
    }

    pub(crate) fn applied(&self, layer: Layer) {
        let us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.send(&Event::Applied { layer, us });
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What the jail binds from the host, opened by the helper (which can still reach every path
/// the daemon can) so that the jail's init, running as the unprivileged jail user, never has
/// to resolve a host path itself.
pub(crate) struct Host {
    pub(crate) workspace: OwnedFd,
    pub(crate) workspace_out: OwnedFd,
    pub(crate) entries: Vec<HostEntry>,
}

pub(crate) enum HostEntry {
    /// Bind the host object (held as an O_PATH fd) read-only at `at`.
    Bind {
        at: PathBuf,
        fd: OwnedFd,
        dir: bool,
        device: bool,
    },
    /// Recreate a symlink (merged-/usr systems: /bin -> usr/bin).
    Link { at: PathBuf, target: PathBuf },
}

/// The system directories every interpreter needs, when the host has them.
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/localtime",
];
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"];

fn open_path(p: &Path) -> Result<OwnedFd, rustix::io::Errno> {
    rustix::fs::open(p, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
}

fn host_entries(spec: &JailSpec) -> Result<Vec<HostEntry>, SandboxError> {
    let mut out = Vec::new();
    let root_err = |p: &Path, e: &dyn std::fmt::Display| {
        SandboxError::at(Layer::Root, format!("{}: {e}", p.display()))
    };
    for p in SYSTEM.iter().map(Path::new) {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(p).map_err(|e| root_err(p, &e))?;
            out.push(HostEntry::Link {
                at: p.into(),
                target,
            });
        } else {
            let fd = open_path(p).map_err(|e| root_err(p, &e))?;
            out.push(HostEntry::Bind {
                at: p.into(),
                fd,
                dir: meta.is_dir(),
                device: false,
            });
        }
    }
    if !out
        .iter()
        .any(|e| matches!(e, HostEntry::Bind { at, .. } if at == Path::new("/usr")))
    {
        return Err(SandboxError::at(
            Layer::Root,
            "the host has no /usr to bind",
        ));
    }
    for p in &spec.read_only {
        // The jail's own places are not the host's to fill.
        let reserved = [
            crate::JAIL_WORK,
            crate::JAIL_SDK,
            "/tmp",
            "/proc",
            "/dev",
            "/etc",
        ];
        if !p.is_absolute() || SYSTEM.iter().chain(&reserved).any(|s| p.starts_with(s)) {
            continue;
        }
        let meta = std::fs::metadata(p).map_err(|e| root_err(p, &e))?;
        let fd = open_path(p).map_err(|e| root_err(p, &e))?;
        out.push(HostEntry::Bind {
            at: p.clone(),
            fd,
            dir: meta.is_dir(),
            device: false,
        });
    }
    for p in DEVICES.iter().map(Path::new) {
        let fd = open_path(p).map_err(|e| root_err(p, &e))?;
        out.push(HostEntry::Bind {
            at: p.into(),
            fd,
            dir: false,
            device: true,
        });
    }
    Ok(out)
}

fn open_dir(p: &Path) -> Result<OwnedFd, SandboxError> {
    rustix::fs::open(
        p,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )
    .map_err(|e| SandboxError::at(Layer::Workspace, format!("{}: {e}", p.display())))
}

/// Takes fd 3 (SDK) and fd 4 (report) from the daemon.
fn inherited() -> Option<(OwnedFd, OwnedFd)> {
    for fd in [SDK_FD, REPORT_FD] {
        // SAFETY: the fd is only borrowed for the duration of fcntl(F_GETFD), which reads
        // the descriptor table and fails cleanly (EBADF) when the number is not open.
        let open = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::io::fcntl_getfd(open).ok()?;
    }
    // SAFETY: both numbers are open (checked above) and were set up by the daemon for this
    // process alone; nothing else in this single-threaded helper has taken ownership of them.
    Some(unsafe {
        (
            OwnedFd::from_raw_fd(SDK_FD),
            OwnedFd::from_raw_fd(REPORT_FD),
        )
    })
}

/// The built-in runtime of this binary, for specs with `in_process`.
pub(crate) static IN_PROCESS: std::sync::OnceLock<crate::InProcess> = std::sync::OnceLock::new();

pub(crate) fn main(in_process: Option<crate::InProcess>) -> ! {
    if let Some(f) = in_process {
        let _ = IN_PROCESS.set(f);
    }
    let start = Instant::now();
    let Some((sdk, report)) = inherited() else {
        eprintln!(
            "mcp-broker {}: fd {SDK_FD} (SDK) and fd {REPORT_FD} (report) must be open\nhint: this mode is started by the daemon for code runs, not by hand",
            crate::HELPER_ARG
        );
        std::process::exit(2);
    };
    let report = Report { fd: report, start };
    let code = match run(&report, &sdk) {
        Ok(code) => code,
        Err(e) => {
            refuse(&report, e);
            1
        }
    };
    std::process::exit(code)
}

pub(crate) fn refuse(report: &Report, e: SandboxError) {
    let (layer, reason) = match e {
        SandboxError::Layer { layer, reason } => (layer, reason),
        SandboxError::Unsupported => (Layer::Spec, e.to_string()),
    };
    report.send(&Event::Refused { layer, reason });
}

fn read_spec() -> Result<JailSpec, SandboxError> {
    let mut text = Vec::new();
    std::io::stdin()
        .take(MAX_SPEC_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| SandboxError::at(Layer::Spec, e))?;
    let spec: JailSpec =
        serde_json::from_slice(&text).map_err(|e| SandboxError::at(Layer::Spec, e))?;
    if spec.argv.is_empty() {
        return Err(SandboxError::at(Layer::Spec, "nothing to run"));
    }
    Ok(spec)
}

fn run(report: &Report, _sdk: &OwnedFd) -> Result<i32, SandboxError> {
    let spec = read_spec()?;
    let mut host = Host {
        workspace: open_dir(&spec.workspace)?,
        workspace_out: open_dir(&spec.workspace_out)?,
        entries: Vec::new(),
    };
    let sup = |e: rustix::io::Errno| SandboxError::at(Layer::Supervise, e);
    let (ready_r, ready_w) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(sup)?;
    let (go_r, go_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(sup)?;
    let Some(child) = fork(Layer::Supervise)? else {
        drop((ready_r, go_w));
        let code = match holder(&spec, &mut host, report, &ready_w, &go_r) {
            Ok(code) => code,
            Err(e) => {
                refuse(report, e);
                1
            }
        };
        std::process::exit(code);
    };
    drop((ready_w, go_r));
    let mut byte = [0u8; 1];
    let cgroup = spec
        .cgroup
        .as_ref()
        .map(|c| crate::cgroup::RunCgroup::open(c.dir.clone(), c.v2));
    // The holder says it has its user namespace; EOF means it failed and reported why.
    if rustix::io::read(&ready_r, &mut byte).map_err(sup)? == 1 {
        if let Some(cg) = &cgroup {
            // The daemon made this cgroup for the run: a jail outside it would run with
            // rlimits only, so a failure here refuses the run.
            if let Err(e) = cg.enter(child.as_raw_pid()) {
                let _ = rustix::process::kill_process(child, Signal::KILL);
                let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
                return Err(SandboxError::at(
                    Layer::Cgroup,
                    format!("{}: {e}", cg.dir().display()),
                ));
            }
            report.applied(Layer::Cgroup);
        }
        if let Err(e) = write_maps(child.as_raw_pid(), &spec) {
            let _ = rustix::process::kill_process(child, Signal::KILL);
            let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
            return Err(e);
        }
        rustix::io::write(&go_w, b"g").map_err(sup)?;
    }
    drop(go_w);
    let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
    Ok(0)
}

fn write_maps(pid: i32, spec: &JailSpec) -> Result<(), SandboxError> {
    let map = |file: &str, text: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), text)
            .map_err(|e| SandboxError::at(Layer::IdMap, format!("{file}: {e}")))
    };
    map("setgroups", "deny".into())?;
    map(
        "uid_map",
        format!("{} {} 1\n", crate::JAIL_UID, spec.host_uid),
    )?;
    map(
        "gid_map",
        format!("{} {} 1\n", crate::JAIL_UID, spec.host_gid),
    )
}

/// The holder: enters the new namespaces, waits for its maps, then forks the jail's init (the
/// first process of the new PID namespace) and waits for it.
fn holder(
    spec: &JailSpec,
    host: &mut Host,
    report: &Report,
    ready: &OwnedFd,
    go: &OwnedFd,
) -> Result<i32, SandboxError> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    unshare(UnshareFlags::NEWUSER, Layer::UserNamespace)?;
    report.applied(Layer::UserNamespace);
    rustix::io::write(ready, b"r").map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    let mut byte = [0u8; 1];
    if rustix::io::read(go, &mut byte).map_err(|e| SandboxError::at(Layer::IdMap, e))? != 1 {
        // The helper reported the failure.
        return Ok(1);
    }
    unshare(UnshareFlags::NEWNS, Layer::MountNamespace)?;
    report.applied(Layer::MountNamespace);
    // Bind sources must be mounts of the namespace that binds them, and the helper's host
    // ids can still reach every path the daemon can (an interpreter under a 0700 home).
    host.entries = host_entries(spec)?;
    // The holder still has the helper's host ids; becoming the mapped jail user makes what
    // it creates ownable in the namespace. The capabilities stay: the namespace has no root
    // id, so this is not a drop from root. The death signal resets with the credentials.
    let (uid, gid) = (
        Uid::from_raw(crate::JAIL_UID),
        Gid::from_raw(crate::JAIL_UID),
    );
    rustix::thread::set_thread_res_gid(gid, gid, gid)
        .map_err(|e| SandboxError::at(Layer::IdMap, e))?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)
        .map_err(|e| SandboxError::at(Layer::IdMap, e))?;
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    report.applied(Layer::IdMap);
    for (flag, layer) in [
        (UnshareFlags::NEWPID, Layer::PidNamespace),
        (UnshareFlags::NEWNET, Layer::NetNamespace),
        (UnshareFlags::NEWIPC, Layer::IpcNamespace),
        (UnshareFlags::NEWUTS, Layer::UtsNamespace),
    ] {
        unshare(flag, layer)?;
        report.applied(layer);
    }
    let Some(child) = fork(Layer::PidNamespace)? else {
        jail::init(spec, host, report);
    };
    let status = rustix::process::waitpid(Some(child), WaitOptions::empty())
        .map_err(|e| SandboxError::at(Layer::Supervise, e))?;
    Ok(status.and_then(|(_, s)| s.exit_status()).unwrap_or(1))
}

fn unshare(flags: UnshareFlags, layer: Layer) -> Result<(), SandboxError> {
    // SAFETY: none of the flags is CLONE_FILES, the one whose unsharing can leave another
    // thread with a stale descriptor table; and this process has a single thread anyway.
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(|e| {
        let mut reason = e.to_string();
        if layer == Layer::UserNamespace
            && let Some(hint) = crate::userns_hint()
        {
            reason.push_str("; ");
            reason.push_str(&hint);
        }
        SandboxError::at(layer, reason)
    })
}

/// The bind source for an fd the helper opened: the magic link resolves to the object itself.
pub(crate) fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// fork(2): `None` in the child.
pub(crate) fn fork(layer: Layer) -> Result<Option<Pid>, SandboxError> {
    // SAFETY: every process of the sandbox tree is single-threaded (`helper_main` runs before
    // the binary starts any thread, and no mode here starts one), so the child gets a
    // consistent copy of the whole process, locks and allocator included, and may go on
    // running ordinary Rust code.
    let pid = unsafe { libc::fork() };
    match pid {
        0 => Ok(None),
        p if p < 0 => Err(SandboxError::at(layer, std::io::Error::last_os_error())),
        p => Ok(Pid::from_raw(p)),
    }
}
