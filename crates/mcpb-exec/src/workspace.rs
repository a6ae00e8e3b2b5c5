//! Workspaces: `<root>/<profile>/<exec id>/work`, one per exec session. An exec id is a UUID v4
//! in its canonical form and nothing else; it is checked before any path is built, and a
//! workspace is found only under its own profile's directory, so another profile's id is as
//! unknown as a made-up one. Uploads are confined to the workspace: relative paths of plain
//! components, written without following any link.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use uuid::Uuid;

use crate::ExecError;

/// Largest single upload.
pub const MAX_UPLOAD_BYTES: usize = 8 << 20;
const MAX_PATH_DEPTH: usize = 16;
const WORK: &str = "work";
const OUT: &str = "work.out";
const PERSIST: &str = "persist";

pub struct Workspaces {
    root: PathBuf,
    /// The host ids the jail runs as; the workspace must be theirs.
    owner: (u32, u32),
    max_per_profile: u32,
    busy: Arc<Mutex<HashSet<Uuid>>>,
}

/// One run's hold on a workspace: no second run uses it meanwhile.
pub struct Lease {
    id: Uuid,
    dir: PathBuf,
    busy: Arc<Mutex<HashSet<Uuid>>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.busy.lock().remove(&self.id);
    }
}

impl Lease {
    pub fn work(&self) -> PathBuf {
        self.dir.join(WORK)
    }

    pub fn out(&self) -> PathBuf {
        self.dir.join(OUT)
    }

    pub fn id(&self) -> Uuid {
        self.id
    }
}

/// The exec id as a UUID, when `text` is exactly a canonical v4 UUID.
pub fn parse_id(text: &str) -> Result<Uuid, ExecError> {
    let unknown = || ExecError::UnknownExec(text.chars().take(60).collect());
    let id = Uuid::try_parse(text).map_err(|_| unknown())?;
    if id.get_version_num() != 4 || id.hyphenated().to_string() != text {
        return Err(unknown());
    }
    Ok(id)
}

/// A profile's directory name: the name itself when it is a plain word, else its hex.
fn profile_dir(profile: &str) -> String {
    let plain = !profile.is_empty()
        && !profile.starts_with('.')
        && profile
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if plain {
        profile.to_string()
    } else {
        profile.bytes().map(|b| format!("{b:02x}")).collect()
    }
}

/// A workspace-relative path of plain components, or why not.
pub fn confined(path: &str) -> Result<PathBuf, ExecError> {
    let bad = |why: &str| {
        ExecError::BadPath(format!(
            "{}: {why}",
            path.chars().take(120).collect::<String>()
        ))
    };
    if path.is_empty() {
        return Err(bad("empty"));
    }
    if path.contains('\0') {
        return Err(bad("contains NUL"));
    }
    let p = Path::new(path);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => return Err(bad("`..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(bad("must be relative to the workspace"));
            }
        }
    }
    if out.as_os_str().is_empty() {
        return Err(bad("names no file"));
    }
    if out.components().count() > MAX_PATH_DEPTH {
        return Err(bad("too deep"));
    }
    if out
        .components()
        .next()
        .is_some_and(|c| c.as_os_str() == ".tmp")
    {
        return Err(bad("`.tmp` is the run's scratch space"));
    }
    Ok(out)
}

impl Workspaces {
    pub fn new(root: PathBuf, max_per_profile: u32) -> Self {
        let owner = if rustix::process::geteuid().is_root() {
            (mcpb_sandbox::JAIL_UID, mcpb_sandbox::JAIL_UID)
        } else {
            (
                rustix::process::getuid().as_raw(),
                rustix::process::getgid().as_raw(),
            )
        };
        Self {
            root,
            owner,
            max_per_profile,
            busy: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    pub fn owner(&self) -> (u32, u32) {
        self.owner
    }

    fn dir(&self, profile: &str, id: Uuid) -> PathBuf {
        self.root
            .join(profile_dir(profile))
            .join(id.hyphenated().to_string())
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ExecError + '_ {
        move |e| ExecError::Io(format!("{}: {e}", path.display()))
    }

    /// Makes `path` the jail user's (the daemon may be root, the jail never is).
    fn own(&self, path: &Path) -> Result<(), ExecError> {
        if !rustix::process::geteuid().is_root() {
            return Ok(());
        }
        let (uid, gid) = self.owner;
        rustix::fs::chownat(
            rustix::fs::CWD,
            path,
            Some(rustix::process::Uid::from_raw(uid)),
            Some(rustix::process::Gid::from_raw(gid)),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| ExecError::Io(format!("{}: {e}", path.display())))
    }

    /// A new, empty workspace of `profile`.
    pub fn open(&self, profile: &str, persist: bool) -> Result<Uuid, ExecError> {
        let base = self.root.join(profile_dir(profile));
        std::fs::create_dir_all(&base).map_err(Self::io(&base))?;
        let open = std::fs::read_dir(&base).map_err(Self::io(&base))?.count();
        if open >= self.max_per_profile as usize {
            return Err(ExecError::TooMany(self.max_per_profile));
        }
        let id = Uuid::new_v4();
        let dir = self.dir(profile, id);
        let work = dir.join(WORK);
        std::fs::create_dir_all(&work).map_err(Self::io(&work))?;
        if persist {
            std::fs::write(dir.join(PERSIST), b"").map_err(Self::io(&dir))?;
        }
        self.own(&work)?;
        Ok(id)
    }

    fn existing(&self, profile: &str, id: &str) -> Result<(Uuid, PathBuf), ExecError> {
        let uuid = parse_id(id)?;
        let dir = self.dir(profile, uuid);
        if !dir.join(WORK).is_dir() {
            return Err(ExecError::UnknownExec(id.to_string()));
        }
        Ok((uuid, dir))
    }

    /// Holds the workspace for one run; a fresh, empty `work.out` receives what it leaves.
    pub fn lease(&self, profile: &str, id: &str) -> Result<Lease, ExecError> {
        let (uuid, dir) = self.existing(profile, id)?;
        if !self.busy.lock().insert(uuid) {
            return Err(ExecError::Busy(id.to_string()));
        }
        let lease = Lease {
            id: uuid,
            dir,
            busy: self.busy.clone(),
        };
        let out = lease.out();
        if out.exists() {
            std::fs::remove_dir_all(&out).map_err(Self::io(&out))?;
        }
        std::fs::create_dir(&out).map_err(Self::io(&out))?;
        self.own(&out)?;
        Ok(lease)
    }

    /// After a run that ended by itself: what it left becomes the workspace.
    pub fn commit(&self, lease: &Lease) -> Result<(), ExecError> {
        let work = lease.work();
        let old = lease.dir.join("work.old");
        std::fs::rename(&work, &old).map_err(Self::io(&work))?;
        std::fs::rename(lease.out(), &work).map_err(Self::io(&work))?;
        std::fs::remove_dir_all(&old).map_err(Self::io(&old))
    }

    /// After a run that was stopped: the workspace stays as it was.
    pub fn discard(&self, lease: &Lease) {
        let _ = std::fs::remove_dir_all(lease.out());
    }

    /// Writes `content` at `path` in the workspace; returns the bytes written.
    pub fn upload(
        &self,
        profile: &str,
        id: &str,
        path: &str,
        content: &[u8],
    ) -> Result<usize, ExecError> {
        if content.len() > MAX_UPLOAD_BYTES {
            return Err(ExecError::BadPath(format!(
                "{path}: {} bytes is more than an upload may carry ({MAX_UPLOAD_BYTES})",
                content.len()
            )));
        }
        let rel = confined(path)?;
        let (uuid, dir) = self.existing(profile, id)?;
        if self.busy.lock().contains(&uuid) {
            return Err(ExecError::Busy(id.to_string()));
        }
        let mut at = dir.join(WORK);
        let parts: Vec<_> = rel.components().collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let last = i + 1 == parts.len();
            match std::fs::symlink_metadata(&at) {
                // A workspace never holds links (runs copy back only files and directories),
                // but an upload must not follow one whatever happened.
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(ExecError::BadPath(format!("{path}: a link is in the way")));
                }
                Ok(m) if !last && !m.is_dir() => {
                    return Err(ExecError::BadPath(format!("{path}: a file is in the way")));
                }
                Ok(m) if last && m.is_dir() => {
                    return Err(ExecError::BadPath(format!("{path}: is a directory")));
                }
                Ok(_) => {}
                Err(_) if !last => {
                    std::fs::create_dir(&at).map_err(Self::io(&at))?;
                    self.own(&at)?;
                }
                Err(_) => {}
            }
        }
        mcpb_config::layout::write_private(&at, content).map_err(Self::io(&at))?;
        self.own(&at)?;
        Ok(content.len())
    }

    /// Removes the workspace unless it was opened with `persist`; returns whether it was.
    pub fn close(&self, profile: &str, id: &str) -> Result<bool, ExecError> {
        let (uuid, dir) = self.existing(profile, id)?;
        if self.busy.lock().contains(&uuid) {
            return Err(ExecError::Busy(id.to_string()));
        }
        if dir.join(PERSIST).exists() {
            return Ok(false);
        }
        std::fs::remove_dir_all(&dir).map_err(Self::io(&dir))?;
        Ok(true)
    }

    /// Removes a workspace whatever it was opened with (a one-shot run's own).
    pub fn remove(&self, profile: &str, id: Uuid) {
        let _ = std::fs::remove_dir_all(self.dir(profile, id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_v4_ids_are_accepted() {
        let id = Uuid::new_v4().hyphenated().to_string();
        assert!(parse_id(&id).is_ok());
        for bad in [
            "../etc",
            "/etc/passwd",
            "",
            "a\0b",
            &id.to_uppercase(),
            &id.replace('-', ""),
            &format!("{id}/.."),
            &format!("../{id}"),
            "00000000-0000-1000-8000-000000000000",
        ] {
            assert!(
                matches!(parse_id(bad), Err(ExecError::UnknownExec(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn upload_paths_stay_in_the_workspace() {
        assert_eq!(confined("a/./b.txt").unwrap(), PathBuf::from("a/b.txt"));
        for bad in [
            "../x",
            "/etc/passwd",
            "a/../../x",
            "",
            ".",
            "a\0b",
            ".tmp/x",
        ] {
            assert!(matches!(confined(bad), Err(ExecError::BadPath(_))), "{bad}");
        }
    }

    #[test]
    fn a_workspace_belongs_to_its_profile_and_uploads_never_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspaces::new(dir.path().to_path_buf(), 4);
        let id = ws.open("a", false).unwrap().hyphenated().to_string();
        assert_eq!(ws.upload("a", &id, "d/x.txt", b"hi").unwrap(), 2);
        assert!(matches!(
            ws.upload("b", &id, "x.txt", b"hi"),
            Err(ExecError::UnknownExec(_))
        ));
        let work = dir.path().join("a").join(&id).join("work");
        std::os::unix::fs::symlink("/etc", work.join("link")).unwrap();
        assert!(matches!(
            ws.upload("a", &id, "link/passwd", b"x"),
            Err(ExecError::BadPath(_))
        ));
        let lease = ws.lease("a", &id).unwrap();
        assert!(matches!(ws.lease("a", &id), Err(ExecError::Busy(_))));
        drop(lease);
        assert!(ws.close("a", &id).unwrap());
        assert!(matches!(ws.close("a", &id), Err(ExecError::UnknownExec(_))));
    }
}
