//! What the jail binds from the host, opened by the helper while it can still reach every
//! path the daemon can.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::{JailSpec, Layer, SandboxError};

/// What the jail binds from the host, opened by the helper (which can still reach every path
/// the daemon can) so that the jail's init, running as the unprivileged jail user, never has
/// to resolve a host path itself.
pub(crate) struct Host {
    /// The take-over socket ([`crate::CONTROL_FD`]): the run's workspace directories come
    /// through it, already open, once a run takes the jail over.
    pub(crate) control: OwnedFd,
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

pub(crate) fn host_entries(spec: &JailSpec) -> Result<Vec<HostEntry>, SandboxError> {
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
        if !p.is_absolute()
            || SYSTEM
                .iter()
                .chain(&crate::JAIL_OWN)
                .any(|s| p.starts_with(s))
        {
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
