//! The jail's init: PID 1 of the new PID namespace. It builds the minimal root (a tmpfs with the
//! system directories bound read-only, the SDK files, a tmpfs workspace of the quota's size),
//! pivots into it and forks the program; then it waits for the run that takes the jail over,
//! copies that run's workspace in, reaps, kills what the program left behind, and copies the
//! workspace back out. Its exit tears the namespace down: nothing started inside outlives it.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, StatVfsMountFlags};
use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};
use rustix::process::{Pid, Signal, WaitOptions};

use crate::host::{Host, HostEntry};
use crate::launch::tmpfs;
use crate::report::{Report, fd_path, refuse};
use crate::{Event, JAIL_SDK, JAIL_WORK, JailSpec, Layer, SandboxError, confine, copy};

/// Where the new root is built before pivot_root: every system has a /tmp, and what the host
/// keeps there is hidden only inside this mount namespace.
const BUILD: &str = "/tmp";

pub(crate) fn init(spec: &JailSpec, host: &Host, report: &Report) -> ! {
    let code = match setup_and_run(spec, host, report) {
        Ok(()) => 0,
        Err(e) => {
            refuse(report, e);
            1
        }
    };
    std::process::exit(code)
}

fn at(layer: Layer) -> impl Fn(rustix::io::Errno) -> SandboxError {
    move |e| SandboxError::at(layer, e)
}

fn io_at(layer: Layer, what: &Path) -> impl Fn(std::io::Error) -> SandboxError {
    let what = what.display().to_string();
    move |e| SandboxError::at(layer, format!("{what}: {e}"))
}

fn inside(p: &Path) -> PathBuf {
    Path::new(BUILD).join(p.strip_prefix("/").unwrap_or(p))
}

/// A mount's flags that a user namespace may not clear (the kernel locks them), as remount
/// flags: a read-only remount must repeat them or it fails.
pub(crate) fn locked_flags(fd: &OwnedFd) -> MountFlags {
    let Ok(st) = rustix::fs::fstatvfs(fd) else {
        return MountFlags::empty();
    };
    let f = st.f_flag;
    let mut out = MountFlags::empty();
    for (s, m) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ] {
        if f.contains(s) {
            out |= m;
        }
    }
    out
}

fn bind_read_only(fd: &OwnedFd, target: &Path, device: bool) -> Result<(), SandboxError> {
    let err =
        |e: rustix::io::Errno| SandboxError::at(Layer::Root, format!("{}: {e}", target.display()));
    rustix::mount::mount_bind(fd_path(fd).as_str(), target).map_err(err)?;
    let mut flags = MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | locked_flags(fd);
    if !device {
        flags |= MountFlags::NODEV;
    } else {
        flags |= MountFlags::NOEXEC;
    }
    rustix::mount::mount_remount(target, flags, "").map_err(err)
}

fn build_root(spec: &JailSpec, host: &Host) -> Result<(), SandboxError> {
    let root = Path::new(BUILD);
    tmpfs(root, "size=16m,nr_inodes=4096,mode=0755", Layer::Root)?;
    for entry in &host.entries {
        match entry {
            HostEntry::Link { at, target } => {
                let p = inside(at);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent).map_err(io_at(Layer::Root, parent))?;
                }
                std::os::unix::fs::symlink(target, &p).map_err(io_at(Layer::Root, at))?;
            }
            HostEntry::Bind {
                at,
                fd,
                dir,
                device,
            } => {
                let p = inside(at);
                if *dir {
                    std::fs::create_dir_all(&p).map_err(io_at(Layer::Root, at))?;
                } else {
                    if let Some(parent) = p.parent() {
                        std::fs::create_dir_all(parent).map_err(io_at(Layer::Root, parent))?;
                    }
                    std::fs::write(&p, b"").map_err(io_at(Layer::Root, at))?;
                }
                bind_read_only(fd, &p, *device)?;
            }
        }
    }
    let etc = inside(Path::new("/etc"));
    std::fs::create_dir_all(&etc).map_err(io_at(Layer::Root, &etc))?;
    let uid = crate::JAIL_UID;
    for (name, text) in [
        (
            "passwd",
            format!("sandbox:x:{uid}:{uid}:sandbox:{JAIL_WORK}:/bin/sh\n"),
        ),
        ("group", format!("sandbox:x:{uid}:\n")),
        ("hostname", "sandbox\n".into()),
    ] {
        std::fs::write(etc.join(name), text).map_err(io_at(Layer::Root, &etc))?;
    }
    let sdk = inside(Path::new(JAIL_SDK));
    std::fs::create_dir_all(&sdk).map_err(io_at(Layer::Root, &sdk))?;
    for f in &spec.files {
        let name = Path::new(&f.name);
        if name.is_absolute() || name.components().any(|c| c.as_os_str() == "..") {
            return Err(SandboxError::at(
                Layer::Spec,
                format!("file name {}", f.name),
            ));
        }
        let p = sdk.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io_at(Layer::Root, parent))?;
        }
        std::fs::write(&p, &f.contents).map_err(io_at(Layer::Root, &p))?;
    }
    for dir in ["proc", "dev"] {
        std::fs::create_dir_all(root.join(dir)).map_err(io_at(Layer::Root, root))?;
    }
    Ok(())
}

/// The jail's `/work`: an empty tmpfs of the quota's size (the run's files come at take-over).
fn workspace(spec: &JailSpec) -> Result<(), SandboxError> {
    let work = inside(Path::new(JAIL_WORK));
    std::fs::create_dir_all(&work).map_err(io_at(Layer::Workspace, &work))?;
    tmpfs(
        &work,
        &format!(
            "size={},nr_inodes=65536,mode=0700",
            spec.limits.disk_bytes.max(4096)
        ),
        Layer::Workspace,
    )?;
    // /tmp lives in the workspace so one quota covers both; it is never copied.
    let tmp = work.join(copy::TMP);
    std::fs::create_dir_all(&tmp).map_err(io_at(Layer::Workspace, &tmp))?;
    Ok(())
}

/// Waits until the take-over socket has something (the run, or the daemon closing it); false
/// when the program ended first: a jail whose runtime is gone must not be taken over, so init
/// ends it and the daemon sees a dead jail.
fn program_waits(control: &OwnedFd, program: Pid) -> Result<bool, SandboxError> {
    use rustix::event::{PollFd, PollFlags};
    // Without pidfds (a kernel before 5.3, a container's seccomp profile) init waits for the
    // take-over alone; a program dead by then shows in its run's report.
    let Ok(pidfd) = rustix::process::pidfd_open(program, rustix::process::PidfdFlags::empty())
    else {
        return Ok(true);
    };
    loop {
        let mut fds = [
            PollFd::new(control, PollFlags::IN),
            PollFd::new(&pidfd, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(SandboxError::at(Layer::Supervise, e)),
            Ok(_) => {}
        }
        if !fds[1].revents().is_empty() {
            return Ok(false);
        }
        if !fds[0].revents().is_empty() {
            return Ok(true);
        }
    }
}

/// The run's two workspace directories, from the take-over socket; None when the daemon
/// closed it without taking the jail over.
fn receive(control: &OwnedFd) -> Result<Option<(OwnedFd, OwnedFd)>, SandboxError> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut byte = [0u8; 1];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match rustix::net::recvmsg(
            control,
            &mut [std::io::IoSliceMut::new(&mut byte)],
            &mut ancillary,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(SandboxError::at(Layer::Workspace, e)),
            Ok(m) => break m.bytes,
        }
    };
    if got == 0 {
        return Ok(None);
    }
    let mut fds = Vec::new();
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    let is_dir = |fd: &OwnedFd| {
        rustix::fs::fstat(fd).is_ok_and(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
        })
    };
    let mut fds = fds.into_iter();
    match (fds.next(), fds.next(), fds.next()) {
        (Some(work), Some(out), None) if is_dir(&work) && is_dir(&out) => Ok(Some((work, out))),
        _ => Err(SandboxError::at(
            Layer::Workspace,
            "the take-over did not carry two workspace directories",
        )),
    }
}

/// Waits for the run that takes this jail over; copies its workspace in and says so on the
/// take-over socket. Returns the directory that receives the workspace afterwards, or None
/// when no run came or the program ended first (a refusal it reported stays in the report).
fn take_over(
    spec: &JailSpec,
    host: &Host,
    program: Pid,
    report: &Report,
) -> Result<Option<OwnedFd>, SandboxError> {
    if !program_waits(&host.control, program)? {
        // Said for a run that takes this jail over at this very moment (a pooled one is
        // discarded unread): how the program ended, as `supervise` would.
        if let Ok(Some((_, status))) = rustix::process::waitpid(Some(program), WaitOptions::empty())
        {
            report_exit(report, status);
        }
        return Ok(None);
    }
    let Some((work, out)) = receive(&host.control)? else {
        return Ok(None);
    };
    let (dst, mut budget) = workspace_copy(spec)?;
    copy::tree(work.as_fd(), dst.as_fd(), &mut budget, 0)
        .map_err(|e| SandboxError::at(Layer::Workspace, format!("copying in: {e}")))?;
    if !budget.complete {
        return Err(SandboxError::at(
            Layer::Workspace,
            "the workspace is over its disk quota",
        ));
    }
    rustix::io::write(&host.control, b"c").map_err(at(Layer::Supervise))?;
    Ok(Some(out))
}

fn setup_and_run(spec: &JailSpec, host: &Host, report: &Report) -> Result<(), SandboxError> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(at(Layer::Supervise))?;
    // /proc/1 must not hand the program this process's fds (host directories).
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(at(Layer::Supervise))?;
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(at(Layer::MountNamespace))?;
    build_root(spec, host)?;
    report.applied(Layer::Root);
    workspace(spec)?;
    report.applied(Layer::Workspace);
    // A proc of the new PID namespace shows only the jail's processes. Some container
    // runtimes forbid it (a masked host /proc); the jail then has none, which hides more.
    if crate::launch::mount_proc(&inside(Path::new("/proc"))) {
        report.applied(Layer::Proc);
    }
    rustix::system::sethostname(b"sandbox").map_err(at(Layer::Hostname))?;
    report.applied(Layer::Hostname);
    std::env::set_current_dir(BUILD).map_err(io_at(Layer::PivotRoot, Path::new(BUILD)))?;
    rustix::process::pivot_root(".", ".").map_err(at(Layer::PivotRoot))?;
    rustix::mount::unmount(".", UnmountFlags::DETACH).map_err(at(Layer::PivotRoot))?;
    std::env::set_current_dir("/").map_err(io_at(Layer::PivotRoot, Path::new("/")))?;
    std::os::unix::fs::symlink(format!("{JAIL_WORK}/{}", copy::TMP), "/tmp")
        .map_err(io_at(Layer::Root, Path::new("/tmp")))?;
    rustix::mount::mount_remount(
        "/",
        MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
        "",
    )
    .map_err(at(Layer::Root))?;
    report.applied(Layer::PivotRoot);
    let Some(program) = crate::report::fork(Layer::Supervise)? else {
        confine::program(spec, report);
    };
    let Some(out) = take_over(spec, host, program, report)? else {
        // SAFETY: as in `supervise`: kill(-1) from PID 1 reaches only this namespace.
        unsafe { libc::kill(-1, libc::SIGKILL) };
        return Ok(());
    };
    supervise(program, spec, &out, report)
}

/// Reaps until the program is gone, kills the rest of the namespace, reports, copies back.
fn supervise(
    program: Pid,
    spec: &JailSpec,
    out: &OwnedFd,
    report: &Report,
) -> Result<(), SandboxError> {
    let status = loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((p, s))) if p == program => break s,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(SandboxError::at(Layer::Supervise, e)),
        }
    };
    // SAFETY: kill(-1) from PID 1 of a namespace signals every other process in it and
    // nothing outside; it takes no pointers.
    unsafe { libc::kill(-1, libc::SIGKILL) };
    while let Ok(Some(_)) | Err(rustix::io::Errno::INTR) =
        rustix::process::wait(WaitOptions::empty())
    {}
    report_exit(report, status);
    let (src, mut budget) = workspace_copy(spec)?;
    let copied = copy::tree(src.as_fd(), out.as_fd(), &mut budget, 0);
    report.send(&Event::Saved {
        files: budget.files,
        bytes: budget.bytes,
        complete: budget.complete && copied.is_ok(),
    });
    Ok(())
}

/// How the program ended, with what the reaped processes used.
fn report_exit(report: &Report, status: rustix::process::WaitStatus) {
    let (cpu_ms, max_rss_kb) = children_usage();
    report.send(&Event::Exited {
        code: status.exit_status(),
        signal: status.terminating_signal(),
        cpu_ms,
        max_rss_kb,
    });
}

fn children_usage() -> (u64, u64) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the pointer, which points at a zeroed value
    // of that type that lives across the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    if rc != 0 {
        return (0, 0);
    }
    // SAFETY: getrusage succeeded, so it filled the value (and zeroed is valid for it anyway).
    let u = unsafe { usage.assume_init() };
    let ms = |t: libc::timeval| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1000 + u64::try_from(t.tv_usec).unwrap_or(0) / 1000
    };
    (
        ms(u.ru_utime) + ms(u.ru_stime),
        u64::try_from(u.ru_maxrss).unwrap_or(0),
    )
}

/// The jail's workspace directory and a fresh copy budget (its disk limit; the run's own
/// tmp left out), for a copy in or out.
fn workspace_copy(spec: &JailSpec) -> Result<(OwnedFd, copy::Budget), SandboxError> {
    let dir = rustix::fs::open(
        JAIL_WORK,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(at(Layer::Workspace))?;
    let mut budget = copy::Budget::new(spec.limits.disk_bytes);
    budget.skip_top = Some(copy::TMP);
    Ok((dir, budget))
}
