//! The tool lists the daemon knows, judged: each upstream's last list (in memory and on disk,
//! through mcpb-catalog's list store) with the pin verdict and scan findings of each tool. Lists
//! come from running upstreams; when an upstream is stopped the disk copy answers, so search,
//! describe and status start nothing. The judging of a new list runs on a thread of its own.
//! Resource, template and prompt lists are kept the same way (unjudged), so a search over them
//! starts nothing either.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use mcpb_catalog::{CachedContent, CachedList, Finding, ListStore, PinMode, Pins, Verdict};
use mcpb_protocol::Tool;
use serde_json::Value;

pub(crate) struct Entry {
    pub list: CachedList,
    /// One per tool, in list order; `None` = approved.
    pub verdicts: Vec<Verdict>,
    pub findings: Vec<Finding>,
    by_name: HashMap<String, usize>,
    /// The list came from a running upstream (not only from the catalog on disk): a listing
    /// that answered from a catalog copy learns of a live list that differs.
    pub live: bool,
}

impl Entry {
    pub(crate) fn tools(&self) -> &[Tool] {
        &self.list.tools
    }

    pub(crate) fn index_of(&self, tool: &str) -> Option<usize> {
        self.by_name.get(tool).copied()
    }

    pub(crate) fn approved(&self, i: usize) -> bool {
        self.verdicts.get(i).is_some_and(Option::is_none)
    }
}

pub(crate) struct KnownLists {
    pub worker: Worker,
    store: ListStore,
    pins: Mutex<Pins>,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    /// Bumped whenever a list or a verdict changes; search indexes are rebuilt on change.
    generation: AtomicU64,
    observing: Mutex<()>,
    /// Resources, templates and prompts by upstream; an upstream read from disk once stays here
    /// (empty when the disk had nothing).
    content: Mutex<HashMap<String, CachedContent>>,
    /// Per upstream: its newest list not yet observed (see `stage`), with its `listing_key`.
    staged: Mutex<HashMap<String, Staged>>,
}

/// A list waiting to be observed, with the `listing_key` of the settings it came under.
type Staged = (Arc<Vec<Tool>>, String);

/// A fingerprint of what decides the list an upstream sends: how it is reached and started
/// (transport, command, arguments, directory, environment and headers as written, with their
/// references unresolved), its sandbox and its sign-in. A list fetched under another key may not
/// be the one the upstream would send now; view settings (filters, descriptions, timeouts) are
/// applied to a list, not part of it.
pub fn listing_key(s: &mcpb_config::UpstreamSettings) -> String {
    let launch = serde_json::json!({
        "transport": s.transport,
        "command": s.command,
        "args": s.args,
        "cwd": s.cwd,
        "env": s.env,
        "url": s.url,
        "headers": s.headers,
        "sandbox": s.sandbox,
        "oauth": s.oauth,
    });
    mcpb_catalog::canonical::hash(&launch)
}

/// Quarantined tools of one list named in the log; the rest are counted.
const QUARANTINE_LINES: usize = 5;

/// A temporary file in the catalog older than this is a crashed write's, not one in progress.
const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(600);

impl KnownLists {
    pub(crate) fn new(settings: &mcpb_config::Settings) -> Self {
        let pins = Pins::open(settings.runtime.pins_path(), settings.pins.into());
        if let Some(e) = pins.error() {
            tracing::error!(
                error = e,
                "pin store unreadable: every tool stays quarantined"
            );
        }
        let worker = Worker::new();
        let dir = settings.runtime.catalog_dir();
        worker.submit(move || {
            // Lists and vectors a crashed write left half-made (never read: each is renamed
            // over its file only once complete).
            let removed = mcpb_config::layout::remove_stale_temps(&dir, STALE_TEMP);
            if removed > 0 {
                tracing::info!(
                    removed,
                    "left-over temporary files removed from the catalog"
                );
            }
        });
        Self {
            worker,
            store: ListStore::new(settings.runtime.catalog_dir()),
            pins: Mutex::new(pins),
            entries: Mutex::default(),
            generation: AtomicU64::new(1),
            observing: Mutex::default(),
            content: Mutex::default(),
            staged: Mutex::default(),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The entry of `tools` when it is the list already known (no work to do).
    pub(crate) fn current(&self, upstream: &str, tools: &Arc<Vec<Tool>>) -> Option<Arc<Entry>> {
        self.memory(upstream)
            .filter(|e| Arc::ptr_eq(&e.list.tools, tools))
    }

    /// The known list of `upstream` when it was fetched under `key` (its settings then were
    /// today's): what a listing may answer with before the upstream has started.
    pub(crate) fn warm(&self, upstream: &str, key: &str) -> Option<Arc<Entry>> {
        self.cached(upstream)
            .filter(|e| e.list.config.as_deref() == Some(key))
    }

    /// `tools` is `upstream`'s newest list, for the next `observe_staged`; an older one still
    /// waiting is dropped. Only the newest matters, and an upstream that sends list after list
    /// then costs one list waiting, not one per request that asked for it.
    pub(crate) fn stage(&self, upstream: &str, tools: Arc<Vec<Tool>>, key: String) {
        self.staged
            .lock()
            .insert(upstream.to_string(), (tools, key));
    }

    /// Observes `upstream`'s staged list if one waits: the upstream's entry after that, and
    /// whether this call installed a new list. `None` when nothing waits and nothing is known.
    pub(crate) fn observe_staged(&self, upstream: &str) -> Option<(Arc<Entry>, bool)> {
        let staged = self.staged.lock().remove(upstream);
        let Some((tools, key)) = staged else {
            return self.memory(upstream).map(|e| (e, false));
        };
        let before = self.memory(upstream);
        let entry = self.observe(upstream, &tools, &key);
        let new = before.is_none_or(|b| !Arc::ptr_eq(&b, &entry));
        Some((entry, new))
    }

    /// A list just received from a running upstream whose settings have `key` (`listing_key`).
    /// Cheap when it is the list already known; otherwise it hashes, judges, scans and writes
    /// the list, which the daemon does off its event loop.
    pub(crate) fn observe(&self, upstream: &str, tools: &Arc<Vec<Tool>>, key: &str) -> Arc<Entry> {
        let same = |e: &Arc<Entry>| e.list.config.as_deref() == Some(key);
        if let Some(e) = self.current(upstream, tools).filter(same) {
            return e;
        }
        // One new list at a time: concurrent callers with the same list find it done, and the
        // disk copy and pin store are never written by two threads at once.
        let _one = self.observing.lock();
        if let Some(e) = self.current(upstream, tools).filter(same) {
            return e;
        }
        let known = self.memory(upstream);
        let mut list = CachedList::new(upstream, tools.clone(), mcpb_config::unix_now());
        list.config = Some(key.to_string());
        // The disk copy is read only when memory has none: everything installed came from it
        // or was written to it.
        let known = match known {
            Some(e) => Some((e.list.hash.clone(), e.list.config.clone())),
            None => (self.store.load(upstream).ok().flatten()).map(|d| (d.hash, d.config)),
        };
        if known != Some((list.hash.clone(), list.config.clone()))
            && let Err(e) = self.store.save(&list)
        {
            tracing::warn!(upstream, error = %e, "cannot cache the tool list on disk");
        }
        self.install(list, true)
    }

    /// What is known without starting anything: memory, else the disk cache.
    pub(crate) fn cached(&self, upstream: &str) -> Option<Arc<Entry>> {
        if let Some(e) = self.memory(upstream) {
            return Some(e);
        }
        match self.store.load(upstream) {
            Ok(Some(mut list)) => {
                // Held for the daemon's lifetime: no spare room kept from the parse.
                if let Some(tools) = Arc::get_mut(&mut list.tools) {
                    tools.shrink_to_fit();
                }
                Some(self.install_from_disk(list))
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(upstream, error = %e, "cached tool list unreadable; ignored");
                None
            }
        }
    }

    pub(crate) fn memory(&self, upstream: &str) -> Option<Arc<Entry>> {
        self.entries.lock().get(upstream).cloned()
    }

    /// Whether the catalog has a disk copy of `upstream`'s list (a file exists; it may still
    /// be unreadable).
    pub(crate) fn on_disk(&self, upstream: &str) -> bool {
        self.store.has(upstream)
    }

    fn install(&self, list: CachedList, live: bool) -> Arc<Entry> {
        let entry = self.judged(list, live);
        self.entries
            .lock()
            .insert(entry.list.upstream.clone(), entry.clone());
        self.generation.fetch_add(1, Ordering::SeqCst);
        entry
    }

    /// A disk copy goes in only where memory still has nothing: a live list observed while the
    /// copy was read and judged is newer, and stays.
    fn install_from_disk(&self, list: CachedList) -> Arc<Entry> {
        let read = self.judged(list, false);
        let mut entries = self.entries.lock();
        if let Some(newer) = entries.get(&read.list.upstream) {
            return newer.clone();
        }
        entries.insert(read.list.upstream.clone(), read.clone());
        drop(entries);
        self.generation.fetch_add(1, Ordering::SeqCst);
        read
    }

    fn judged(&self, list: CachedList, live: bool) -> Arc<Entry> {
        // The other lists are held, not copied: their names are borrowed for the scan.
        let other_lists: Vec<Arc<Entry>> = self
            .entries
            .lock()
            .iter()
            .filter(|(k, _)| **k != list.upstream)
            .map(|(_, e)| e.clone())
            .collect();
        let mut others: Vec<&str> = other_lists
            .iter()
            .flat_map(|e| e.by_name.keys().map(String::as_str))
            .collect();
        // In a fixed order, so findings that name several tools read the same every time.
        others.sort_unstable();
        Arc::new(Entry {
            live,
            ..self.judge(list, &others)
        })
    }

    fn judge(&self, list: CachedList, others: &[&str]) -> Entry {
        // The scan may take a while on a large list; the store is locked for the verdicts only.
        let scanned = mcpb_catalog::scan::scan_list(&list.tools, others);
        let judged = {
            let mut pins = self.pins.lock();
            let judged = pins.judge_scanned(
                &list.upstream,
                &list.tools,
                scanned,
                mcpb_config::unix_now(),
            );
            if judged.changed
                && let Err(e) = pins.save()
            {
                tracing::error!(error = %e, "cannot save the pin store");
            }
            judged
        };
        let verdicts = judged.verdicts;
        let findings: Vec<Finding> = judged.findings.into_iter().flatten().collect();
        // A few lines per list, not one per tool: an upstream sending thousands of new tools
        // again and again would otherwise rotate the rest of the log away.
        let held: Vec<(&str, String)> = list
            .tools
            .iter()
            .zip(&verdicts)
            .filter_map(|(tool, v)| Some((tool.name(), v.as_ref()?.to_string())))
            .collect();
        for (tool, reason) in held.iter().take(QUARANTINE_LINES) {
            tracing::warn!(upstream = %list.upstream, tool, reason = %reason, "tool quarantined");
        }
        if held.len() > QUARANTINE_LINES {
            tracing::warn!(
                upstream = %list.upstream,
                more = held.len() - QUARANTINE_LINES,
                "more tools of this list quarantined; `mcp-broker pins list` shows them all"
            );
        }
        let by_name = list
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name().to_string(), i))
            .collect();
        Entry {
            list,
            verdicts,
            findings,
            by_name,
            live: false,
        }
    }

    /// A reload changed `pins.mode`: the store is read again under the new mode.
    pub(crate) fn set_mode(&self, setting: mcpb_config::PinModeSetting) {
        self.reopen(Some(setting.into()));
    }

    /// Re-reads the pin store (after `mcp-broker pins approve`) and judges every known list again.
    pub(crate) fn reload_pins(&self) {
        self.reopen(None);
    }

    fn reopen(&self, mode: Option<PinMode>) {
        {
            let mut pins = self.pins.lock();
            let mode = mode.unwrap_or(pins.mode());
            *pins = Pins::open(pins.path().to_path_buf(), mode);
        }
        let lists: Vec<(CachedList, bool)> = self
            .entries
            .lock()
            .values()
            .map(|e| (e.list.clone(), e.live))
            .collect();
        for (list, live) in lists {
            self.install(list, live);
        }
    }

    /// An upstream's last listing under `key` (`resources`, `resourceTemplates`, `prompts`):
    /// memory, else the disk copy; `None` when it never listed them.
    pub(crate) fn content(&self, upstream: &str, key: &str) -> Option<Arc<Vec<Value>>> {
        let mut content = self.content.lock();
        if !content.contains_key(upstream) {
            let loaded = self.store.load_content(upstream).unwrap_or_else(|e| {
                tracing::warn!(upstream, error = %e, "cached resource and prompt lists unreadable; ignored");
                CachedContent {
                    upstream: upstream.to_string(),
                    ..CachedContent::default()
                }
            });
            content.insert(upstream.to_string(), loaded);
        }
        content.get(upstream)?.lists.get(key).cloned()
    }

    /// A listing just received from a running upstream; what changed is written to disk (on
    /// the catalog's thread).
    pub(crate) async fn observe_content(
        self: &Arc<Self>,
        upstream: &str,
        key: &str,
        items: &[Value],
    ) {
        if self
            .content(upstream, key)
            .is_some_and(|known| known.as_slice() == items)
        {
            return;
        }
        {
            let mut content = self.content.lock();
            let Some(c) = content.get_mut(upstream) else {
                return;
            };
            c.lists.insert(key.to_string(), Arc::new(items.to_vec()));
            c.fetched_at_unix = mcpb_config::unix_now();
        }
        // The job copies what memory holds when it runs, so the last write is the newest.
        let (me, name) = (self.clone(), upstream.to_string());
        let saved = self
            .worker
            .run(move || {
                let snapshot = me.content.lock().get(&name).cloned();
                snapshot.map_or(Ok(()), |c| me.store.save_content(&c))
            })
            .await;
        if let Some(Err(e)) = saved {
            tracing::warn!(upstream, error = %e, "cannot cache the resource and prompt lists on disk");
        }
    }

    pub(crate) fn pin_error(&self) -> Option<String> {
        self.pins.lock().error().map(str::to_string)
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// One thread of its own for the catalog's heavy work (hashing, judging, scanning and writing a
/// new list), so a large list never stalls the sessions on the daemon's event loop. One
/// long-lived thread rather than the blocking pool: every pool thread would keep its own
/// allocator arena, which measured ~9 MB more resident memory with 40 upstreams.
pub(crate) struct Worker {
    tx: Mutex<Option<std::sync::mpsc::Sender<Job>>>,
}

impl Worker {
    pub(crate) fn new() -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("catalog".into())
            .spawn(move || {
                for job in rx {
                    // A job that panics loses its own result (its caller sees `None`), never
                    // the thread: the jobs after it would otherwise run on the event loop.
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                        tracing::error!("a catalog job failed; the next ones go on");
                    }
                }
            });
        if let Err(e) = &spawned {
            tracing::warn!(error = %e, "no catalog thread; lists are catalogued on the event loop");
        }
        Self {
            tx: Mutex::new(spawned.ok().map(|_| tx)),
        }
    }

    /// Runs `f` on the catalog thread (or here, when there is none) without waiting for it.
    pub(crate) fn submit(&self, f: impl FnOnce() + Send + 'static) {
        let tx = self.tx.lock().clone();
        let job: Job = Box::new(f);
        let leftover = match tx {
            Some(tx) => tx.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = leftover {
            job();
        }
    }

    /// Runs `f` on the catalog thread (or here, when there is none) and waits for its result;
    /// `None` only if the job was lost (it panicked).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (done, result) = tokio::sync::oneshot::channel();
        self.submit(move || {
            let _ = done.send(f());
        });
        result.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_copy_never_replaces_a_live_list() {
        let home = tempfile::tempdir().unwrap();
        let text = format!(
            "schema_version: 1\nruntime:\n  root: {}\nupstreams:\n  git: {{command: /nonexistent}}\n",
            home.path().display()
        );
        let settings = mcpb_config::load_str(
            &text,
            "test",
            mcpb_config::ConfigSource::Embedded,
            &mcpb_config::ResolveContext::default(),
        )
        .unwrap();
        let known = KnownLists::new(&settings);
        let tool = |n: &str| Tool::from_value(&serde_json::json!({"name": n})).unwrap();
        let old = CachedList::new("git", Arc::new(vec![tool("old")]), 1);
        let live = known.observe("git", &Arc::new(vec![tool("new")]), "k");
        assert!(live.live);
        // A copy read from disk while the live list came in loses to it.
        let got = known.install_from_disk(old);
        assert!(Arc::ptr_eq(&got, &live));
        assert!(Arc::ptr_eq(&known.memory("git").unwrap(), &live));
        assert!(
            known.on_disk("git"),
            "the live list was written to the catalog"
        );
        assert!(!known.on_disk("never-listed"));
    }
}
