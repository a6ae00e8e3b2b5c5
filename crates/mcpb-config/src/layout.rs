//! The runtime directory tree. Everything the broker writes at run time lives under one root,
//! never in the repository or the current directory.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Default root below the home directory.
pub const DEFAULT_ROOT: &str = "mcp/mcp-broker";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeLayout {
    pub root: PathBuf,
}

const SUBDIRS: &[&str] = &[
    "logs",
    "run",
    "secrets",
    "sockets",
    "state",
    "state/upstreams",
    // The dry runs' notes: an older install made them 0755; `ensure` tightens them.
    "state/renders",
];

impl RuntimeLayout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }
    pub fn secrets_dir(&self) -> PathBuf {
        self.root.join("secrets")
    }
    pub fn sockets_dir(&self) -> PathBuf {
        self.root.join("sockets")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }
    /// The optional search model's weights (`scripts/install-minilm`).
    pub fn minilm_dir(&self) -> PathBuf {
        self.root.join("models/all-MiniLM-L6-v2")
    }
    /// Code-run workspaces, one directory per profile.
    pub fn exec_dir(&self) -> PathBuf {
        self.state_dir().join("exec")
    }

    pub fn upstream_state_dir(&self, upstream: &str) -> PathBuf {
        self.state_dir().join("upstreams").join(upstream)
    }
    /// Each upstream's cached tool list.
    pub fn catalog_dir(&self) -> PathBuf {
        self.state_dir().join("catalog")
    }
    pub fn pins_path(&self) -> PathBuf {
        self.state_dir().join("pins.json")
    }
    /// Oversized results kept for broker_get_artifact.
    pub fn artifacts_dir(&self) -> PathBuf {
        self.run_dir().join("artifacts")
    }
    pub fn socket_path(&self) -> PathBuf {
        self.sockets_dir().join("broker.sock")
    }
    pub fn lock_path(&self) -> PathBuf {
        self.run_dir().join("daemon.lock")
    }
    pub fn pid_path(&self) -> PathBuf {
        self.run_dir().join("daemon.pid")
    }
    pub fn log_path(&self) -> PathBuf {
        self.logs_dir().join("daemon.log")
    }
    /// One JSON line per tool call.
    pub fn audit_path(&self) -> PathBuf {
        self.logs_dir().join("audit.jsonl")
    }
    pub fn config_path(&self) -> PathBuf {
        self.root.join("broker.yaml")
    }

    /// Where client files are kept as they were before the broker changed them (secrets
    /// included): outside the root, so deleting the runtime dir cannot take a user's servers
    /// and keys with it: `$XDG_STATE_HOME/mcp-broker/backups/<root>` (else
    /// `~/.local/state/…`), one folder per runtime root, so one install's uninstall never puts
    /// back another's changes. An older install's `backups/` under the root is moved there on
    /// first use, merged with what is there; what cannot be moved stays in use where it is.
    pub fn backups_dir(&self) -> PathBuf {
        let old = self.root.join("backups");
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let state = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| home.map(|h| h.join(".local/state")));
        let Some(state) = state else {
            return old;
        };
        // The root's path as one folder name: `%` and `/` escaped, so two roots never share.
        let key = self
            .root
            .to_string_lossy()
            .replace('%', "%25")
            .replace('/', "%2F");
        let new = state.join("mcp-broker/backups").join(key);
        if fs::symlink_metadata(&old).is_ok_and(|m| m.is_dir()) && merge_into(&old, &new).is_err() {
            return old;
        }
        new
    }

    /// Creates the tree with owner-only permissions, tightening directories that already exist:
    /// the socket and secrets must never sit in a directory other users can enter.
    pub fn ensure(&self) -> io::Result<()> {
        create_private_dir(&self.root)?;
        for sub in SUBDIRS {
            create_private_dir(&self.root.join(sub))?;
        }
        Ok(())
    }
}

/// Moves what `from` holds into `to` (made 0700 when missing), folder by folder: an entry `to`
/// has already stays where it is in `from`. `from` goes when it is left empty.
fn merge_into(from: &Path, to: &Path) -> io::Result<()> {
    if !to.exists() {
        if let Some(parent) = to.parent() {
            create_private_dir(parent)?;
        }
        return fs::rename(from, to);
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let is_dir = fs::symlink_metadata(&src).is_ok_and(|m| m.is_dir());
        if !dst.exists() {
            fs::rename(&src, &dst)?;
        } else if is_dir && fs::symlink_metadata(&dst).is_ok_and(|m| m.is_dir()) {
            merge_into(&src, &dst)?;
        }
    }
    // Anything left (an entry both have) keeps `from` in place.
    let _ = fs::remove_dir(from);
    Ok(())
}

/// Makes `path` (and its parents) a directory only this user may enter (0700), refusing one that
/// another user owns.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    // Recursive creation takes an existing directory as done; a file in the way is an error.
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    let meta = fs::metadata(path)?;
    // Like ssh with a foreign ~/.ssh: a directory someone else owns could be swapped or read
    // by them whatever its mode, so it is refused, not tightened.
    let me = rustix::process::getuid().as_raw();
    if std::os::unix::fs::MetadataExt::uid(&meta) != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is owned by uid {}, not by this user (uid {me}); refusing to keep the broker's sockets and secrets there",
                path.display(),
                std::os::unix::fs::MetadataExt::uid(&meta)
            ),
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Expands a leading `~/` against the home directory.
pub fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if path == "~" => home
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(path)),
        _ => PathBuf::from(path),
    }
}

/// Writes `bytes` to `path` so that a reader sees the old file or the new one, never half of
/// one: a temporary file beside it (0600, like every file the broker writes), synced, then
/// renamed over it. The directory is created when missing. The temporary file is named
/// `.<file name>.<random>.tmp`, so one a crash left behind says whose it was and
/// `remove_stale_temps` can find it.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic(path, bytes, 0o600)
}

/// `write_private` with the file's permission bits `mode` (a client's own file keeps its own).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    // Directories it makes are the user's alone, like the files.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // Cut, so a file name near the system's limit still leaves room for the additions.
    let mut name: String = path
        .file_name()
        .map(|n| n.to_string_lossy().chars().take(64).collect())
        .unwrap_or_default();
    while name.len() > 128 {
        name.pop();
    }
    let mut file = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)?;
    file.as_file()
        .set_permissions(fs::Permissions::from_mode(mode & 0o7777))?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

const TEMP_SUFFIX: &str = ".tmp";

/// Whether `name` has the shape of `write_private`'s temporary files: `.<name>.` then six
/// letters or digits (tempfile's random part), then `.tmp`.
fn is_temp_name(name: &str) -> bool {
    let Some(stem) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(TEMP_SUFFIX))
    else {
        return false;
    };
    match stem.rsplit_once('.') {
        Some((target, random)) => {
            !target.is_empty()
                && random.len() == 6
                && random.bytes().all(|b| b.is_ascii_alphanumeric())
        }
        None => false,
    }
}

/// Removes from `dir` the temporary files of `write_private` that are older than `age`: what a
/// write left when the process died between creating and renaming. Younger ones may belong to a
/// write in progress and stay. Returns how many were removed.
pub fn remove_stale_temps(dir: &Path, age: std::time::Duration) -> usize {
    // The directory itself, never one a link points to.
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let ours = name.to_str().is_some_and(is_temp_name);
        // The entry itself, never what a link points to.
        let stale = ours
            && entry.metadata().is_ok_and(|m| {
                m.is_file()
                    && m.modified()
                        .ok()
                        .and_then(|t| now.duration_since(t).ok())
                        .is_some_and(|d| d > age)
            });
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// How many rotated copies of a log are kept (`.1` newest … `.3` oldest).
pub const LOG_KEEP: u32 = 3;

/// `path.N`: the Nth rotated copy of a log.
pub fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Moves a log to `.1`, shifting the older copies up to `.LOG_KEEP` (the oldest goes): the
/// one rotation of the daemon's log and the audit log.
pub fn rotate(path: &Path) -> std::io::Result<()> {
    for n in (1..LOG_KEEP).rev() {
        let from = numbered(path, n);
        if from.exists() {
            std::fs::rename(&from, numbered(path, n + 1))?;
        }
    }
    std::fs::rename(path, numbered(path, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_backups_merge_into_the_new_place_and_none_is_lost() {
        let tmp = tempfile::tempdir().unwrap();
        let (old, new) = (tmp.path().join("old"), tmp.path().join("state/new"));
        for (root, file) in [(&old, "claude-code/a1/1.json"), (&old, "gemini/b2/1.json")] {
            fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
            fs::write(root.join(file), "old").unwrap();
        }
        fs::create_dir_all(new.join("claude-code/a1")).unwrap();
        fs::write(new.join("claude-code/a1/2.json"), "new").unwrap();
        fs::write(new.join("claude-code/a1/1.json"), "kept").unwrap();
        merge_into(&old, &new).unwrap();
        assert_eq!(
            fs::read_to_string(new.join("gemini/b2/1.json")).unwrap(),
            "old"
        );
        assert_eq!(
            fs::read_to_string(new.join("claude-code/a1/2.json")).unwrap(),
            "new"
        );
        // One both have stays in each: nothing is overwritten, nothing removed.
        assert_eq!(
            fs::read_to_string(new.join("claude-code/a1/1.json")).unwrap(),
            "kept"
        );
        assert_eq!(
            fs::read_to_string(old.join("claude-code/a1/1.json")).unwrap(),
            "old"
        );
        assert!(!old.join("gemini").exists());
        // Where the new place is missing, the old one is moved whole.
        let other = tmp.path().join("elsewhere/backups");
        merge_into(&old, &other).unwrap();
        assert!(!old.exists() && other.join("claude-code/a1/1.json").is_file());
    }

    #[test]
    fn only_old_temporary_files_of_interrupted_writes_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write_private(&dir.join("list.json"), b"{}").unwrap();
        let names = |dir: &Path| -> Vec<String> {
            let mut v: Vec<String> = fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(dir), ["list.json"], "a finished write leaves nothing");
        let longest = "n".repeat(255);
        write_private(&dir.join(&longest), b"x").unwrap();
        fs::remove_file(dir.join(&longest)).unwrap();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let old = |name: &str| {
            let f = fs::File::create(dir.join(name)).unwrap();
            f.set_modified(hour_ago).unwrap();
        };
        old(".list.json.a1B2c3.tmp");
        old(".settings.json");
        old("notes.tmp");
        old(".user-notes.tmp");
        fs::File::create(dir.join(".list.json.x9Y8z7.tmp")).unwrap();
        fs::create_dir(dir.join(".old.d.tmp")).unwrap();
        let ten_minutes = std::time::Duration::from_secs(600);
        assert_eq!(remove_stale_temps(dir, ten_minutes), 1);
        assert_eq!(
            names(dir),
            [
                ".list.json.x9Y8z7.tmp",
                ".old.d.tmp",
                ".settings.json",
                ".user-notes.tmp",
                "list.json",
                "notes.tmp"
            ],
            "a write in progress, a directory and other files stay"
        );
        assert_eq!(remove_stale_temps(&dir.join("missing"), ten_minutes), 0);
        // A directory that is a link is not swept.
        let other = tempfile::tempdir().unwrap();
        let f = fs::File::create(other.path().join(".list.json.q1W2e3.tmp")).unwrap();
        f.set_modified(hour_ago).unwrap();
        std::os::unix::fs::symlink(other.path(), dir.join("linked")).unwrap();
        assert_eq!(remove_stale_temps(&dir.join("linked"), ten_minutes), 0);
        assert!(other.path().join(".list.json.q1W2e3.tmp").exists());
    }

    #[test]
    fn a_root_owned_by_someone_else_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir(&root).unwrap();
        let me = rustix::process::getuid().as_raw();
        let foreign = if me == 0 {
            // Root can hand the directory to another user.
            rustix::fs::chown(&root, Some(rustix::fs::Uid::from_raw(65534)), None).unwrap();
            root.clone()
        } else {
            // Anyone else finds a directory root owns.
            std::path::PathBuf::from("/")
        };
        let err = create_private_dir(&foreign).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(err.to_string().contains("owned by uid"), "{err}");
    }

    #[test]
    fn creates_every_dir_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = RuntimeLayout::new(tmp.path().join("root"));
        layout.ensure().unwrap();
        for sub in SUBDIRS {
            let mode = fs::metadata(layout.root.join(sub))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700, "{sub}");
        }
        // An existing loose directory is tightened.
        fs::set_permissions(layout.sockets_dir(), fs::Permissions::from_mode(0o755)).unwrap();
        layout.ensure().unwrap();
        let mode = fs::metadata(layout.sockets_dir())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    /// Where each file lives is a contract: docs, service units and earlier installs name
    /// these paths.
    #[test]
    fn every_path_has_its_documented_place() {
        let l = RuntimeLayout::new("/r");
        let paths: Vec<PathBuf> = vec![
            l.logs_dir(),
            l.run_dir(),
            l.secrets_dir(),
            l.sockets_dir(),
            l.state_dir(),
            l.minilm_dir(),
            l.exec_dir(),
            l.upstream_state_dir("gh"),
            l.catalog_dir(),
            l.pins_path(),
            l.artifacts_dir(),
            l.socket_path(),
            l.lock_path(),
            l.pid_path(),
            l.log_path(),
            l.audit_path(),
            l.config_path(),
        ];
        let expected = [
            "/r/logs",
            "/r/run",
            "/r/secrets",
            "/r/sockets",
            "/r/state",
            "/r/models/all-MiniLM-L6-v2",
            "/r/state/exec",
            "/r/state/upstreams/gh",
            "/r/state/catalog",
            "/r/state/pins.json",
            "/r/run/artifacts",
            "/r/sockets/broker.sock",
            "/r/run/daemon.lock",
            "/r/run/daemon.pid",
            "/r/logs/daemon.log",
            "/r/logs/audit.jsonl",
            "/r/broker.yaml",
        ];
        assert_eq!(paths, expected.map(PathBuf::from));
    }

    #[test]
    fn a_file_where_a_directory_belongs_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("root");
        fs::write(&file, "x").unwrap();
        assert!(create_private_dir(&file).is_err());
        assert!(create_private_dir(&file.join("below")).is_err());
        let dir = tmp.path().join("dir");
        create_private_dir(&dir).unwrap();
        create_private_dir(&dir).unwrap();
    }

    #[test]
    fn expands_tilde() {
        let home = Path::new("/home/u");
        assert_eq!(
            expand_home("~/x/y", Some(home)),
            PathBuf::from("/home/u/x/y")
        );
        assert_eq!(expand_home("/abs", Some(home)), PathBuf::from("/abs"));
        assert_eq!(expand_home("~/x", None), PathBuf::from("~/x"));
    }
}
