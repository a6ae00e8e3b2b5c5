//! A profile's search index over its visible tools, kept per profile and rebuilt when the known
//! lists or the configuration generation change.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{ProfileView, VisibleTool};

pub(crate) struct ProfileIndex {
    /// (known-lists generation, configuration generation) it was built from.
    key: (u64, u64),
    pub(crate) index: mcpb_catalog::Index,
    pub(crate) tools: Vec<VisibleTool>,
}

/// Search indexes by profile name and the upstreams it shows, and the static embeddings of the tools they were built
/// from, kept on disk beside the tool lists.
#[derive(Default)]
pub(crate) struct SearchCache {
    by_profile: Mutex<HashMap<String, Arc<ProfileIndex>>>,
    vectors: std::sync::OnceLock<Arc<mcpb_catalog::VectorCache>>,
    /// The transformer tier's tool vectors, beside them.
    #[cfg(feature = "semantic-minilm")]
    deep: std::sync::OnceLock<Arc<mcpb_catalog::VectorCache>>,
    /// Upstreams whose newest list waits to be embedded (one job each at most).
    embedding: Mutex<std::collections::HashSet<String>>,
    /// One index build at a time: searches that find the index stale while it is being built
    /// wait for it instead of building it again.
    building: tokio::sync::Mutex<()>,
}

impl SearchCache {
    /// The static model's vector cache, read from `dir` the first time it is needed. It reads a
    /// file: callers are off the event loop.
    fn vectors(&self, dir: &std::path::Path) -> Arc<mcpb_catalog::VectorCache> {
        opened(
            &self.vectors,
            dir.join(STATIC_VECTORS),
            mcpb_catalog::embed::VECTORS_KEY,
            mcpb_catalog::embed::DIM,
        )
    }

    /// The transformer tier's vector cache, like `vectors`.
    #[cfg(feature = "semantic-minilm")]
    fn deep(&self, dir: &std::path::Path) -> Arc<mcpb_catalog::VectorCache> {
        opened(
            &self.deep,
            dir.join(DEEP_VECTORS),
            mcpb_catalog::minilm::VECTORS_KEY,
            mcpb_catalog::minilm::DIM,
        )
    }

    /// Builds an index of `docs` with the vector caches in `dir`, which then keep the vectors
    /// of `lists` only (and of configured upstreams).
    fn build(
        &self,
        docs: &[mcpb_catalog::ToolDoc],
        weights: mcpb_catalog::Weights,
        dir: &std::path::Path,
        lists: &[UpstreamList],
        configured: &[String],
    ) -> mcpb_catalog::Index {
        let cache = (weights.dense > 0.0).then(|| self.vectors(dir));
        #[cfg(feature = "semantic-minilm")]
        let deep = (weights.rerank > 0.0).then(|| self.deep(dir));
        let index = mcpb_catalog::Index::build_cached(docs, weights, cache.as_deref());
        #[cfg_attr(not(feature = "semantic-minilm"), allow(unused_mut))]
        let mut kept: Vec<&mcpb_catalog::VectorCache> = cache.as_deref().into_iter().collect();
        #[cfg(feature = "semantic-minilm")]
        kept.extend(deep.as_deref());
        claim_lists(&kept, lists, configured);
        // The index holds the static vectors it uses; the file keeps them for the next
        // build. (The transformer's cache is read at search time: it stays.)
        if let Some(cache) = &cache {
            cache.release();
            released(cache);
        }
        #[cfg(feature = "semantic-minilm")]
        let index = match deep {
            Some(deep) => {
                let mut index = index;
                index.keep_deep_vectors_in(deep);
                index
            }
            None => index,
        };
        index
    }
}

/// The cache kept in `cell`, read from `path` the first time.
fn opened(
    cell: &std::sync::OnceLock<Arc<mcpb_catalog::VectorCache>>,
    path: std::path::PathBuf,
    key: &str,
    dim: usize,
) -> Arc<mcpb_catalog::VectorCache> {
    cell.get_or_init(|| {
        let (cache, error) = mcpb_catalog::VectorCache::open(path, key, dim);
        if let Some(e) = error {
            tracing::warn!(error = %e, "tool embeddings are computed again");
        }
        Arc::new(cache)
    })
    .clone()
}

/// Each cache's vectors of each upstream are those of its whole known list, and upstreams no
/// longer `configured` have none; written if that changed anything. The texts are computed
/// once for all the caches.
fn claim_lists(
    caches: &[&mcpb_catalog::VectorCache],
    lists: &[UpstreamList],
    configured: &[String],
) {
    if caches.is_empty() {
        return;
    }
    let live = configured.iter().map(String::as_str).collect();
    for cache in caches {
        cache.keep_owners(&live);
    }
    for (upstream, server_text, list) in lists {
        let texts = embed_texts(upstream, server_text, list);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        for cache in caches {
            cache.claim(upstream, &refs);
        }
    }
    for cache in caches {
        if let Err(e) = cache.save() {
            tracing::warn!(error = %e, "tool embeddings not kept for the next start");
        }
    }
}

/// An upstream's name, what search reads of it besides its tools, and its known list.
type UpstreamList = (String, String, Arc<Vec<mcpb_protocol::Tool>>);

/// What search reads of a tool's upstream besides its tools: name, description and tags.
fn server_text(up: &mcpb_config::UpstreamSettings) -> String {
    format!(
        "{} {} {}",
        up.name,
        up.description.as_deref().unwrap_or(""),
        up.tags.join(" ")
    )
}

/// The static vectors of a list that just arrived, computed in the background so that the
/// next search finds them cached instead of embedding tools itself; the upstream's vectors of
/// older lists are dropped. Only once a search has loaded the model: a daemon nobody searches
/// through never loads it.
pub(crate) struct ListEmbedder {
    searches: Arc<SearchCache>,
    known: Arc<crate::known::KnownLists>,
    dir: std::path::PathBuf,
    upstream: String,
    server_text: String,
}

impl ListEmbedder {
    /// Embeds the upstream's newest list on the catalog's thread, without the caller waiting.
    /// A job already waiting for this upstream will find the newest list itself: no second one.
    pub(crate) fn submit(self, worker: &crate::known::Worker) {
        if mcpb_catalog::embed::loaded().is_none()
            || !self.searches.embedding.lock().insert(self.upstream.clone())
        {
            return;
        }
        worker.submit(move || {
            self.searches.embedding.lock().remove(&self.upstream);
            if let Some(entry) = self.known.cached(&self.upstream) {
                self.embed(entry.tools());
            }
        });
    }

    fn embed(&self, list: &[mcpb_protocol::Tool]) {
        let Some(model) = mcpb_catalog::embed::loaded() else {
            return;
        };
        let texts = embed_texts(&self.upstream, &self.server_text, list);
        let pairs: Vec<(&str, &str)> = texts
            .iter()
            .map(|t| (self.upstream.as_str(), t.as_str()))
            .collect();
        let cache = self.searches.vectors(&self.dir);
        cache.vectors(&pairs, |missing| {
            missing.iter().map(|t| model.embed(t).to_vec()).collect()
        });
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        cache.claim(&self.upstream, &refs);
        if let Err(e) = cache.save() {
            tracing::warn!(error = %e, "tool embeddings not kept for the next start");
        }
        // The search index holds the vectors it uses; the file keeps the rest.
        cache.release();
        released(&cache);
    }
}

/// Says why a released cache's file did not read back (its vectors were computed again).
fn released(cache: &mcpb_catalog::VectorCache) {
    if let Some(e) = cache.take_error() {
        tracing::warn!(error = %e, "tool embeddings read back from the catalog failed; computed again");
    }
}

/// What the static model reads of each tool of `upstream`'s list, once each.
fn embed_texts(upstream: &str, server_text: &str, list: &[mcpb_protocol::Tool]) -> Vec<String> {
    let mut texts: Vec<String> = list
        .iter()
        .map(|t| {
            mcpb_catalog::ToolDoc::from_definition("", upstream, server_text, &t.to_value())
                .embed_text()
        })
        .collect();
    texts.sort_unstable();
    texts.dedup();
    texts
}

/// The static model's vectors, in the catalog directory.
const STATIC_VECTORS: &str = "vectors-potion-base-2M.bin";
/// The transformer tier's.
#[cfg(feature = "semantic-minilm")]
const DEEP_VECTORS: &str = "vectors-all-MiniLM-L6-v2.bin";

/// Whether the transformer tier can rerank: loaded from `dir` on first use. What keeps it from
/// loading (a binary built without it, weights not installed) is said once in the log, and
/// the search goes on with the static model.
fn minilm_ready(dir: &std::path::Path) -> bool {
    static SAID: std::sync::Once = std::sync::Once::new();
    #[cfg(feature = "semantic-minilm")]
    let loaded = mcpb_catalog::minilm::init(dir).map(|_| ());
    #[cfg(not(feature = "semantic-minilm"))]
    let loaded: Result<(), String> =
        Err("this binary was built without the semantic-minilm feature".into());
    if let Err(e) = &loaded {
        SAID.call_once(|| {
            tracing::warn!(dir = %dir.display(), error = %e, "broker.search.model minilm: searching with the static model instead");
        });
    }
    loaded.is_ok()
}

impl ProfileView {
    /// The ranking `broker.search.model` asks for: BM25F alone, or fused with the static
    /// embeddings (their weight measured on the public retrieval data, docs/benchmarks.md).
    pub(crate) fn search_weights(&self) -> mcpb_catalog::Weights {
        let mut w = mcpb_catalog::Weights::broker();
        let settings = &self.generation.settings;
        match settings.broker.search_model {
            mcpb_config::SearchModel::Off => {}
            mcpb_config::SearchModel::Static => w.dense = mcpb_catalog::search::STATIC_WEIGHT,
            mcpb_config::SearchModel::Minilm => {
                w.dense = mcpb_catalog::search::STATIC_WEIGHT;
                if minilm_ready(&settings.runtime.minilm_dir()) {
                    w.rerank = mcpb_catalog::search::RERANK_WEIGHT;
                }
            }
        }
        w
    }

    /// What embeds a new list of `up`'s when this profile's search uses the static model.
    pub(crate) fn list_embedder(&self, up: &mcpb_config::UpstreamSettings) -> Option<ListEmbedder> {
        let settings = &self.generation.settings;
        if settings.broker.search_model == mcpb_config::SearchModel::Off {
            return None;
        }
        Some(ListEmbedder {
            searches: self.shared.searches.clone(),
            known: self.shared.known.clone(),
            dir: settings.runtime.catalog_dir(),
            upstream: up.name.clone(),
            server_text: server_text(up),
        })
    }

    /// Writes the transformer tier's tool vectors a search computed, on the catalog's thread,
    /// without the caller waiting (nothing is written when no vector was added).
    pub(crate) fn keep_deep_vectors(&self) {
        #[cfg(feature = "semantic-minilm")]
        if let Some(deep) = self.shared.searches.deep.get().cloned() {
            self.shared.known.worker.submit(move || {
                if let Err(e) = deep.save() {
                    tracing::warn!(error = %e, "tool embeddings not kept for the next start");
                }
            });
        }
    }

    /// Runs `f` on the catalog's thread and waits for it (`None` if it panicked): for a search
    /// the transformer reranks, milliseconds kept off the event loop on the thread whose
    /// allocator arena the catalog already uses (tokio's blocking pool would add its own).
    pub(crate) async fn on_catalog_thread<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        self.shared.known.worker.run(f).await
    }

    /// Each upstream's whole known list, with its name and server text.
    fn upstream_lists(&self) -> Vec<UpstreamList> {
        self.upstreams()
            .iter()
            .filter_map(|up| {
                let entry = self.shared.known.cached(up.name())?;
                let settings = up.settings();
                Some((
                    settings.name.clone(),
                    server_text(settings),
                    entry.list.tools.clone(),
                ))
            })
            .collect()
    }

    pub(crate) async fn search_index(&self) -> Arc<ProfileIndex> {
        // Every list known first (this may start an upstream never listed, waited for within
        // `first_list_wait_ms`), then the generation they make; a search on an unchanged
        // catalog costs one lookup here.
        let (ups, entries) = self.gather_entries(false).await;
        let key = (self.shared.known.generation(), self.generation.serial());
        // One index per set of upstreams the profile shows: a project's upstreams show only to
        // sessions started in its folder, and never through another session's index.
        let slot = std::iter::once(self.profile.name.as_str())
            .chain(ups.iter().map(|u| u.name()))
            .collect::<Vec<_>>()
            .join("\u{0}");
        let current = || {
            self.shared
                .searches
                .by_profile
                .lock()
                .get(&slot)
                .filter(|ix| ix.key == key)
                .cloned()
        };
        if let Some(ix) = current() {
            return ix;
        }
        let tools = self.visible(&ups, entries);
        let docs = search_docs(&tools);
        let weights = self.search_weights();
        let searches = self.shared.searches.clone();
        let dir = self.generation.settings.runtime.catalog_dir();
        // Each upstream's whole known list: its vectors of other texts (older lists, an older
        // description in the configuration) are dropped after the build.
        // Vectors of upstreams the configuration no longer has are dropped.
        let configured: Vec<String> = self.generation.upstreams.keys().cloned().collect();
        let lists = self.upstream_lists();
        // The slow part, one at a time (searches of a stale index wait for the build under way
        // instead of queueing their own); the lists above were gathered before, so a slow
        // upstream never holds the others' searches.
        let _one = self.shared.searches.building.lock().await;
        if let Some(ix) = current() {
            return ix;
        }
        // Reading the vector cache, embedding new tools and writing the cache take milliseconds
        // per hundred tools: off the event loop, on the catalog's thread (a pool thread would
        // keep an allocator arena of its own, ~9 MB with 40 upstreams).
        let words = docs.clone();
        let built = self
            .shared
            .known
            .worker
            .run(move || searches.build(&docs, weights, &dir, &lists, &configured))
            .await;
        let index = match built {
            Some(index) => index,
            None => {
                // Not kept: the next search tries the whole build again.
                tracing::error!("search index build failed; this search uses words only");
                let index = mcpb_catalog::Index::build(&words, mcpb_catalog::Weights::broker());
                return Arc::new(ProfileIndex { key, index, tools });
            }
        };
        let built = Arc::new(ProfileIndex { key, index, tools });
        self.shared
            .searches
            .by_profile
            .lock()
            .insert(slot, built.clone());
        built
    }
}

/// What the catalog indexes of each visible tool: its exposed name, upstream and definition.
fn search_docs(tools: &[VisibleTool]) -> Vec<mcpb_catalog::ToolDoc> {
    tools
        .iter()
        .map(|t| {
            let up = t.upstream.settings();
            mcpb_catalog::ToolDoc::from_definition(
                &t.exposed,
                &up.name,
                &server_text(up),
                &t.definition().to_value(),
            )
        })
        .collect()
}
