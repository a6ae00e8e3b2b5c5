//! Oversized results kept whole on disk: `<dir>/<profile>/<id>.txt`, where the id is random (122
//! bits): an id derived from the content would let a session test whether a guessed short
//! content was stored by someone else. Ids are checked against their exact
//! shape before any path is built, so a traversal or a foreign id is simply unknown. Artifacts
//! expire after a set time and all of them together stay under a size cap, oldest out first.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("unknown artifact '{0}'")]
    Unknown(String),
    #[error("the result is {size} bytes, more than the artifact store may hold ({cap} bytes)")]
    TooLarge { size: u64, cap: u64 },
    #[error("artifact store at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone)]
pub struct ArtifactStore {
    dir: PathBuf,
    ttl: Duration,
    max_bytes: u64,
}

/// One page of an artifact.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Page {
    pub id: String,
    pub offset: usize,
    pub text: String,
    pub total_chars: usize,
    /// Where the next page starts; `None` at the end.
    pub next_offset: Option<usize>,
}

const PREFIX: &str = "art_";
const HEX: usize = 32;

fn valid_id(id: &str) -> bool {
    id.strip_prefix(PREFIX).is_some_and(|h| {
        h.len() == HEX
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

impl ArtifactStore {
    pub fn new(dir: PathBuf, ttl: Duration, max_bytes: u64) -> Self {
        Self {
            dir,
            ttl,
            max_bytes,
        }
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArtifactError + '_ {
        move |source| ArtifactError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Stores `text` for `profile` and returns its id.
    pub fn put(&self, profile: &str, text: &str) -> Result<String, ArtifactError> {
        let size = text.len() as u64;
        if size > self.max_bytes {
            return Err(ArtifactError::TooLarge {
                size,
                cap: self.max_bytes,
            });
        }
        let id = format!("{PREFIX}{}", uuid::Uuid::new_v4().simple());
        let dir = self.dir.join(profile);
        std::fs::create_dir_all(&dir).map_err(Self::io(&dir))?;
        self.sweep(size)?;
        let path = dir.join(format!("{id}.txt"));
        mcpb_config::layout::write_private(&path, text.as_bytes()).map_err(Self::io(&path))?;
        Ok(id)
    }

    /// A page of `length` characters from `offset` of an artifact of `profile`.
    pub fn get(
        &self,
        profile: &str,
        id: &str,
        offset: usize,
        length: usize,
    ) -> Result<Page, ArtifactError> {
        let unknown = || ArtifactError::Unknown(id.chars().take(80).collect());
        if !valid_id(id) {
            return Err(unknown());
        }
        let path = self.dir.join(profile).join(format!("{id}.txt"));
        if self.expired(&path) {
            let _ = std::fs::remove_file(&path);
            return Err(unknown());
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(unknown()),
            Err(e) => return Err(Self::io(&path)(e)),
        };
        let total_chars = text.chars().count();
        let page: String = text.chars().skip(offset).take(length.max(1)).collect();
        let end = offset.saturating_add(page.chars().count());
        Ok(Page {
            id: id.to_string(),
            offset,
            text: page,
            total_chars,
            next_offset: (end < total_chars).then_some(end),
        })
    }

    fn expired(&self, path: &Path) -> bool {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > self.ttl)
    }

    /// Drops expired artifacts, then the oldest until `incoming` more bytes fit under the cap.
    pub fn sweep(&self, incoming: u64) -> Result<(), ArtifactError> {
        let mut files = Vec::new();
        let profiles = match std::fs::read_dir(&self.dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Self::io(&self.dir)(e)),
        };
        for profile in profiles.flatten() {
            let Ok(entries) = std::fs::read_dir(profile.path()) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if self.expired(&path) {
                    let _ = std::fs::remove_file(&path);
                    continue;
                }
                if let Ok(meta) = entry.metadata() {
                    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    files.push((modified, meta.len(), path));
                }
            }
        }
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort_by_key(|f| f.0);
        for (_, len, path) in files {
            if total + incoming <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(len);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use sha2::{Digest, Sha256};

    #[test]
    fn pages_through_and_refuses_foreign_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(dir.path().to_path_buf(), Duration::from_secs(60), 1 << 20);
        let text = "ab€".repeat(10);
        let id = store.put("p", &text).unwrap();
        let again = store.put("p", &text).unwrap();
        assert_ne!(id, again, "ids are random, never derived from the content");
        let digest = Sha256::digest(text.as_bytes());
        let hex = hex::encode(digest);
        assert!(!id.contains(&hex[..8]) && valid_id(&again));
        let first = store.get("p", &id, 0, 4).unwrap();
        assert_eq!(
            (first.text.as_str(), first.total_chars, first.next_offset),
            ("ab€a", 30, Some(4))
        );
        let last = store.get("p", &id, 28, 100).unwrap();
        assert_eq!((last.text.as_str(), last.next_offset), ("b€", None));
        for bad in [
            "../p/x",
            "art_zz",
            &format!("{id}/../x"),
            "art_../../etc/passwd",
        ] {
            assert!(
                matches!(store.get("p", bad, 0, 1), Err(ArtifactError::Unknown(_))),
                "{bad}"
            );
        }
        assert!(
            matches!(
                store.get("other", &id, 0, 1),
                Err(ArtifactError::Unknown(_))
            ),
            "per profile"
        );
    }

    #[test]
    fn cap_evicts_oldest_and_ttl_expires() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(dir.path().to_path_buf(), Duration::from_secs(60), 25);
        let a = store.put("p", &"a".repeat(10)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let b = store.put("p", &"b".repeat(10)).unwrap();
        let c = store.put("p", &"c".repeat(10)).unwrap();
        assert!(store.get("p", &a, 0, 1).is_err(), "oldest evicted");
        assert!(store.get("p", &b, 0, 1).is_ok() && store.get("p", &c, 0, 1).is_ok());
        assert!(matches!(
            store.put("p", &"d".repeat(30)),
            Err(ArtifactError::TooLarge { .. })
        ));
        let short = ArtifactStore::new(dir.path().to_path_buf(), Duration::ZERO, 1 << 20);
        std::thread::sleep(Duration::from_millis(5));
        assert!(short.get("p", &b, 0, 1).is_err(), "expired");
    }
}
