//! A raw `tools/list` that never makes a client wait on what the catalog already knows: an
//! upstream whose last list was fetched under today's settings answers from that list at once
//! (a shared one is started behind the answer); the others are started together and waited for
//! up to `broker.first_list_wait_ms`; whatever arrives later, or differs from what was
//! answered, is announced with `notifications/tools/list_changed`. A client's own request
//! timeout (often 10 s for a whole start-up) never has to cover forty cold starts.

use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use mcpb_config::Lifecycle;
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::Upstream;

use super::{ProfileView, VisibleTool};
use crate::known::{Entry, listing_key};

/// How long after a listing answered from known lists their shared upstreams start.
const START_BEHIND_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

type Fetch = tokio::task::JoinHandle<Result<Arc<Entry>, BrokerRpcError>>;

impl ProfileView {
    /// Every visible tool of the profile, for a raw listing (`listing`: see the module's doc)
    /// or for a search, a description, a compact profile's pinned tools (any list the catalog
    /// knows answers; only upstreams it never listed are started). Either way upstreams that
    /// are not known are waited for within `broker.first_list_wait_ms` and announced when they
    /// come later. The answer is never empty because servers were slow: when nothing is known
    /// by the deadline, the first upstream to answer is waited for.
    pub(crate) async fn gather_tools(&self, listing: bool) -> Vec<VisibleTool> {
        let (ups, entries) = self.gather_entries(listing).await;
        ups.iter()
            .zip(entries)
            .filter_map(|(up, e)| Some(VisibleTool::all_of(&self.profile, up, &e?)))
            .flatten()
            .collect()
    }

    /// The profile's upstreams and each one's list as `gather_tools` finds them (`None`: left
    /// out for now).
    pub(crate) async fn gather_entries(
        &self,
        listing: bool,
    ) -> (Vec<Arc<Upstream>>, Vec<Option<Arc<Entry>>>) {
        let deadline =
            tokio::time::Instant::now() + self.generation.settings.broker.first_list_wait;
        let ups = self.upstreams();
        let mut entries: Vec<Option<Arc<Entry>>> = vec![None; ups.len()];
        // Starts this listing begins are waited for; one already under way (begun by an
        // earlier listing that waited its share, or by a call) only when nothing else is known.
        let (mut ours, mut under_way) = (Vec::new(), Vec::new());
        let mut behind = Vec::new();
        for (i, up) in ups.iter().enumerate() {
            let known = if listing {
                self.warm_entry(up)
            } else {
                self.shared.known.cached(up.name())
            };
            if let Some(known) = known {
                if listing && up.settings().lifecycle == Lifecycle::Shared {
                    behind.push((up.clone(), known.clone()));
                }
                entries[i] = Some(known);
                continue;
            }
            let already = up.starting() && !up.has_list();
            let (view, fetched) = (self.clone(), up.clone());
            let task: Fetch = tokio::spawn(async move { view.fetch_entry(&fetched, false).await });
            let waiting = Waiting {
                i,
                view: self.clone(),
                up: up.clone(),
                task: Some(task),
            };
            if already { &mut under_way } else { &mut ours }.push(waiting);
        }
        self.start_behind(behind);
        wait_for_lists(&ups, &mut entries, ours, deadline).await;
        if entries.iter().all(Option::is_none) {
            wait_for_lists(&ups, &mut entries, under_way, deadline).await;
        }
        // Each upstream still starting is followed from here on (`Waiting`'s drop).
        (ups, entries)
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

    /// Starts shared upstreams whose known lists answered, once the answer is on its way and
    /// one at a time (each start forks on the event loop: forty at once would hold up the
    /// answer and the client's next requests); sessions hear of a list that differs.
    fn start_behind(&self, behind: Vec<(Arc<Upstream>, Arc<Entry>)>) {
        if behind.is_empty() {
            return;
        }
        let view = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(START_BEHIND_AFTER).await;
            for (up, answered) in behind {
                let view = view.clone();
                tokio::spawn(async move {
                    match view.fetch_entry(&up, false).await {
                        Ok(now) if now.list.hash != answered.list.hash => {
                            tracing::info!(
                                upstream = up.name(),
                                "tool list differs from the known one"
                            );
                            view.shared.registry.list_changed(up.name());
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(upstream = up.name(), error = %e, "start after listing failed")
                        }
                    }
                });
                tokio::task::yield_now().await;
            }
        });
    }

    /// An upstream the listing answered without: sessions hear when its list arrives. A
    /// per-session instance started for a session that has closed meanwhile is stopped.
    fn announce_when_listed(&self, up: &Arc<Upstream>, task: Fetch) {
        let (view, up) = (self.clone(), up.clone());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let listed = matches!(task.await, Ok(Ok(_)));
            if up.settings().lifecycle == Lifecycle::PerSession
                && !view.shared.registry.is_open(view.session)
            {
                up.release_session(view.session).await;
                return;
            }
            if listed {
                tracing::info!(upstream = up.name(), "listed after the first answer");
                view.shared.registry.list_changed(up.name());
            }
        });
    }
}

/// Waits for `waiting` until `deadline`, and past it while nothing at all is known.
async fn wait_for_lists(
    ups: &[Arc<Upstream>],
    entries: &mut [Option<Arc<Entry>>],
    waiting: Vec<Waiting>,
    deadline: tokio::time::Instant,
) {
    let mut pending: FuturesUnordered<Waiting> = waiting.into_iter().collect();
    loop {
        let next = if entries.iter().all(Option::is_none) {
            pending.next().await
        } else {
            match tokio::time::timeout_at(deadline, pending.next()).await {
                Ok(next) => next,
                Err(_) => break,
            }
        };
        let Some((i, got)) = next else { break };
        match got {
            Ok(entry) => entries[i] = Some(entry),
            Err(e) => {
                tracing::error!(upstream = ups[i].name(), error = %e, "left out of the tool list")
            }
        }
    }
}

/// One upstream the listing waits for. When the listing stops waiting (its deadline, or its
/// client went away), the start goes on and is followed by `announce_when_listed`.
struct Waiting {
    i: usize,
    view: ProfileView,
    up: Arc<Upstream>,
    task: Option<Fetch>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            self.view.announce_when_listed(&self.up, task);
        }
    }
}

impl std::future::Future for Waiting {
    type Output = (usize, Result<Arc<Entry>, BrokerRpcError>);

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let i = self.i;
        let Some(task) = self.task.as_mut() else {
            return std::task::Poll::Pending;
        };
        let done = std::task::ready!(std::pin::Pin::new(task).poll(cx));
        self.task = None;
        let got = done
            .map_err(|e| BrokerRpcError::Internal(format!("listing the upstream failed: {e}")))
            .and_then(|r| r);
        std::task::Poll::Ready((i, got))
    }
}
