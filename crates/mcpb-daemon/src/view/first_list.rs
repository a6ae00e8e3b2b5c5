//! A raw `tools/list` that never makes a client wait on what the catalog already knows: an
//! upstream whose last list was fetched under today's settings answers from that list at once
//! and is not started (one that starts `eager` is started behind the answer); the others are started together and waited for
//! up to `broker.first_list_wait_ms`; whatever arrives later, or differs from what was
//! answered, is announced with `notifications/tools/list_changed`. A client's own request
//! timeout (often 10 s for a whole start-up) never has to cover forty cold starts.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use mcpb_config::{Lifecycle, StartMode};
use mcpb_upstream::Upstream;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::{ProfileView, VisibleTool};
use crate::known::{Entry, listing_key};

/// How long after a listing answered from known lists their shared upstreams start.
const START_BEHIND_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

/// How long a listing waits for the catalog's thread to read known lists from disk.
const DISK_READ_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// A fetch's outcome: the upstream's entry, `None` when it could not list (logged).
type Got = Option<Arc<Entry>>;

/// The listings' fetches under way, one per upstream (per session for a per-session one): a
/// hundred sessions listing at once start each upstream once, a per-call upstream included,
/// and each late list is announced once.
#[derive(Default)]
pub(crate) struct ListFetches {
    running: Mutex<HashMap<(String, u64), Running>>,
}

struct Running {
    done: watch::Receiver<Option<Got>>,
    /// A listing answered without this fetch's list: it is announced when it comes.
    left_out: bool,
    /// A per-session fetch's task, aborted when its session closes (which kills a
    /// half-started instance at once, as a dropped call does).
    task: Option<tokio::task::AbortHandle>,
}

type Key = (String, u64);

impl ListFetches {
    /// The fetch of `key` under way (`true`: joined), or a new one `start` begins.
    fn join(
        &self,
        key: &Key,
        start: impl FnOnce(watch::Sender<Option<Got>>) -> tokio::task::AbortHandle,
    ) -> (watch::Receiver<Option<Got>>, bool) {
        let mut running = self.running.lock();
        if let Some(r) = running.get(key) {
            return (r.done.clone(), true);
        }
        let (tx, rx) = watch::channel(None);
        running.insert(
            key.clone(),
            Running {
                done: rx.clone(),
                left_out: false,
                task: None,
            },
        );
        drop(running);
        let task = start(tx);
        // Gone already when the fetch ended meanwhile.
        if let Some(r) = self.running.lock().get_mut(key) {
            r.task = Some(task);
        }
        (rx, false)
    }

    /// `session` closed: its per-session fetches stop where they are.
    pub(crate) fn close_session(&self, session: u64) {
        self.running.lock().retain(|(_, s), r| {
            if *s != session || session == 0 {
                return true;
            }
            if let Some(task) = &r.task {
                task.abort();
            }
            false
        });
    }

    /// A listing stops waiting for `key`: its outcome when it came meanwhile, else the fetch
    /// is marked to be announced. Under the same lock as `finish`, so no list falls between.
    fn leave_out(&self, key: &Key, done: &watch::Receiver<Option<Got>>) -> Option<Got> {
        let mut running = self.running.lock();
        if let Some(got) = done.borrow().clone() {
            return Some(got);
        }
        if let Some(r) = running.get_mut(key) {
            r.left_out = true;
        }
        None
    }

    /// The fetch of `key` ended with `got`; whether a listing answered without it.
    fn finish(&self, key: &Key, done: &watch::Sender<Option<Got>>, got: Got) -> bool {
        let mut running = self.running.lock();
        done.send_replace(Some(got));
        running.remove(key).is_some_and(|r| r.left_out)
    }
}

impl ProfileView {
    /// Every visible tool of the profile, for a raw listing (`listing`: see the module's doc)
    /// or for a search, a description, a compact profile's pinned tools (any list the catalog
    /// knows answers; only upstreams it never listed are started). Either way upstreams that
    /// are not known are waited for within `broker.first_list_wait_ms` and announced when they
    /// come later. The answer is never empty because servers were slow: when nothing is known
    /// by the deadline, the first upstream to answer is waited for.
    pub(crate) async fn gather_tools(&self, listing: bool) -> Vec<VisibleTool> {
        let (ups, entries) = self.gather_entries(listing).await;
        self.visible(&ups, entries)
    }

    /// The visible tools of the lists `gather_entries` found.
    pub(crate) fn visible(&self, ups: &[Arc<Upstream>], entries: Vec<Got>) -> Vec<VisibleTool> {
        ups.iter()
            .zip(entries)
            .filter_map(|(up, e)| Some(VisibleTool::all_of(&self.profile, up, &e?)))
            .flatten()
            .collect()
    }

    /// The profile's upstreams and each one's list as `gather_tools` finds them (`None`: left
    /// out for now).
    pub(crate) async fn gather_entries(&self, listing: bool) -> (Vec<Arc<Upstream>>, Vec<Got>) {
        let deadline =
            tokio::time::Instant::now() + self.generation.settings.broker.first_list_wait;
        let ups = self.upstreams();
        self.load_from_disk(&ups, deadline).await;
        let mut entries: Vec<Got> = vec![None; ups.len()];
        // Fetches this listing begins are waited for; one already under way (begun by an
        // earlier listing that waited its share, or a start begun by a call) only when nothing
        // else is known.
        let (mut ours, mut under_way) = (Vec::new(), Vec::new());
        let mut behind = Vec::new();
        for (i, up) in ups.iter().enumerate() {
            let known = if listing {
                self.warm_entry(up)
            } else {
                self.shared.known.cached(up.name())
            };
            if let Some(known) = known {
                // A server that starts on first use stays stopped: its known list is the
                // answer, and its first call starts it (and checks its list against the pins).
                if listing
                    && up.settings().lifecycle == Lifecycle::Shared
                    && up.settings().start == StartMode::Eager
                {
                    behind.push(up.clone());
                }
                entries[i] = Some(known);
                continue;
            }
            let starting = up.starting() && !up.has_list();
            let (key, done, joined) = self.fetch(up);
            let waiting = Waiting { i, key, done };
            if joined || starting {
                under_way.push(waiting);
            } else {
                ours.push(waiting);
            }
        }
        self.start_behind(behind);
        let mut left = self.wait_for_lists(&mut entries, ours, deadline).await;
        if entries.iter().all(Option::is_none) {
            left.extend(self.wait_for_lists(&mut entries, under_way, deadline).await);
        } else {
            left.extend(under_way);
        }
        // The rest are announced when they come. Nothing between here and the answer being
        // queued lets another task run (one thread, and the session's queue takes the answer
        // at once unless its client stopped reading), so the announcement follows the answer.
        for w in left {
            if let Some(got) = self.shared.fetches.leave_out(&w.key, &w.done) {
                entries[w.i] = got;
            }
        }
        (ups, entries)
    }

    /// Reads the catalog's copies of lists not in memory yet (the first listing after a start)
    /// on the catalog's thread: judging a hundred lists there leaves the event loop to the
    /// other sessions meanwhile. That thread may be busy with a large new list: after
    /// `DISK_READ_WAIT` (or `deadline`) the rest is read on the event loop, as it was before.
    async fn load_from_disk(&self, ups: &[Arc<Upstream>], deadline: tokio::time::Instant) {
        let known = self.shared.known.clone();
        let missing: Vec<String> = ups
            .iter()
            .filter(|up| {
                !up.has_list() && known.memory(up.name()).is_none() && known.on_disk(up.name())
            })
            .map(|up| up.name().to_string())
            .collect();
        if missing.is_empty() {
            return;
        }
        let worker = known.clone();
        let read = worker.worker.run(move || {
            for name in &missing {
                known.cached(name);
            }
        });
        let until = deadline.min(tokio::time::Instant::now() + DISK_READ_WAIT);
        let _ = tokio::time::timeout_at(until, read).await;
    }

    /// Joins or starts the listing fetch of `up` for this view.
    fn fetch(&self, up: &Arc<Upstream>) -> (Key, watch::Receiver<Option<Got>>, bool) {
        let session = match up.settings().lifecycle {
            Lifecycle::PerSession => self.session,
            Lifecycle::Shared | Lifecycle::PerCall | Lifecycle::Disabled => 0,
        };
        let key: Key = (up.name().to_string(), session);
        let (view, up, k) = (self.clone(), up.clone(), key.clone());
        let (done, joined) = self.shared.fetches.join(&key, move |tx| {
            let task = tokio::spawn(async move {
                let got = match view.fetch_entry(&up, false).await {
                    Ok(e) => Some(e),
                    Err(e) => {
                        tracing::error!(upstream = up.name(), error = %e, "left out of the tool list");
                        None
                    }
                };
                let listed = got.is_some();
                let left_out = view.shared.fetches.finish(&k, &tx, got);
                if session != 0 && !view.shared.registry.is_open(session) {
                    // Started for a session that closed meanwhile.
                    up.release_session(session).await;
                } else if left_out && listed {
                    tracing::info!(upstream = up.name(), "listed after the first answer");
                    view.shared.registry.list_changed(up.name());
                }
            });
            task.abort_handle()
        });
        (key, done, joined)
    }

    /// Waits for `waiting` until `deadline`, and past it while nothing at all is known;
    /// returns those still under way.
    async fn wait_for_lists(
        &self,
        entries: &mut [Got],
        waiting: Vec<Waiting>,
        deadline: tokio::time::Instant,
    ) -> Vec<Waiting> {
        let mut pending: FuturesUnordered<_> = waiting
            .iter()
            .enumerate()
            .map(|(n, w)| {
                let mut done = w.done.clone();
                async move {
                    let got = done
                        .wait_for(Option::is_some)
                        .await
                        .ok()
                        .and_then(|g| g.clone());
                    (n, got.flatten())
                }
            })
            .collect();
        let mut came = vec![false; waiting.len()];
        loop {
            let next = if entries.iter().all(Option::is_none) {
                pending.next().await
            } else {
                match tokio::time::timeout_at(deadline, pending.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                }
            };
            let Some((n, got)) = next else { break };
            came[n] = true;
            entries[waiting[n].i] = got;
        }
        drop(pending);
        waiting
            .into_iter()
            .zip(came)
            .filter_map(|(w, came)| (!came).then_some(w))
            .collect()
    }

    /// The profile's upstreams a listing now would answer without: starting, with no list
    /// that may stand for theirs. Their tools follow with `notifications/tools/list_changed`.
    pub(crate) fn still_starting(&self) -> Vec<String> {
        self.upstreams()
            .iter()
            .filter(|up| up.starting() && !up.has_list() && self.warm_entry(up).is_none())
            .map(|up| up.name().to_string())
            .collect()
    }

    /// The catalog's list of `up` when it may answer for the upstream without starting it: no
    /// instance holds a list, the last start did not fail (that path answers at once anyway),
    /// and the list was fetched under the upstream's settings of today.
    fn warm_entry(&self, up: &Arc<Upstream>) -> Option<Arc<Entry>> {
        if up.has_list() || up.failing().is_some() {
            return None;
        }
        self.shared
            .known
            .warm(up.name(), &listing_key(up.settings()))
    }

    /// Starts eager shared upstreams whose known lists answered, once the answer is on its way, each
    /// on its own turn of the event loop (each start forks there: forty at once would hold up
    /// the answer and the client's next requests). A list that differs from the known one is
    /// announced by `fetch_entry`.
    fn start_behind(&self, behind: Vec<Arc<Upstream>>) {
        if behind.is_empty() {
            return;
        }
        let view = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(START_BEHIND_AFTER).await;
            for up in behind {
                let view = view.clone();
                tokio::spawn(async move {
                    if let Err(e) = view.fetch_entry(&up, false).await {
                        tracing::warn!(upstream = up.name(), error = %e, "start after listing failed");
                    }
                });
                tokio::task::yield_now().await;
            }
        });
    }
}

/// One upstream a listing waits for.
struct Waiting {
    i: usize,
    key: Key,
    done: watch::Receiver<Option<Got>>,
}
