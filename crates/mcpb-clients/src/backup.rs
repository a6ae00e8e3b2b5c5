//! Backups of client files before the broker changes them: the old bytes (or the fact that
//! there was no file) and what the broker wrote in their place, one list per file in
//! `backups/<client>/<file id>/`, the newest N kept. A rollback puts the newest back only if
//! the file is still what the broker wrote: later edits (the client's own, a person's) are
//! never lost to it.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::ClientsError;

/// Backups kept per client.
const KEEP: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// `<unix seconds>-<n>`: sorts by age.
    pub name: String,
    /// The client file it was taken of.
    pub path: PathBuf,
    /// Whether the file existed (a rollback of a new file removes it).
    pub existed: bool,
    /// `sha256:` of what the broker wrote in its place.
    pub after: String,
    /// Put back by taking the broker's change out of a file the client changed since, not
    /// byte for byte.
    pub merged: bool,
}

pub struct Backups {
    dir: PathBuf,
}

impl Backups {
    /// Backups under `root` (the runtime's `backups/` dir) of `client`'s file `path`.
    pub fn new(root: &Path, client: crate::Client, path: &Path) -> Self {
        let id = crate::sha256(path.as_os_str().as_encoded_bytes());
        let id = id.trim_start_matches("sha256:");
        Self {
            dir: root.join(client.name()).join(&id[..16]),
        }
    }

    /// Keeps `before` (the file's bytes, `None` when it does not exist) of `path`, which the
    /// broker is about to replace with bytes whose hash is `after`.
    pub fn take(
        &self,
        path: &Path,
        before: Option<&[u8]>,
        after: &str,
        now_unix: u64,
    ) -> Result<Backup, ClientsError> {
        // The backups hold the clients' files, secrets and all: the user's alone.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&self.dir)
            .map_err(|e| ClientsError::io(&self.dir, e))?;
        // After the newest of this second, never in a gap pruning left: names sort by age.
        let second = format!("{now_unix:012}-");
        let next = self
            .list()
            .iter()
            .filter_map(|b| b.name.strip_prefix(&second)?.parse::<u32>().ok())
            .max()
            .map_or(0, |n| n + 1);
        let name = format!("{second}{next:04}");
        if let Some(bytes) = before {
            let data = self.dir.join(format!("{name}.bak"));
            mcpb_config::layout::write_private(&data, bytes)
                .map_err(|e| ClientsError::io(&data, e))?;
        }
        let manifest = json!({"path": path, "existed": before.is_some(), "after": after,
            "taken_at_unix": now_unix});
        let file = self.dir.join(format!("{name}.json"));
        mcpb_config::layout::write_private(&file, manifest.to_string().as_bytes())
            .map_err(|e| ClientsError::io(&file, e))?;
        self.prune();
        Ok(Backup {
            name,
            path: path.to_path_buf(),
            existed: before.is_some(),
            after: after.to_string(),
            merged: false,
        })
    }

    /// The files of `client` with backups under `root`, each once, in path order: where to
    /// look when the file at hand has none (a project's file is another folder's).
    pub fn files(root: &Path, client: crate::Client) -> Vec<PathBuf> {
        let Ok(dirs) = std::fs::read_dir(root.join(client.name())) else {
            return Vec::new();
        };
        let mut out: Vec<PathBuf> = dirs
            .flatten()
            .filter_map(|d| Self { dir: d.path() }.list().pop().map(|b| b.path))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Every backup, oldest first.
    pub fn list(&self) -> Vec<Backup> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<Backup> = dir
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.strip_suffix(".json")?.to_string();
                let text = std::fs::read_to_string(e.path()).ok()?;
                let m: serde_json::Value = serde_json::from_str(&text).ok()?;
                Some(Backup {
                    name,
                    path: PathBuf::from(m["path"].as_str()?),
                    existed: m["existed"].as_bool()?,
                    after: m["after"].as_str().unwrap_or("").to_string(),
                    merged: false,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Keeps what the broker wrote over backup `name`: a later rollback of a file the client
    /// changed since takes only the broker's change back out of it.
    pub fn keep_written(&self, name: &str, bytes: &[u8]) -> Result<(), ClientsError> {
        let data = self.dir.join(format!("{name}.new"));
        mcpb_config::layout::write_private(&data, bytes).map_err(|e| ClientsError::io(&data, e))
    }

    /// The bytes backup `name` kept (`None`: there was no file, or no such backup).
    pub fn bytes(&self, name: &str) -> Option<Vec<u8>> {
        std::fs::read(self.dir.join(format!("{name}.bak"))).ok()
    }

    fn prune(&self) {
        let all = self.list();
        for old in &all[..all.len().saturating_sub(KEEP)] {
            let _ = std::fs::remove_file(self.dir.join(format!("{}.json", old.name)));
            let _ = std::fs::remove_file(self.dir.join(format!("{}.bak", old.name)));
            let _ = std::fs::remove_file(self.dir.join(format!("{}.new", old.name)));
        }
    }

    /// Puts a backup back (the newest when `name` is `None`): the old bytes, or no file when
    /// there was none; the backup is used up. Refused when the file is no longer what the
    /// broker wrote, unless `force`.
    pub fn restore(
        &self,
        name: Option<&str>,
        client: &str,
        force: bool,
    ) -> Result<Backup, ClientsError> {
        let all = self.list();
        let found = match name {
            Some(n) => all.iter().find(|b| b.name == n),
            None => all.last(),
        };
        let Some(b) = found.cloned() else {
            return Err(ClientsError::NoBackup {
                client: client.to_string(),
                name: name.unwrap_or("(any)").to_string(),
            });
        };
        let now = match std::fs::read(&b.path) {
            Ok(bytes) => Some(crate::sha256(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ClientsError::io(&b.path, e)),
        };
        if !force && now.as_deref() != Some(b.after.as_str()) {
            // The client (or a person) changed the file since: only the broker's change goes.
            let text = self
                .take_back(&b, client)
                .map_err(|why| ClientsError::Changed {
                    path: b.path.clone(),
                    backup: b.name.clone(),
                    why,
                })?;
            write_keeping_mode(&b.path, text.as_bytes())?;
            self.forget(&b.name);
            return Ok(Backup { merged: true, ..b });
        }
        if b.existed {
            let data = self.dir.join(format!("{}.bak", b.name));
            let bytes = std::fs::read(&data).map_err(|e| ClientsError::io(&data, e))?;
            write_keeping_mode(&b.path, &bytes)?;
        } else if b.path.exists() {
            std::fs::remove_file(&b.path).map_err(|e| ClientsError::io(&b.path, e))?;
        }
        self.forget(&b.name);
        Ok(b)
    }

    fn forget(&self, name: &str) {
        for ext in ["json", "bak", "new"] {
            let _ = std::fs::remove_file(self.dir.join(format!("{name}.{ext}")));
        }
    }

    /// The file now, with the broker's change of backup `b` taken out; why not when the
    /// written bytes were not kept, the file is gone, or a value the broker changed changed
    /// again.
    fn take_back(&self, b: &Backup, client: &str) -> Result<String, String> {
        let client = crate::Client::parse(client).ok_or("an unknown client")?;
        let written = std::fs::read_to_string(self.dir.join(format!("{}.new", b.name)))
            .ok()
            .filter(|w| crate::sha256(w.as_bytes()) == b.after)
            .ok_or("what the broker wrote was not kept")?;
        let before = if b.existed {
            self.bytes(&b.name)
                .and_then(|v| String::from_utf8(v).ok())
                .ok_or("the backup's bytes are missing")?
        } else {
            String::new()
        };
        let current =
            std::fs::read_to_string(&b.path).map_err(|e| format!("it cannot be read: {e}"))?;
        crate::undo(client, &b.path, &before, &written, &current).map_err(|e| match e {
            ClientsError::Shape { what, .. } => what,
            other @ ClientsError::Broken { .. }
            | other @ ClientsError::Io { .. }
            | other @ ClientsError::NoBackup { .. }
            | other @ ClientsError::Changed { .. } => other.to_string(),
        })
    }
}

/// Writes `bytes` to `path` in one step (a temporary file beside it, then a rename), keeping
/// the file's permission bits when it exists (a new file is the user's alone).
/// Refuses a project's file that is not a regular file: a repository can plant a link there
/// after an import (to `~/.bashrc`, say), and the broker never writes through it, `--force` or
/// not. A file that does not exist is fine.
pub fn plain_file(path: &Path) -> Result<(), ClientsError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => Err(ClientsError::io(
            path,
            std::io::Error::other(
                "not a regular file (a link, say); the broker does not write through it",
            ),
        )),
        _ => Ok(()),
    }
}

/// `plain_file`, and the client's folder it sits in (`.claude`, `.cursor`, …) is a folder of
/// the project's own, not a link out of it: what a project's file must be before the broker
/// writes it (a repository can plant either).
pub fn plain_project_file(path: &Path) -> Result<(), ClientsError> {
    plain_file(path)?;
    let Some(dir) = path.parent().filter(|d| {
        d.file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
    }) else {
        return Ok(());
    };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if !m.is_dir() => Err(ClientsError::io(
            dir,
            std::io::Error::other(
                "not a folder of the project's own (a link, say); the broker does not write through it",
            ),
        )),
        _ => Ok(()),
    }
}

pub fn write_keeping_mode(path: &Path, bytes: &[u8]) -> Result<(), ClientsError> {
    use std::os::unix::fs::PermissionsExt;
    // A symlinked file (dotfiles kept elsewhere) is written where it points, so the link stays.
    let target;
    let path = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        target = std::fs::canonicalize(path).map_err(|e| ClientsError::io(path, e))?;
        target.as_path()
    } else {
        path
    };
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    mcpb_config::layout::write_atomic(path, bytes, mode).map_err(|e| ClientsError::io(path, e))
}
