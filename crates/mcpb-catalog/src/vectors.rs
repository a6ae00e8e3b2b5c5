//! Tool embeddings kept across restarts: one file per model in the catalog directory, each
//! vector keyed by a hash of the model's name and the exact text embedded (a tool's definition
//! and its upstream's description), so a restart or a rebuild after one upstream changed embeds
//! only the tools whose text is new. A file that does not read back whole is ignored: the
//! vectors are computed again, never trusted half-written.
//!
//! Each vector belongs to an upstream. When an upstream's new list arrives, its vectors are
//! claimed anew and those of its older lists are dropped, so an upstream whose descriptions
//! change on every list does not grow the file: it holds about the live tools, no more.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::CatalogError;

const MAGIC: &[u8; 8] = b"MCPBVEC2";
/// Vectors a cache file may hold: ten times the largest catalog measured (10,000 tools). A
/// larger file cannot be ours and is not read (it would cost its size in memory, and more).
const MAX_VECTORS: u64 = 100_000;

/// The size of a file of `MAX_VECTORS` vectors of `dim` floats, with room for the key, owner
/// and the owners' names.
fn max_file(dim: usize) -> u64 {
    MAX_VECTORS * (dim as u64 * 4 + 64) + (1 << 20)
}

type Key = [u8; 16];

struct Entry {
    vector: Box<[f32]>,
    owner: std::sync::Arc<str>,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// New vectors since the last save.
    dirty: bool,
    /// `entries` holds the file (false after `release`: the next use reads it again).
    loaded: bool,
    /// Vectors in the file when they were released (what `len` says until the next use).
    released: usize,
    /// Why the file did not read back after a release, for the caller to report.
    error: Option<CatalogError>,
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

impl std::fmt::Debug for VectorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorCache")
            .field("path", &self.path)
            .field("model", &self.model)
            .field("vectors", &self.len())
            .finish()
    }
}

impl VectorCache {
    /// The cache in `path` for `model` (vectors of `dim` floats). A missing file is an empty
    /// cache; an unreadable or malformed one is an empty cache and the error says why (the
    /// caller logs it; the next save replaces the file).
    pub fn open(path: PathBuf, model: &str, dim: usize) -> (Self, Option<CatalogError>) {
        let (entries, error) = match load(&path, dim) {
            Ok(entries) => (entries, None),
            Err(e) => (HashMap::new(), Some(e)),
        };
        let state = State {
            entries,
            loaded: true,
            ..State::default()
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

    /// The state, with the file read again if `release` dropped it (a file that no longer reads
    /// is an empty cache: its vectors are computed again).
    fn locked(&self) -> parking_lot::MutexGuard<'_, State> {
        let mut state = self.state.lock();
        if !state.loaded {
            state.loaded = true;
            match load(&self.path, self.dim) {
                Ok(entries) => state.entries = entries,
                Err(e) => {
                    // Computed again and written again at the next save.
                    state.error = Some(e);
                    state.dirty = true;
                }
            }
        }
        state
    }

    /// Why the file did not read back after a release, once.
    pub fn take_error(&self) -> Option<CatalogError> {
        self.state.lock().error.take()
    }

    /// Drops the vectors from memory once they are all in the file: a daemon whose search index
    /// holds its tools' vectors would otherwise hold each twice. The next use reads the file.
    /// Nothing is dropped while vectors wait to be saved.
    pub fn release(&self) {
        // After any save under way: its vectors are in the file when it is read again.
        let _one = self.writing.lock();
        let mut state = self.state.lock();
        if state.loaded && !state.dirty {
            state.released = state.entries.len();
            state.entries = HashMap::new();
            state.loaded = false;
        }
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

    /// The vector of each `(upstream, text)`, from the cache or computed by `embed` for the
    /// texts it lacks (in one call, so a model that batches can).
    pub fn vectors(
        &self,
        texts: &[(&str, &str)],
        embed: impl FnOnce(&[&str]) -> Vec<Vec<f32>>,
    ) -> Vec<Box<[f32]>> {
        let keys: Vec<Key> = texts.iter().map(|(_, t)| self.key(t)).collect();
        let mut out: Vec<Option<Box<[f32]>>> = Vec::with_capacity(texts.len());
        let mut missing = Vec::new();
        {
            let state = self.locked();
            for (i, k) in keys.iter().enumerate() {
                match state.entries.get(k) {
                    Some(e) => out.push(Some(e.vector.clone())),
                    None => {
                        out.push(None);
                        missing.push(i);
                    }
                }
            }
        }
        if !missing.is_empty() {
            let wanted: Vec<&str> = missing.iter().map(|i| texts[*i].1).collect();
            let made = embed(&wanted);
            let mut state = self.locked();
            let mut owner: Option<std::sync::Arc<str>> = None;
            for (i, v) in missing.iter().zip(made) {
                let v: Box<[f32]> = v.into_boxed_slice();
                // What cannot be read back is not kept (the file would be refused whole).
                if v.len() == self.dim && v.iter().all(|x| x.is_finite()) {
                    let up = texts[*i].0;
                    let o = match &owner {
                        Some(o) if &**o == up => o.clone(),
                        _ => std::sync::Arc::from(up),
                    };
                    owner = Some(o.clone());
                    state.entries.insert(
                        keys[*i],
                        Entry {
                            vector: v.clone(),
                            owner: o,
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

    /// `upstream`'s vectors are those of `texts` from now on (its newest list): the others it
    /// held are dropped.
    pub fn claim(&self, upstream: &str, texts: &[&str]) {
        let live: std::collections::HashSet<Key> = texts.iter().map(|t| self.key(t)).collect();
        let mut state = self.locked();
        let before = state.entries.len();
        state
            .entries
            .retain(|k, e| &*e.owner != upstream || live.contains(k));
        if state.entries.len() != before {
            state.dirty = true;
        }
    }

    /// Drops the vectors of upstreams not in `live` (removed or renamed in the configuration).
    pub fn keep_owners(&self, live: &std::collections::HashSet<&str>) {
        let mut state = self.locked();
        let before = state.entries.len();
        state.entries.retain(|_, e| live.contains(&*e.owner));
        if state.entries.len() != before {
            state.dirty = true;
        }
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
            serialize(&state.entries, self.dim)
        };
        let written = crate::store::write_atomic(&self.path, &bytes);
        if written.is_err() {
            // Tried again at the next save.
            self.state.lock().dirty = true;
        }
        written
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Vectors held (in memory, or in the file after `release`).
    pub fn len(&self) -> usize {
        let state = self.state.lock();
        if state.loaded {
            state.entries.len()
        } else {
            state.released
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The vectors in `path`; a missing file is an empty cache.
fn load(path: &Path, dim: usize) -> Result<HashMap<Key, Entry>, CatalogError> {
    match read_regular(path, max_file(dim)) {
        Ok(bytes) => parse(&bytes, dim).map_err(|reason| CatalogError::Corrupt {
            path: path.to_path_buf(),
            what: "vector cache",
            reason,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HashMap::new()),
        Err(e) => Err(CatalogError::io(path, e)),
    }
}

/// The file's bytes if it is a regular file of a sane size (a FIFO or a device put there would
/// block or never end; following no link at the last component).
fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > max {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than a vector cache holds",
            meta.len()
        )));
    }
    std::fs::read(path)
}

/// MAGIC, dim (u32), upstream count (u32), upstream names (u16 length + UTF-8 each), entry
/// count (u64), then per entry: key (16 bytes), upstream index (u32), dim f32; little-endian.
fn serialize(entries: &HashMap<Key, Entry>, dim: usize) -> Vec<u8> {
    let mut owners: Vec<&str> = entries.values().map(|e| &*e.owner).collect();
    owners.sort_unstable();
    owners.dedup();
    let mut bytes = Vec::with_capacity(32 + entries.len() * (20 + 4 * dim));
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(dim as u32).to_le_bytes());
    bytes.extend_from_slice(&(owners.len() as u32).to_le_bytes());
    for o in &owners {
        let name = &o.as_bytes()[..o.len().min(u16::MAX as usize)];
        bytes.extend_from_slice(&(name.len() as u16).to_le_bytes());
        bytes.extend_from_slice(name);
    }
    bytes.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (k, e) in entries {
        bytes.extend_from_slice(k);
        let at = owners.binary_search(&&*e.owner).unwrap_or(0) as u32;
        bytes.extend_from_slice(&at.to_le_bytes());
        for x in e.vector.iter() {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
    }
    bytes
}

/// Reads little-endian fields off the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("the file ends early".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(w))
    }
}

fn parse(bytes: &[u8], dim: usize) -> Result<HashMap<Key, Entry>, String> {
    let mut r = Reader(bytes);
    if r.take(8).ok() != Some(&MAGIC[..]) {
        return Err("not a vector cache of this version".into());
    }
    let file_dim = r.u32()? as usize;
    if file_dim != dim {
        return Err(format!("vectors of {file_dim} dimensions, {dim} expected"));
    }
    let owner_count = r.u32()? as usize;
    // Every name takes at least its two length bytes: a count past that is a lie.
    if owner_count > r.0.len() / 2 {
        return Err(format!(
            "{owner_count} upstreams in a file too short for them"
        ));
    }
    let mut owners: Vec<std::sync::Arc<str>> = Vec::with_capacity(owner_count);
    for _ in 0..owner_count {
        let len = r.u16()? as usize;
        let name =
            std::str::from_utf8(r.take(len)?).map_err(|_| "an upstream name is not UTF-8")?;
        owners.push(std::sync::Arc::from(name));
    }
    let count = r.u64()?;
    let record = 16 + 4 + 4 * dim;
    let body = r.0;
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
        let at = u32::from_le_bytes([rec[16], rec[17], rec[18], rec[19]]) as usize;
        let owner = owners
            .get(at)
            .cloned()
            .ok_or("an entry names an upstream the file does not list")?;
        let vector: Box<[f32]> = rec[20..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if vector.iter().any(|x| !x.is_finite()) {
            return Err("a vector holds a value that is not a number".into());
        }
        entries.insert(key, Entry { vector, owner });
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
    fn upstreams_no_longer_configured_lose_their_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let (cache, _) = VectorCache::open(dir.path().join("v.bin"), "m", 3);
        let one = |t: &[&str]| t.iter().map(|_| vec![1.0, 0.0, 0.0]).collect();
        cache.vectors(&[("a", "x"), ("b", "y"), ("gone", "z")], one);
        cache.save().unwrap();
        cache.keep_owners(&["a", "b"].into_iter().collect());
        assert_eq!(cache.len(), 2);
        cache.save().unwrap();
        let (again, err) = VectorCache::open(dir.path().join("v.bin"), "m", 3);
        assert!(err.is_none());
        assert_eq!(again.len(), 2);
    }

    #[test]
    fn released_vectors_are_read_back_and_unsaved_ones_are_never_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let calls = std::cell::Cell::new(0);
        let (cache, _) = VectorCache::open(dir.path().join("v.bin"), "m", 3);
        cache.vectors(&[("a", "ab"), ("a", "abc")], embed_counting(&calls));
        // Not saved yet: release keeps them.
        cache.release();
        assert!(cache.state.lock().loaded);
        cache.save().unwrap();
        cache.release();
        assert!(cache.state.lock().entries.is_empty());
        let got = cache.vectors(&[("a", "abc"), ("a", "new")], embed_counting(&calls));
        assert_eq!(calls.get(), 3, "only the new text is embedded");
        assert_eq!(&*got[0], &[3.0, 1.0, 2.0]);
        cache.claim("a", &["new"]);
        cache.save().unwrap();
        cache.release();
        assert_eq!(cache.len(), 1);
        assert!(!cache.state.lock().loaded, "len reads no file");
        // A file that no longer reads back: computed again, reported once, written again.
        std::fs::write(cache.path(), b"junk").unwrap();
        cache.vectors(&[("a", "new")], embed_counting(&calls));
        assert_eq!(calls.get(), 4);
        assert!(cache.take_error().is_some());
        assert!(cache.take_error().is_none());
        cache.save().unwrap();
        let (again, err) = VectorCache::open(cache.path().to_path_buf(), "m", 3);
        assert!(err.is_none() && again.len() == 1);
    }

    #[test]
    fn a_restart_embeds_only_the_texts_it_has_not_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.bin");
        let calls = std::cell::Cell::new(0);
        let (cache, err) = VectorCache::open(path.clone(), "m", 3);
        assert!(err.is_none() && cache.is_empty());
        let got = cache.vectors(&[("a", "ab"), ("b", "abc")], embed_counting(&calls));
        assert_eq!(calls.get(), 2);
        assert_eq!(&*got[1], &[3.0, 1.0, 2.0]);
        cache.save().unwrap();

        let (again, err) = VectorCache::open(path.clone(), "m", 3);
        assert!(err.is_none());
        assert_eq!(again.len(), 2);
        let got = again.vectors(
            &[("b", "abc"), ("b", "abcd"), ("a", "ab")],
            embed_counting(&calls),
        );
        assert_eq!(calls.get(), 3, "only the new text is embedded");
        assert_eq!(&*got[0], &[3.0, 1.0, 2.0]);
        assert_eq!(&*got[1], &[4.0, 1.0, 2.0]);

        // Another model's vectors never answer for this one.
        let (other, _) = VectorCache::open(path, "other", 3);
        other.vectors(&[("a", "ab")], embed_counting(&calls));
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn an_upstream_whose_lists_keep_changing_holds_only_its_newest_list() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.bin");
        let (cache, _) = VectorCache::open(path.clone(), "m", 3);
        let calls = std::cell::Cell::new(0);
        cache.vectors(&[("steady", "keep me")], embed_counting(&calls));
        for round in 0..50 {
            let texts: Vec<String> = (0..10).map(|i| format!("tool {i} at {round}")).collect();
            let pairs: Vec<(&str, &str)> = texts.iter().map(|t| ("noisy", t.as_str())).collect();
            cache.vectors(&pairs, embed_counting(&calls));
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            cache.claim("noisy", &refs);
        }
        assert_eq!(
            cache.len(),
            11,
            "ten live tools and the other upstream's one"
        );
        cache.save().unwrap();
        // Owners survive a restart: a claim after it still drops the old list only.
        let (again, err) = VectorCache::open(path, "m", 3);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(again.len(), 11);
        again.claim("noisy", &[]);
        assert_eq!(again.len(), 1);
        let got = again.vectors(&[("steady", "keep me")], embed_counting(&calls));
        assert_eq!(&*got[0], &[7.0, 1.0, 2.0]);
    }

    #[test]
    fn a_vector_that_is_not_a_number_is_used_once_and_never_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (cache, _) = VectorCache::open(dir.path().join("v.bin"), "m", 2);
        let got = cache.vectors(&[("a", "x")], |t| vec![vec![f32::NAN, 1.0]; t.len()]);
        assert!(got[0][0].is_nan());
        assert!(cache.is_empty());
    }

    #[test]
    fn a_failed_save_is_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        // The cache's path is a directory: every write fails.
        let path = dir.path().join("v.bin");
        std::fs::create_dir(&path).unwrap();
        let (cache, err) = VectorCache::open(path.clone(), "m", 2);
        assert!(err.unwrap().to_string().contains("not a regular file"));
        cache.vectors(&[("a", "x")], |t| vec![vec![1.0, 0.0]; t.len()]);
        assert!(cache.save().is_err());
        std::fs::remove_dir(&path).unwrap();
        cache.save().unwrap();
        assert!(path.is_file());
    }

    #[test]
    fn a_damaged_or_foreign_file_is_an_empty_cache_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.bin");
        let (cache, _) = VectorCache::open(path.clone(), "m", 3);
        cache.vectors(&[("a", "ab"), ("b", "abc")], |t| {
            vec![vec![1.0; 3]; t.len()]
        });
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

        // A count of upstreams the file could never hold is refused before allocating.
        let mut lying = whole.clone();
        lying[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&path, &lying).unwrap();
        let (_, err) = VectorCache::open(path.clone(), "m", 3);
        assert!(err.unwrap().to_string().contains("too short"));

        std::fs::write(&path, b"garbage").unwrap();
        let (junk, err) = VectorCache::open(path.clone(), "m", 3);
        assert!(junk.is_empty() && err.is_some());

        // A FIFO would block the reader forever: refused without opening it.
        std::fs::remove_file(&path).unwrap();
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap()
                .success()
        );
        let (fifo, err) = VectorCache::open(path, "m", 3);
        assert!(fifo.is_empty() && err.is_some());
    }
}
