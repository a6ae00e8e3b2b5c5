//! A server's view of the files, built by its init in its own mount namespace: the host's root
//! bound read-only (every mount under it too), a private /tmp and /dev/shm, the broker's
//! runtime root covered, the user's home replaced by the server's private one, the grants
//! bound where they are (read-write or read-only), a /proc of its own PID namespace; then
//! pivot_root into it.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};

use crate::launch::tmpfs;
use crate::report::fd_path;
use crate::{Layer, SandboxError, ServerSpec};

/// Where the new root is assembled: `r` in a tmpfs over the server's private home, private
/// to this mount namespace. Not /tmp: the user's home or a grant may be there, and what a
/// staging mount covers is missing from the copy of the host's root.
fn root_of(spec: &ServerSpec) -> PathBuf {
    spec.private_home.join("r")
}

/// What the server's root binds from the host, opened after the mount namespace was made
/// (a bind source must be a mount of the namespace that binds it) by a process that still
/// has the daemon's ids on the host, so it reaches every path the daemon can.
pub(crate) struct Opened {
    home: OwnedFd,
    write: Vec<(PathBuf, OwnedFd, bool)>,
    read: Vec<(PathBuf, OwnedFd, bool)>,
}

/// Opens a granted path without following a symlink anywhere in it: the daemon resolved the
/// grants it was given, so a symlink here was planted since (by a server, in a folder it may
/// write) and would point the bind elsewhere. Refused, naming the path.
fn open_path(p: &Path) -> Result<(OwnedFd, bool), SandboxError> {
    let err = |e: rustix::io::Errno| SandboxError::at(Layer::Root, format!("{}: {e}", p.display()));
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        p,
        OFlags::PATH | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(err)?;
    let st = rustix::fs::fstat(&fd).map_err(err)?;
    let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
    if kind == rustix::fs::FileType::Symlink {
        return Err(err(rustix::io::Errno::LOOP));
    }
    Ok((fd, kind == rustix::fs::FileType::Directory))
}

/// Sockets of the user's session and the system's services that a server could otherwise
/// connect to through its read-only view (a network namespace does not cover them): the
/// session bus, agents (ssh, gpg) and everything else under /run/user, the system bus, the
/// container engines' and snapd's sockets, and screen's sessions (`screen -X stuff` types into
/// them). Folders get an empty tmpfs, sockets /dev/null. (/dev is the server's own: see
/// `minimal_dev`.)
const SOCKETS: &[&str] = &[
    "/run/screen",
    "/var/run/screen",
    "/run/user",
    "/run/dbus",
    "/run/docker.sock",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
    "/run/systemd/private",
    "/run/systemd/userdb",
    "/var/run/docker.sock",
];

impl Opened {
    pub(crate) fn open(spec: &ServerSpec) -> Result<Self, SandboxError> {
        for p in spec.write.iter().chain(&spec.read) {
            if !p.is_absolute() {
                return Err(SandboxError::at(
                    Layer::Spec,
                    format!("grant {} is not absolute", p.display()),
                ));
            }
        }
        let each = |list: &[PathBuf]| -> Result<Vec<(PathBuf, OwnedFd, bool)>, SandboxError> {
            list.iter()
                .map(|p| open_path(p).map(|(fd, dir)| (p.clone(), fd, dir)))
                .collect()
        };
        Ok(Self {
            home: open_path(&spec.private_home)?.0,
            write: each(&spec.write)?,
            read: each(&spec.read)?,
        })
    }
}

fn inside(root: &Path, p: &Path) -> PathBuf {
    root.join(p.strip_prefix("/").unwrap_or(p))
}

fn err_at(layer: Layer, what: &Path) -> impl Fn(rustix::io::Errno) -> SandboxError {
    let what = what.display().to_string();
    move |e| SandboxError::at(layer, format!("{what}: {e}"))
}

/// The most a server's /dev/shm holds, in MiB (or its /tmp's size when smaller).
const SHM_MB: u64 = 256;

/// Options of a world-writable tmpfs of `mb` MiB (0: the kernel's default size).
fn sized(mb: u64) -> String {
    if mb == 0 {
        "mode=1777".to_string()
    } else {
        format!("size={mb}m,mode=1777")
    }
}

/// The devices a server needs and nothing else of the host's /dev: not the user's terminals
/// (/dev/pts), sound, cameras or input devices the login gave the user. A device its policy
/// grants (`/dev/ttyUSB0`) gets its mount point here, before /dev is made read-only.
fn minimal_dev<'a>(
    root: &Path,
    grants: impl Iterator<Item = &'a PathBuf>,
    shm_mb: u64,
) -> Result<(), SandboxError> {
    let dev = inside(root, Path::new("/dev"));
    tmpfs(&dev, "size=64k,mode=0755", Layer::Root)?;
    let io = |e: std::io::Error| SandboxError::at(Layer::Root, e);
    for g in grants.filter(|g| g.starts_with("/dev/")) {
        let at = inside(root, g);
        if g.is_dir() {
            std::fs::create_dir_all(&at).map_err(io)?;
        } else if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
            std::fs::write(&at, b"").map_err(io)?;
        }
    }
    for name in ["null", "zero", "full", "random", "urandom"] {
        let host = Path::new("/dev").join(name);
        if !host.exists() {
            continue;
        }
        let at = dev.join(name);
        std::fs::write(&at, b"").map_err(|e| SandboxError::at(Layer::Root, e))?;
        rustix::mount::mount_bind(&host, &at).map_err(err_at(Layer::Root, &host))?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(name))
            .map_err(|e| SandboxError::at(Layer::Root, e))?;
    }
    let shm = dev.join("shm");
    std::fs::create_dir_all(&shm).map_err(|e| SandboxError::at(Layer::Root, e))?;
    tmpfs(&shm, &sized(shm_mb), Layer::Root)?;
    rustix::mount::mount_remount(
        &dev,
        MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
        "",
    )
    .map_err(err_at(Layer::Root, Path::new("/dev")))
}

/// Every mount at and under `path` made read-only in one step (mount_setattr, Linux 5.12).
fn read_only_tree(path: &Path) -> Result<(), SandboxError> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| SandboxError::at(Layer::Root, e))?;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr reads a NUL-terminated path and `size` bytes of `attr`, both of
    // which live across the call; it writes nothing into this process's memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(SandboxError::at(
            Layer::Root,
            format!(
                "read-only {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(())
}

/// Covers `h` in the new root: a folder with an empty tmpfs, a file or socket with /dev/null.
/// A path through a symlink is not the copy's (an absolute link leads out of it): left alone.
fn cover(root: &Path, h: &Path) -> Result<(), SandboxError> {
    if through_symlink(root, h) {
        return Ok(());
    }
    let at = inside(root, h);
    match std::fs::symlink_metadata(&at) {
        Ok(m) if m.is_dir() => tmpfs(&at, "size=64k,mode=0755", Layer::Root),
        Ok(_) => rustix::mount::mount_bind(inside(root, Path::new("/dev/null")), &at)
            .map_err(err_at(Layer::Root, h)),
        Err(_) => Ok(()),
    }
}

/// Whether a path inside the new root passes through a symlink (a server's private home or
/// /tmp may hold ones it planted): a mount point is never made through one.
fn through_symlink(root: &Path, at: &Path) -> bool {
    let mut p = root.to_path_buf();
    for c in at.strip_prefix("/").unwrap_or(at).components() {
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

fn bind(
    root: &Path,
    fd: &OwnedFd,
    dir: bool,
    at: &Path,
    read_only: bool,
) -> Result<(), SandboxError> {
    let target = inside(root, at);
    if through_symlink(root, at) {
        return Err(SandboxError::at(
            Layer::Root,
            format!(
                "the mount point of {} passes through a symlink",
                at.display()
            ),
        ));
    }
    if !target.exists() {
        let made = if dir {
            std::fs::create_dir_all(&target)
        } else {
            target
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&target, b""))
        };
        made.map_err(|e| {
            SandboxError::at(
                Layer::Root,
                format!("mount point for {}: {e}", at.display()),
            )
        })?;
    }
    rustix::mount::mount_bind(fd_path(fd).as_str(), &target).map_err(err_at(Layer::Root, at))?;
    if read_only {
        let flags = MountFlags::BIND | MountFlags::RDONLY | crate::jail::locked_flags(fd);
        rustix::mount::mount_remount(&target, flags, "").map_err(err_at(Layer::Root, at))?;
    }
    Ok(())
}

pub(crate) fn build(spec: &ServerSpec, opened: &Opened) -> Result<(), SandboxError> {
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| SandboxError::at(Layer::MountNamespace, e))?;
    tmpfs(&spec.private_home, "size=64k,mode=0755", Layer::Root)?;
    let root = root_of(spec);
    let root = root.as_path();
    std::fs::create_dir(root).map_err(|e| SandboxError::at(Layer::Root, e))?;
    rustix::mount::mount_bind_recursive("/", root).map_err(err_at(Layer::Root, Path::new("/")))?;
    read_only_tree(root)?;
    tmpfs(
        &inside(root, Path::new("/tmp")),
        &sized(spec.tmp_mb),
        Layer::Root,
    )?;
    minimal_dev(
        root,
        spec.read.iter().chain(&spec.write),
        spec.tmp_mb.min(SHM_MB),
    )?;
    // The runtime dir, covered by an empty tmpfs (nothing in it writable past landlock but
    // the grants bound into it below).
    for h in &spec.hide {
        cover(root, h)?;
    }
    // Without a network, nothing of the host's services either: their pathname sockets
    // (databases, libvirt, D-Bus, container engines) live under /run, and a network namespace
    // does not cover them, nor does a read-only view (connecting needs no write to the
    // mount). A grant inside (`/run/postgresql`) is bound back over it below.
    if !spec.network {
        for services in ["/run", "/var/run"] {
            cover(root, Path::new(services))?;
        }
    }
    // The home's mount point is made when the host's is out of sight (under /tmp).
    bind(root, &opened.home, true, &spec.home, false)?;
    // Outer grants first: one inside another (a writable cache in a read-only installation, a
    // read-only folder in a writable one) is bound over it and keeps its own mode.
    let mut grants: Vec<(&PathBuf, &OwnedFd, bool, bool)> = opened
        .write
        .iter()
        .map(|(p, fd, dir)| (p, fd, *dir, false))
        .chain(opened.read.iter().map(|(p, fd, dir)| (p, fd, *dir, true)))
        .collect();
    grants.sort_by_key(|(p, ..)| p.components().count());
    for (p, fd, dir, read_only) in grants {
        bind(root, fd, dir, p, read_only)?;
    }
    // The sockets and terminals, after the grants so that a grant holding one (`/run`) does
    // not show it again; skipped where a grant lies inside one (the user named it).
    let granted: Vec<&PathBuf> = spec.read.iter().chain(&spec.write).collect();
    for sock in SOCKETS.iter().map(Path::new) {
        if !granted.iter().any(|g| g.starts_with(sock)) {
            cover(root, sock)?;
        }
    }
    // A /proc of the server's own PID namespace; where the machine forbids one, an empty
    // directory rather than the host's (which would show every process).
    let proc = inside(root, Path::new("/proc"));
    if !crate::launch::mount_proc(&proc) {
        tmpfs(&proc, "size=4k,mode=0555", Layer::Root)?;
    }
    std::env::set_current_dir(root).map_err(|e| SandboxError::at(Layer::PivotRoot, e))?;
    rustix::process::pivot_root(".", ".").map_err(|e| SandboxError::at(Layer::PivotRoot, e))?;
    rustix::mount::unmount(".", UnmountFlags::DETACH)
        .map_err(|e| SandboxError::at(Layer::PivotRoot, e))?;
    std::env::set_current_dir("/").map_err(|e| SandboxError::at(Layer::PivotRoot, e))?;
    Ok(())
}
