//! Workspaces: `<root>/<profile>/<exec id>/work`, one per exec session. An exec id is a UUID v4
//! in its canonical form and nothing else; it is checked before any path is built, and a
//! workspace is found only under its own profile's directory, so another profile's id is as
//! unknown as a made-up one. Uploads are confined to the workspace: relative paths of plain
//! components, written without following any link.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use uuid::Uuid;

use crate::ExecError;

mod paths;

use paths::profile_dir;
pub use paths::{confined, parse_id};

/// Largest single upload.
pub const MAX_UPLOAD_BYTES: usize = 8 << 20;
const WORK: &str = "work";
const OUT: &str = "work.out";
const PERSIST: &str = "persist";

pub struct Workspaces {
    root: PathBuf,
    /// The host ids the jail runs as; the workspace must be theirs.
    owner: (u32, u32),
    max_per_profile: u32,
    persisted: Persisted,
    busy: Arc<Mutex<HashSet<Uuid>>>,
    /// When the daemon is root: the run ids in use (slots of RUN_IDS_BASE), one per lease, so
    /// that concurrent runs never share a host user (its signals, /proc, per-user limits).
    slots: Option<Arc<Mutex<std::collections::BTreeSet<u32>>>>,
}

/// The first host uid (and gid) runs of a root daemon get: far above any real user's.
pub const RUN_IDS_BASE: u32 = 2_000_000_000;
/// How many runs of a root daemon may hold an id at once.
pub const RUN_IDS: u32 = 65_536;

/// What persisted workspaces may take: their own count per profile, a time since last use
/// after which they go, and a disk budget shared by a profile's persisted workspaces.
#[derive(Debug, Clone, Copy)]
pub struct Persisted {
    pub max: u32,
    pub ttl: Duration,
    pub disk_bytes: u64,
}

impl Default for Persisted {
    fn default() -> Self {
        Self {
            max: 16,
            ttl: Duration::from_secs(7 * 24 * 3600),
            disk_bytes: 1 << 30,
        }
    }
}

/// One workspace as `exec list` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkspaceInfo {
    /// The profile's directory name (the profile itself when it is a plain word).
    pub profile: String,
    pub exec_id: String,
    pub persisted: bool,
    pub bytes: u64,
    /// Seconds since the workspace was last opened, uploaded to or run.
    pub idle_secs: u64,
    /// A run holds it (or held it when a daemon stopped mid-run).
    pub running: bool,
}

/// Entries a workspace's size is counted over before it is taken as full.
const MAX_COUNTED_ENTRIES: usize = 20_000;

/// Bytes of the regular files under `dir`, never following a link; `u64::MAX` past
/// MAX_COUNTED_ENTRIES entries (a tree that large is over any quota).
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut seen = 0usize;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_COUNTED_ENTRIES {
                return u64::MAX;
            }
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                total = total.saturating_add(m.len());
            }
        }
    }
    total
}

/// When the workspace in `dir` was last used: its marker's time for a persisted one.
fn last_used(dir: &Path) -> SystemTime {
    std::fs::metadata(dir.join(PERSIST))
        .or_else(|_| std::fs::metadata(dir))
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Marks a persisted workspace as used now (its time to live starts again).
fn touch(dir: &Path) {
    let marker = dir.join(PERSIST);
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&marker) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// A host uid (and gid) held for one jail when the daemon is root, so that no two jails at
/// once share one; given back when dropped (after the jail's processes are gone).
pub struct RunIds {
    slot: u32,
    slots: Arc<Mutex<std::collections::BTreeSet<u32>>>,
}

impl RunIds {
    fn reserve(slots: &Arc<Mutex<std::collections::BTreeSet<u32>>>) -> Option<Self> {
        let mut taken = slots.lock();
        let free = (0..RUN_IDS).find(|s| !taken.contains(s))?;
        taken.insert(free);
        Some(Self {
            slot: free,
            slots: slots.clone(),
        })
    }

    pub fn ids(&self) -> (u32, u32) {
        (RUN_IDS_BASE + self.slot, RUN_IDS_BASE + self.slot)
    }
}

impl Drop for RunIds {
    fn drop(&mut self) {
        self.slots.lock().remove(&self.slot);
    }
}

/// One run's hold on a workspace: no second run uses it meanwhile.
pub struct Lease {
    id: Uuid,
    dir: PathBuf,
    busy: Arc<Mutex<HashSet<Uuid>>>,
    /// The ids the run's jail user maps to when the daemon is not root.
    owner: (u32, u32),
    /// The run's own host ids when the daemon is root; a jail started ahead of the run brings
    /// its own, which the lease then adopts.
    run_ids: Mutex<Option<RunIds>>,
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

    /// The host uid and gid the run's jail user maps to.
    pub fn ids(&self) -> (u32, u32) {
        self.run_ids.lock().as_ref().map_or(self.owner, RunIds::ids)
    }

    /// The run's own host uid when the daemon is root (each concurrent run has its own).
    pub fn run_uid(&self) -> Option<u32> {
        self.run_ids.lock().as_ref().map(|r| r.ids().0)
    }

    /// Fresh host ids for another jail, when the daemon is root (None otherwise, or when
    /// every id is held).
    pub fn reserve_run_ids(&self) -> Option<RunIds> {
        let slots = self.run_ids.lock().as_ref().map(|r| r.slots.clone())?;
        RunIds::reserve(&slots)
    }

    /// Makes the run use `ids` (those of the jail it takes over): its workspace and the
    /// directory that receives it change hands. Returns the ids it had, for the caller to keep
    /// until the take-over is done (or to adopt again if it fails). On failure the tree is
    /// handed back to the ids it had, and `ids` come back with the error.
    #[allow(clippy::result_large_err)]
    pub fn adopt(&self, ids: RunIds) -> Result<Option<RunIds>, (ExecError, RunIds)> {
        let chown = |to: (u32, u32)| {
            chown_tree(&self.work(), to)?;
            chown_tree(&self.out(), to)
        };
        if let Err(e) = chown(ids.ids()) {
            let _ = chown(self.ids());
            return Err((e, ids));
        }
        Ok(self.run_ids.lock().replace(ids))
    }
}

/// Makes every entry under `dir` (and `dir`) belong to `ids`, never following a link.
fn chown_tree(dir: &Path, ids: (u32, u32)) -> Result<(), ExecError> {
    let set = |p: &Path| {
        rustix::fs::chownat(
            rustix::fs::CWD,
            p,
            Some(rustix::process::Uid::from_raw(ids.0)),
            Some(rustix::process::Gid::from_raw(ids.1)),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| ExecError::Io(format!("{}: {e}", p.display())))
    };
    set(dir)?;
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        for e in
            std::fs::read_dir(&d).map_err(|e| ExecError::Io(format!("{}: {e}", d.display())))?
        {
            let e = e.map_err(|e| ExecError::Io(e.to_string()))?;
            seen += 1;
            if seen > MAX_COUNTED_ENTRIES {
                return Err(ExecError::Io(format!(
                    "{}: more than {MAX_COUNTED_ENTRIES} entries",
                    dir.display()
                )));
            }
            let path = e.path();
            set(&path)?;
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                stack.push(path);
            }
        }
    }
    Ok(())
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
            persisted: Persisted::default(),
            busy: Arc::new(Mutex::new(HashSet::new())),
            slots: rustix::process::geteuid()
                .is_root()
                .then(|| Arc::new(Mutex::new(std::collections::BTreeSet::new()))),
        }
    }

    /// The rules for persisted workspaces (default: 16 a profile, 7 days, 1 GiB).
    pub fn with_persisted(mut self, persisted: Persisted) -> Self {
        self.persisted = persisted;
        self
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

    /// The workspaces of `profile`: (id, directory, persisted).
    fn of_profile(&self, profile: &str) -> Vec<(Uuid, PathBuf, bool)> {
        let base = self.root.join(profile_dir(profile));
        let Ok(entries) = std::fs::read_dir(&base) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let id = parse_id(name.to_str()?).ok()?;
                let dir = e.path();
                let persisted = dir.join(PERSIST).exists();
                Some((id, dir, persisted))
            })
            .collect()
    }

    /// A new, empty workspace of `profile`. Open and persisted workspaces are counted apart, so
    /// kept workspaces never stop new sessions; expired persisted ones go first.
    pub fn open(&self, profile: &str, persist: bool) -> Result<Uuid, ExecError> {
        self.expire(Some(profile));
        let mine = self.of_profile(profile);
        if persist {
            let kept = mine.iter().filter(|w| w.2).count();
            if kept >= self.persisted.max as usize {
                return Err(ExecError::TooManyPersisted(self.persisted.max));
            }
        } else {
            let open = mine.iter().filter(|w| !w.2).count();
            if open >= self.max_per_profile as usize {
                return Err(ExecError::TooMany(self.max_per_profile));
            }
        }
        self.create(profile, persist)
    }

    /// A workspace for one run, removed by its caller when the run ends: it takes no slot (a
    /// profile's open and persisted workspaces never stop one-shot runs).
    pub fn open_one_shot(&self, profile: &str) -> Result<Uuid, ExecError> {
        self.create(profile, false)
    }

    fn create(&self, profile: &str, persist: bool) -> Result<Uuid, ExecError> {
        use std::os::unix::fs::DirBuilderExt;
        // Private wherever the root is (`broker.exec.workspace_root` may be outside the
        // runtime dir): another user reads no program and no result.
        let private = |path: &Path| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(Self::io(path))
        };
        let base = self.root.join(profile_dir(profile));
        private(&base)?;
        let id = Uuid::new_v4();
        let dir = self.dir(profile, id);
        let work = dir.join(WORK);
        private(&work)?;
        if persist {
            std::fs::write(dir.join(PERSIST), b"").map_err(Self::io(&dir))?;
        }
        self.own(&work)?;
        Ok(id)
    }

    /// Removes the persisted workspaces unused for longer than their time to live (of one
    /// profile, or of all); returns how many went. A workspace a run holds stays.
    pub fn expire(&self, profile: Option<&str>) -> usize {
        let now = SystemTime::now();
        self.remove_where(profile, |w| {
            w.persisted
                && now
                    .duration_since(last_used(&w.dir))
                    .is_ok_and(|idle| idle > self.persisted.ttl)
        })
    }

    /// Removes every workspace `keep` refuses that no run of this daemon holds.
    fn remove_where(&self, profile: Option<&str>, gone: impl Fn(&Found) -> bool) -> usize {
        let mut n = 0;
        for w in self.found(profile) {
            if self.busy.lock().contains(&w.id) || !gone(&w) {
                continue;
            }
            if std::fs::remove_dir_all(&w.dir).is_ok() {
                n += 1;
            }
        }
        n
    }

    /// Every workspace under the root (or one profile's).
    fn found(&self, profile: Option<&str>) -> Vec<Found> {
        let profiles: Vec<PathBuf> = match profile {
            Some(p) => vec![self.root.join(profile_dir(p))],
            None => std::fs::read_dir(&self.root)
                .map(|r| r.flatten().map(|e| e.path()).collect())
                .unwrap_or_default(),
        };
        let mut out = Vec::new();
        for base in profiles {
            let Ok(entries) = std::fs::read_dir(&base) else {
                continue;
            };
            let profile = base
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            for e in entries.flatten() {
                let Some(id) = e.file_name().to_str().and_then(|n| parse_id(n).ok()) else {
                    continue;
                };
                let dir = e.path();
                out.push(Found {
                    profile: profile.clone(),
                    id,
                    persisted: dir.join(PERSIST).exists(),
                    dir,
                });
            }
        }
        out
    }

    /// At start, no run is under way: what a run of a daemon that died mid-run left (its
    /// `work.out`) goes, so the workspace is neither shown as running nor held. Returns how
    /// many were cleared.
    pub fn clear_dead_runs(&self) -> usize {
        self.found(None)
            .iter()
            .filter(|w| std::fs::remove_dir_all(w.dir.join(OUT)).is_ok())
            .count()
    }

    /// Every workspace, for `exec list`.
    pub fn list(&self, profile: Option<&str>) -> Vec<WorkspaceInfo> {
        let now = SystemTime::now();
        let mut out: Vec<WorkspaceInfo> = self
            .found(profile)
            .into_iter()
            .map(|w| WorkspaceInfo {
                exec_id: w.id.hyphenated().to_string(),
                persisted: w.persisted,
                bytes: tree_bytes(&w.dir.join(WORK)),
                idle_secs: now
                    .duration_since(last_used(&w.dir))
                    .map_or(0, |d| d.as_secs()),
                running: self.busy.lock().contains(&w.id) || w.dir.join(OUT).exists(),
                profile: w.profile,
            })
            .collect();
        out.sort_by(|a, b| (&a.profile, a.idle_secs).cmp(&(&b.profile, b.idle_secs)));
        out
    }

    /// `exec prune`: the expired persisted workspaces, or with `all` every workspace no run
    /// holds; returns how many went.
    pub fn prune(&self, profile: Option<&str>, all: bool) -> usize {
        if !all {
            return self.expire(profile);
        }
        self.remove_where(profile, |w| !w.dir.join(OUT).exists())
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
        touch(&dir);
        let run_ids = match &self.slots {
            None => None,
            Some(slots) => {
                let Some(ids) = RunIds::reserve(slots) else {
                    self.busy.lock().remove(&uuid);
                    return Err(ExecError::Io(format!(
                        "{RUN_IDS} runs hold a user id already; wait for one to end"
                    )));
                };
                Some(ids)
            }
        };
        let lease = Lease {
            id: uuid,
            dir,
            busy: self.busy.clone(),
            owner: self.owner,
            run_ids: Mutex::new(run_ids),
        };
        let out = lease.out();
        if out.exists() {
            std::fs::remove_dir_all(&out).map_err(Self::io(&out))?;
        }
        std::fs::create_dir(&out).map_err(Self::io(&out))?;
        self.own(&out)?;
        if lease.run_uid().is_some() {
            // The run's own user must read its workspace and write what it leaves.
            let ids = lease.ids();
            chown_tree(&lease.work(), ids)?;
            chown_tree(&out, ids)?;
        }
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

    /// Writes `content` at `path` in the workspace; returns the bytes written. Refused before
    /// anything is written when the workspace would go past `quota` bytes (the run's disk_kb,
    /// which its jail could not hold anyway), or a persisted one would take its profile's
    /// persisted workspaces past their shared budget.
    pub fn upload(
        &self,
        profile: &str,
        id: &str,
        path: &str,
        content: &[u8],
        quota: u64,
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
        let replaced = std::fs::symlink_metadata(dir.join(WORK).join(&rel))
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map_or(0, |m| m.len());
        let grows = (content.len() as u64).saturating_sub(replaced);
        let used = tree_bytes(&dir.join(WORK));
        if used.saturating_add(grows) > quota {
            return Err(ExecError::Quota(format!(
                "{path}: the workspace holds {} KiB and this upload would take it past its disk quota ({} KiB)",
                used.min(u64::MAX / 2) / 1024,
                quota / 1024
            )));
        }
        if dir.join(PERSIST).exists() {
            let kept: u64 = self
                .of_profile(profile)
                .iter()
                .filter(|w| w.2)
                .map(|w| tree_bytes(&w.1.join(WORK)))
                .fold(0, u64::saturating_add);
            if kept.saturating_add(grows) > self.persisted.disk_bytes {
                return Err(ExecError::Quota(format!(
                    "{path}: this profile's persisted workspaces hold {} MiB and this upload would take them past their budget ({} MiB)",
                    kept.min(u64::MAX / 2) >> 20,
                    self.persisted.disk_bytes >> 20
                )));
            }
            touch(&dir);
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

    /// Removes the workspace unless it was opened with `persist` (and `discard` is not set);
    /// returns whether it was removed.
    pub fn close(&self, profile: &str, id: &str, discard: bool) -> Result<bool, ExecError> {
        let (uuid, dir) = self.existing(profile, id)?;
        if self.busy.lock().contains(&uuid) {
            return Err(ExecError::Busy(id.to_string()));
        }
        if dir.join(PERSIST).exists() && !discard {
            touch(&dir);
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

/// A workspace found on disk.
struct Found {
    profile: String,
    id: Uuid,
    dir: PathBuf,
    persisted: bool,
}

#[cfg(test)]
mod tests;
