//! Copies a workspace tree between two directory fds, into the jail before a run and back out
//! after it. Only directories and regular files travel: a symlink, device, FIFO or socket the
//! program made stays behind, so nothing it leaves can point the host at another file. Hard
//! links arrive as separate files, which is why the budget counts bytes written, not inodes.

#![forbid(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// The jail's /tmp, inside the workspace; never copied back.
pub(crate) const TMP: &str = ".tmp";
const MAX_DEPTH: usize = 64;
const MAX_ENTRIES: u64 = 20_000;

pub(crate) struct Budget {
    bytes_left: u64,
    entries_left: u64,
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    /// False once anything was left out for the quota.
    pub(crate) complete: bool,
    /// A top-level name not to copy.
    pub(crate) skip_top: Option<&'static str>,
}

impl Budget {
    pub(crate) fn new(bytes: u64) -> Self {
        Self {
            bytes_left: bytes,
            entries_left: MAX_ENTRIES,
            files: 0,
            bytes: 0,
            complete: true,
            skip_top: None,
        }
    }
}

pub(crate) fn tree(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    budget: &mut Budget,
    depth: usize,
) -> io::Result<()> {
    if depth > MAX_DEPTH {
        budget.complete = false;
        return Ok(());
    }
    let mut dir = rustix::fs::Dir::read_from(src)?;
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        if depth == 0 && budget.skip_top.is_some_and(|s| s.as_bytes() == bytes) {
            continue;
        }
        if budget.entries_left == 0 {
            budget.complete = false;
            return Ok(());
        }
        budget.entries_left -= 1;
        let st = rustix::fs::statat(src, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let mode = Mode::from_raw_mode(st.st_mode) & Mode::from_bits_truncate(0o777);
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                match rustix::fs::mkdirat(dst, name, Mode::from_bits_truncate(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let s = rustix::fs::openat(src, name, flags, Mode::empty())?;
                let d = rustix::fs::openat(dst, name, flags, Mode::empty())?;
                tree(s.as_fd(), d.as_fd(), budget, depth + 1)?;
                // Only the owner's bits travel: a directory the program left world-writable is
                // not one on the host.
                rustix::fs::fchmod(&d, Mode::from_bits_truncate(0o700))?;
            }
            FileType::RegularFile => {
                let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
                if size > budget.bytes_left {
                    budget.complete = false;
                    continue;
                }
                let s = rustix::fs::openat(
                    src,
                    name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                let d = rustix::fs::openat(
                    dst,
                    name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::TRUNC
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_bits_truncate(0o600),
                )?;
                let mut from = std::fs::File::from(s);
                let mut to = std::fs::File::from(d);
                // The size was read before the copy; a file that grows meanwhile is cut there.
                let copied = io::copy(&mut io::Read::take(&mut from, size), &mut to)?;
                rustix::fs::fchmod(
                    &to,
                    (mode & Mode::from_bits_truncate(0o700)) | Mode::from_bits_truncate(0o600),
                )?;
                budget.bytes_left -= copied.min(budget.bytes_left);
                budget.bytes += copied;
                budget.files += 1;
            }
            FileType::Symlink
            | FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice
            | FileType::Unknown => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::{Budget, MAX_DEPTH, TMP, tree};

    fn copy(src: &Path, dst: &Path, budget: &mut Budget) {
        let s = std::fs::File::open(src).unwrap();
        let d = std::fs::File::open(dst).unwrap();
        tree(s.as_fd(), d.as_fd(), budget, 0).unwrap();
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn directories_and_files_travel_with_the_owners_bits_only_and_nothing_else_does() {
        let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let s = src.path();
        std::fs::create_dir_all(s.join("out/deep")).unwrap();
        std::fs::write(s.join("out/deep/r.txt"), "result").unwrap();
        std::fs::write(s.join("run.sh"), "#!/bin/sh").unwrap();
        std::fs::set_permissions(s.join("run.sh"), PermissionsExt::from_mode(0o777)).unwrap();
        std::fs::set_permissions(s.join("out"), PermissionsExt::from_mode(0o777)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", s.join("link")).unwrap();
        std::fs::create_dir(s.join(TMP)).unwrap();
        std::fs::write(s.join(TMP).join("scratch"), "x").unwrap();
        // Not at the top, a directory of the same name is the program's own.
        std::fs::create_dir(s.join("out").join(TMP)).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(s.join("fifo"))
            .status()
            .unwrap();
        assert!(fifo.success());

        let mut budget = Budget::new(1 << 20);
        budget.skip_top = Some(TMP);
        copy(s, dst.path(), &mut budget);

        let d = dst.path();
        assert_eq!(
            std::fs::read_to_string(d.join("out/deep/r.txt")).unwrap(),
            "result"
        );
        assert_eq!(mode(&d.join("out")), 0o700);
        assert_eq!(mode(&d.join("run.sh")), 0o700);
        assert!(d.join("out").join(TMP).is_dir());
        for gone in ["link", "fifo", TMP] {
            assert!(
                std::fs::symlink_metadata(d.join(gone)).is_err(),
                "{gone} travelled"
            );
        }
        assert!(budget.complete);
        assert_eq!((budget.files, budget.bytes), (2, 15));
    }

    #[test]
    fn what_does_not_fit_the_budget_or_the_depth_is_left_out_and_said() {
        let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(src.path().join("big"), vec![b'x'; 100]).unwrap();
        std::fs::write(src.path().join("small"), "yes").unwrap();
        let mut budget = Budget::new(10);
        copy(src.path(), dst.path(), &mut budget);
        assert!(!budget.complete);
        assert!(!dst.path().join("big").exists());
        assert_eq!(
            std::fs::read_to_string(dst.path().join("small")).unwrap(),
            "yes"
        );

        let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut deep = src.path().to_path_buf();
        for _ in 0..=MAX_DEPTH + 1 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("bottom"), "b").unwrap();
        let mut budget = Budget::new(1 << 20);
        copy(src.path(), dst.path(), &mut budget);
        assert!(!budget.complete);
        assert_eq!(budget.files, 0);
    }
}
