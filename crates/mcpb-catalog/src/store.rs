//! Each upstream's tool list on disk (`state/catalog/<upstream>.json`) with its hash and the time
//! it was fetched, so search, describe and status answer while every upstream is stopped; and
//! beside it the upstream's resources, resource templates and prompts
//! (`<upstream>.content.json`: upstream names never hold a dot), for the same reason.

use std::collections::BTreeMap;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpb_protocol::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::CatalogError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedList {
    pub upstream: String,
    /// `sha256:` of the canonical tool list.
    pub hash: String,
    pub fetched_at_unix: u64,
    #[serde(deserialize_with = "tools_that_are_tools")]
    pub tools: Arc<Vec<Tool>>,
    /// A fingerprint of the upstream's settings that decide what it lists (its command, its
    /// environment...) when the list was fetched: a list fetched under other settings may
    /// not be the one the upstream sends now. `None` in lists written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

impl CachedList {
    pub fn new(upstream: &str, tools: Arc<Vec<Tool>>, now_unix: u64) -> Self {
        let hash = crate::canonical::hash_list(&tools);
        Self {
            upstream: upstream.to_string(),
            hash,
            fetched_at_unix: now_unix,
            tools,
            config: None,
        }
    }
}

/// A list's entries that are tools: copies written by older versions may hold an entry without
/// a name, which was never shown; it is dropped, not the whole list.
fn tools_that_are_tools<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Arc<Vec<Tool>>, D::Error> {
    let items = Vec::<Value>::deserialize(d)?;
    Ok(Arc::new(
        items
            .iter()
            .filter_map(|v| Tool::from_value(v).ok())
            .collect(),
    ))
}

#[derive(Debug, Clone)]
pub struct ListStore {
    dir: PathBuf,
}

impl ListStore {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, upstream: &str) -> PathBuf {
        self.dir.join(format!("{upstream}.json"))
    }

    /// Whether a cached list of `upstream` exists (one stat, nothing read).
    pub fn has(&self, upstream: &str) -> bool {
        self.path(upstream).is_file()
    }

    /// The cached list of one upstream; `None` when it was never fetched.
    pub fn load(&self, upstream: &str) -> Result<Option<CachedList>, CatalogError> {
        let path = self.path(upstream);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CatalogError::io(&path, e)),
        };
        let list: CachedList = serde_json::from_str(&text).map_err(|e| CatalogError::Corrupt {
            path: path.clone(),
            what: "cached tool list",
            reason: e.to_string(),
        })?;
        Ok((list.upstream == upstream).then_some(list))
    }

    pub fn save(&self, list: &CachedList) -> Result<(), CatalogError> {
        let text = serde_json::to_vec(list).map_err(|e| CatalogError::Corrupt {
            path: self.path(&list.upstream),
            what: "tool list",
            reason: e.to_string(),
        })?;
        write_atomic(&self.path(&list.upstream), &text)
    }
}

/// An upstream's last listings besides tools, by the key of their answer (`resources`,
/// `resourceTemplates`, `prompts`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CachedContent {
    pub upstream: String,
    pub fetched_at_unix: u64,
    pub lists: BTreeMap<String, Arc<Vec<Value>>>,
}

impl ListStore {
    fn content_path(&self, upstream: &str) -> PathBuf {
        self.dir.join(format!("{upstream}.content.json"))
    }

    /// The cached listings of one upstream; empty when none was ever written.
    pub fn load_content(&self, upstream: &str) -> Result<CachedContent, CatalogError> {
        let path = self.content_path(upstream);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(CachedContent {
                    upstream: upstream.to_string(),
                    ..CachedContent::default()
                });
            }
            Err(e) => return Err(CatalogError::io(&path, e)),
        };
        let content: CachedContent =
            serde_json::from_str(&text).map_err(|e| CatalogError::Corrupt {
                path: path.clone(),
                what: "cached resource and prompt lists",
                reason: e.to_string(),
            })?;
        if content.upstream != upstream {
            return Err(CatalogError::Corrupt {
                path,
                what: "cached resource and prompt lists",
                reason: format!("written for upstream {:?}", content.upstream),
            });
        }
        Ok(content)
    }

    pub fn save_content(&self, content: &CachedContent) -> Result<(), CatalogError> {
        let path = self.content_path(&content.upstream);
        let text = serde_json::to_vec(content).map_err(|e| CatalogError::Corrupt {
            path: path.clone(),
            what: "resource and prompt lists",
            reason: e.to_string(),
        })?;
        write_atomic(&path, &text)
    }
}

/// Write to a temporary file beside the target, then rename: a reader sees the old file or the
/// new one, never half of one. Files are private to the user.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CatalogError> {
    mcpb_config::layout::write_private(path, bytes).map_err(|e| CatalogError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_survive_a_round_trip_and_corruption_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = ListStore::new(dir.path().join("catalog"));
        assert!(store.load("git").unwrap().is_none());
        let log = Tool::from_value(&json!({"name": "log"})).unwrap();
        let list = CachedList::new("git", Arc::new(vec![log]), 42);
        store.save(&list).unwrap();
        assert_eq!(store.load("git").unwrap(), Some(list));
        // An older copy with an entry that is no tool keeps the rest.
        let old = json!({"upstream": "git", "hash": "sha256:0", "fetched_at_unix": 1,
            "tools": [{"name": "log"}, {"title": "nameless"}, 3]});
        std::fs::write(dir.path().join("catalog/git.json"), old.to_string()).unwrap();
        let read = store.load("git").unwrap().unwrap();
        assert_eq!(read.tools.len(), 1);
        assert_eq!(read.tools[0].name(), "log");
        std::fs::write(dir.path().join("catalog/git.json"), "{").unwrap();
        assert!(matches!(
            store.load("git"),
            Err(CatalogError::Corrupt { .. })
        ));
    }

    #[test]
    fn content_lives_beside_the_tool_list_and_names_its_upstream() {
        let dir = tempfile::tempdir().unwrap();
        let store = ListStore::new(dir.path().join("catalog"));
        assert!(store.load_content("docs").unwrap().lists.is_empty());
        let mut content = CachedContent {
            upstream: "docs".into(),
            fetched_at_unix: 7,
            ..CachedContent::default()
        };
        content.lists.insert(
            "prompts".into(),
            Arc::new(vec![json!({"name": "summarize"})]),
        );
        store.save_content(&content).unwrap();
        assert_eq!(store.load_content("docs").unwrap(), content);
        assert!(
            store.load("docs").unwrap().is_none(),
            "the tool list is apart"
        );
        std::fs::rename(
            dir.path().join("catalog/docs.content.json"),
            dir.path().join("catalog/other.content.json"),
        )
        .unwrap();
        assert!(store.load_content("other").is_err());
    }
}
