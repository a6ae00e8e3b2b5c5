//! Tool embeddings kept across restarts: one file per model in the catalog directory, each
//! vector keyed by a hash of the model's name and the exact text embedded (a tool's definition
//! and its upstream's description), so a restart or a rebuild after one upstream changed embeds
//! only the tools whose text is new. A file that does not read back whole is ignored: the
//! vectors are computed again, never trusted half-written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::CatalogError;

const MAGIC: &[u8; 8] = b"MCPBVEC1";
/// Past this many vectors, a save keeps only those used since the cache was opened: tools gone
/// from every catalog do not pile up forever.
const KEEP_UNUSED_UP_TO: usize = 50_000;

type Key = [u8; 16];

struct Entry {
    vector: Box<[f32]>,
    used: bool,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// New vectors since the last save.
    dirty: bool,
}

/// The vectors of one model, loaded from and saved to one file.
pub struct VectorCache {
    path: PathBuf,
    model: String,
    dim: usize,
    state: Mutex<State>,
    /// Held from a save's snapshot to its rename, so an older snapshot never lands last.
    writing: Mutex<()>,
}

impl VectorCache {
    /// The cache in `path` for `model` (vectors of `dim` floats). A missing file is an empty
    /// cache; an unreadable or malformed one is an empty cache and the error says why (the
    /// caller logs it; the next save replaces the file).
    pub fn open(path: PathBuf, model: &str, dim: usize) -> (Self, Option<CatalogError>) {
        let mut state = State::default();
        let error = match std::fs::read(&path) {
            Ok(bytes) => match parse(&bytes, dim) {
                Ok(entries) => {
                    state.entries = entries;
                    None
                }
                Err(reason) => Some(CatalogError::Corrupt {
                    path: path.clone(),
                    what: "vector cache",
                    reason,
                }),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(CatalogError::io(&path, e)),
        };
        let cache = Self {
            path,
            model: model.to_string(),
            dim,
            state: Mutex::new(state),
            writing: Mutex::new(()),
        };
        (cache, error)
    }

    fn key(&self, text: &str) -> Key {
        let mut h = Sha256::new();
        h.update(self.model.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        let digest = h.finalize();
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
        key
    }

    /// The vector of each text, from the cache or computed by `embed` for the texts it lacks
    /// (in one call, so a model that batches can).
    pub fn vectors(
        &self,
        texts: &[&str],
        embed: impl FnOnce(&[&str]) -> Vec<Vec<f32>>,
    ) -> Vec<Box<[f32]>> {
        let keys: Vec<Key> = texts.iter().map(|t| self.key(t)).collect();
        let mut out: Vec<Option<Box<[f32]>>> = Vec::with_capacity(texts.len());
        let mut missing = Vec::new();
        {
            let mut state = self.state.lock();
            for (i, k) in keys.iter().enumerate() {
                match state.entries.get_mut(k) {
                    Some(e) => {
                        e.used = true;
                        out.push(Some(e.vector.clone()));
                    }
                    None => {
                        out.push(None);
                        missing.push(i);
                    }
                }
            }
        }
        if !missing.is_empty() {
            let wanted: Vec<&str> = missing.iter().map(|i| texts[*i]).collect();
            let made = embed(&wanted);
            let mut state = self.state.lock();
            for (i, v) in missing.iter().zip(made) {
                let v: Box<[f32]> = v.into_boxed_slice();
                if v.len() == self.dim {
                    state.entries.insert(
                        keys[*i],
                        Entry {
                            vector: v.clone(),
                            used: true,
                        },
                    );
                    state.dirty = true;
                }
                out[*i] = Some(v);
            }
        }
        out.into_iter()
            .map(|v| v.unwrap_or_else(|| vec![0.0; self.dim].into_boxed_slice()))
            .collect()
    }

    /// Writes the file if vectors were added since the last save (atomically, private to the
    /// user).
    pub fn save(&self) -> Result<(), CatalogError> {
        let _one = self.writing.lock();
        let bytes = {
            let mut state = self.state.lock();
            if !state.dirty {
                return Ok(());
            }
            state.dirty = false;
            let keep_all = state.entries.len() <= KEEP_UNUSED_UP_TO;
            if !keep_all {
                state.entries.retain(|_, e| e.used);
            }
            let mut bytes = Vec::with_capacity(24 + state.entries.len() * (16 + 4 * self.dim));
            bytes.extend_from_slice(MAGIC);
            bytes.extend_from_slice(&(self.dim as u32).to_le_bytes());
            bytes.extend_from_slice(&(state.entries.len() as u64).to_le_bytes());
            for (k, e) in &state.entries {
                bytes.extend_from_slice(k);
                for x in e.vector.iter() {
                    bytes.extend_from_slice(&x.to_le_bytes());
                }
            }
            bytes
        };
        crate::store::write_atomic(&self.path, &bytes)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.state.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn parse(bytes: &[u8], dim: usize) -> Result<HashMap<Key, Entry>, String> {
    let header = 8 + 4 + 8;
    if bytes.len() < header || &bytes[..8] != MAGIC {
        return Err("not a vector cache of this version".into());
    }
    let mut u32b = [0u8; 4];
    u32b.copy_from_slice(&bytes[8..12]);
    let file_dim = u32::from_le_bytes(u32b) as usize;
    if file_dim != dim {
        return Err(format!("vectors of {file_dim} dimensions, {dim} expected"));
    }
    let mut u64b = [0u8; 8];
    u64b.copy_from_slice(&bytes[12..20]);
    let count = u64::from_le_bytes(u64b);
    let record = 16 + 4 * dim;
    let body = &bytes[header..];
    if !body.len().is_multiple_of(record) || (body.len() / record) as u64 != count {
        return Err(format!(
            "{} bytes of vectors for {count} entries",
            body.len()
        ));
    }
    let mut entries = HashMap::with_capacity(body.len() / record);
    for rec in body.chunks_exact(record) {
        let mut key = [0u8; 16];
        key.copy_from_slice(&rec[..16]);
        let vector: Box<[f32]> = rec[16..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if vector.iter().any(|x| !x.is_finite()) {
            return Err("a vector holds a value that is not a number".into());
        }
        entries.insert(
            key,
            Entry {
                vector,
                used: false,
            },
        );
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embed_counting(calls: &std::cell::Cell<usize>) -> impl Fn(&[&str]) -> Vec<Vec<f32>> + '_ {
        move |texts| {
            calls.set(calls.get() + texts.len());
            texts
                .iter()
                .map(|t| vec![t.len() as f32, 1.0, 2.0])
                .collect()
        }
    }

    #[test]
    fn a_restart_embeds_only_the_texts_it_has_not_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.bin");
        let calls = std::cell::Cell::new(0);
        let (cache, err) = VectorCache::open(path.clone(), "m", 3);
        assert!(err.is_none() && cache.is_empty());
        let got = cache.vectors(&["ab", "abc"], embed_counting(&calls));
        assert_eq!(calls.get(), 2);
        assert_eq!(&*got[1], &[3.0, 1.0, 2.0]);
        cache.save().unwrap();

        let (again, err) = VectorCache::open(path.clone(), "m", 3);
        assert!(err.is_none());
        assert_eq!(again.len(), 2);
        let got = again.vectors(&["abc", "abcd", "ab"], embed_counting(&calls));
        assert_eq!(calls.get(), 3, "only the new text is embedded");
        assert_eq!(&*got[0], &[3.0, 1.0, 2.0]);
        assert_eq!(&*got[1], &[4.0, 1.0, 2.0]);

        // Another model's vectors never answer for this one.
        let (other, _) = VectorCache::open(path, "other", 3);
        other.vectors(&["ab"], embed_counting(&calls));
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn a_damaged_or_foreign_file_is_an_empty_cache_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.bin");
        let (cache, _) = VectorCache::open(path.clone(), "m", 3);
        cache.vectors(&["ab", "abc"], |t| vec![vec![1.0; 3]; t.len()]);
        cache.save().unwrap();
        let whole = std::fs::read(&path).unwrap();

        std::fs::write(&path, &whole[..whole.len() - 5]).unwrap();
        let (cut, err) = VectorCache::open(path.clone(), "m", 3);
        assert!(cut.is_empty());
        assert!(err.unwrap().to_string().contains("entries"));

        std::fs::write(&path, &whole).unwrap();
        let (wrong_dim, err) = VectorCache::open(path.clone(), "m", 4);
        assert!(wrong_dim.is_empty());
        assert!(err.unwrap().to_string().contains("dimensions"));

        std::fs::write(&path, b"garbage").unwrap();
        let (junk, err) = VectorCache::open(path, "m", 3);
        assert!(junk.is_empty() && err.is_some());
    }
}
