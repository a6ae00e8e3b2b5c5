//! What one profile sees, built per request: the tools of its upstreams that are approved (pins)
//! and allowed (policy), under their exposed names. Raw listing, raw calls, every broker tool,
//! the CLI (an ordinary session) and admin `measure` go through a `ProfileView`, so a tool
//! hidden in one place is hidden in all of them.
//!
//! A view is a handful of `Arc`s taken from the broker at the start of a request: the
//! configuration generation, the known lists, the search indexes, the profile and the session.
//! It never reaches back into the broker.

use std::sync::Arc;

use mcpb_config::ProfileSettings;
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{CallOptions, ClientLink, Outgoing, Reply, Upstream};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::calls::{CallRecord, Outcome, Via};
use crate::error::rpc_error;
use crate::generation::Generation;
use crate::known::{Entry, KnownLists};

/// Characters of an error kept in the audit log.
const MAX_AUDIT_ERROR: usize = 300;

fn audit_error(mut error: String) -> String {
    mcpb_facade::projection::cut_chars(&mut error, MAX_AUDIT_ERROR);
    error
}

mod content;
mod first_list;
mod handles;
mod sandbox_hint;
mod search;
mod shown;
mod tool;

pub(crate) use content::{ResourceOwners, Source};
pub(crate) use first_list::ListFetches;

pub(crate) use handles::{Catalog, Gate, Servers};
pub(crate) use search::{ProfileIndex, SearchCache};
pub(crate) use shown::Shown;
pub(crate) use tool::VisibleTool;

/// A `tools/list` result: the broker tools' definitions, then each visible tool's under its
/// exposed name (serialised from the known lists as they are).
pub(crate) struct Listing {
    facade: Vec<Value>,
    tools: Vec<VisibleTool>,
}

impl serde::Serialize for Listing {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        struct All<'a>(&'a Listing);
        impl serde::Serialize for All<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let (facade, tools) = (&self.0.facade, &self.0.tools);
                let mut seq = s.serialize_seq(Some(facade.len() + tools.len()))?;
                for f in facade {
                    seq.serialize_element(f)?;
                }
                for t in tools {
                    seq.serialize_element(&t.listed())?;
                }
                seq.end()
            }
        }
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("tools", &All(self))?;
        map.end()
    }
}

/// What kind of session this is, chosen at hello from the profile and the hello's `facade`
/// flag (and again whenever the session's profile changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// Every visible tool, raw.
    Raw,
    /// The broker tools plus the profile's pinned tools.
    Compact,
    /// Every visible tool plus the broker tools (the CLI's `tools` commands on a raw profile).
    RawWithFacade,
    /// A budgeted profile (`tool_budget_tokens`, `max_tools`): every visible tool when they
    /// fit, else the broker tools plus what fits of the pinned and most called tools. Every
    /// visible tool can be called either way.
    Budget,
}

impl View {
    pub(crate) fn choose(profile: &ProfileSettings, facade_asked: bool) -> Self {
        if profile.compact_tools_enabled {
            View::Compact
        } else if mcpb_policy::budget::Budget::of(profile).is_some() {
            View::Budget
        } else if facade_asked {
            View::RawWithFacade
        } else {
            View::Raw
        }
    }

    pub(crate) fn has_facade(self) -> bool {
        self != View::Raw
    }
}

/// The daemon-wide state every view shares, as the broker hands it over.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) known: Arc<KnownLists>,
    pub(crate) searches: Arc<SearchCache>,
    pub(crate) exec: Arc<crate::exec::Exec>,
    pub(crate) owners: Arc<ResourceOwners>,
    pub(crate) subscriptions: Arc<crate::notices::Subscriptions>,
    pub(crate) calls: Arc<crate::calls::Calls>,
    /// The open sessions, told when a list they were answered without arrives.
    pub(crate) registry: Arc<crate::link::Registry>,
    /// The listings' fetches under way.
    pub(crate) fetches: Arc<ListFetches>,
}

#[derive(Clone)]
pub(crate) struct ProfileView {
    generation: Arc<Generation>,
    shared: Shared,
    profile: Arc<ProfileSettings>,
    session: u64,
    /// The client's name (`--client` or `clientInfo.name`), for the audit log.
    client: Option<Arc<str>>,
    /// Where the session's client was started: a project's upstreams show only there.
    cwd: Option<Arc<std::path::Path>>,
}

impl ProfileView {
    /// `profile`'s view for one request of `session` on `generation`.
    pub(crate) fn new(
        generation: Arc<Generation>,
        shared: Shared,
        profile: Arc<ProfileSettings>,
        session: u64,
    ) -> Self {
        Self {
            generation,
            shared,
            profile,
            session,
            client: None,
            cwd: None,
        }
    }

    pub(crate) fn profile(&self) -> &ProfileSettings {
        &self.profile
    }

    /// What a broker tool uses beside the view (tools/mod.rs `Ctx`): the code-execution
    /// service and this generation's artifact store.
    pub(crate) fn tool_services(&self) -> (Arc<crate::exec::Exec>, mcpb_facade::ArtifactStore) {
        (self.shared.exec.clone(), self.generation.artifacts())
    }

    /// This generation's runtime layout (the socket, the state dir).
    pub(crate) fn runtime(&self) -> &mcpb_config::RuntimeLayout {
        &self.generation.settings.runtime
    }

    /// An upstream's quarantined tools and scan findings (notes aside) in its last judged list.
    pub(crate) fn trust_counts(&self, upstream: &str) -> (usize, usize) {
        self.shared.known.cached(upstream).map_or((0, 0), |e| {
            (
                e.verdicts.iter().filter(|v| v.is_some()).count(),
                e.findings.iter().filter(|f| f.holds()).count(),
            )
        })
    }

    /// Why the pin store could not be read or written, if it could not.
    pub(crate) fn pin_error(&self) -> Option<String> {
        self.shared.known.pin_error()
    }

    pub(crate) fn with_client(mut self, client: Option<Arc<str>>) -> Self {
        self.client = client;
        self
    }

    pub(crate) fn with_cwd(mut self, cwd: Option<Arc<std::path::Path>>) -> Self {
        self.cwd = cwd;
        self
    }

    pub(crate) fn sep(&self) -> &'static str {
        self.profile.broker_tool_name_style.separator()
    }

    /// The profile's upstreams that are enabled, in the profile's order: a project's only in
    /// a session started in its folder (or one that names no folder). The view's own: outside
    /// it a server is a `Shown`.
    pub(in crate::view) fn upstreams(&self) -> Vec<Arc<Upstream>> {
        self.profile
            .upstreams
            .iter()
            .filter_map(|n| self.generation.upstreams.get(n))
            .filter(|u| u.settings().enabled())
            .filter(|u| match (&u.settings().project, &self.cwd) {
                (Some(project), Some(cwd)) => cwd.starts_with(project),
                _ => true,
            })
            .cloned()
            .collect()
    }

    /// The servers the profile shows (see `upstreams`), as the rest of the daemon may hold them.
    pub(crate) fn servers(&self) -> Vec<Shown> {
        self.upstreams().into_iter().map(Shown::new).collect()
    }

    /// This view's session let go of by each of its servers (its per-session instances stop):
    /// the names of those that had one.
    pub(crate) async fn release_session(&self) -> Vec<String> {
        let mut released = Vec::new();
        for up in self.upstreams() {
            if up.release_session(self.session).await {
                released.push(up.name().to_string());
            }
        }
        released
    }

    /// Each server's own list, as a client that loads it directly sees it (admin `measure`
    /// compares it with the view's), learnt as any listing is; started for this view's
    /// session where needed, and let go of after.
    pub(crate) async fn raw_lists(
        &self,
    ) -> Vec<(String, Result<Arc<Vec<mcpb_protocol::Tool>>, String>)> {
        let mut lists = Vec::new();
        let mut started = Vec::new();
        for up in self.upstreams() {
            if up.status().state != mcpb_upstream::UpstreamState::Running {
                started.push(up.clone());
            }
            let got = up.tools(self.session).await.map_err(|e| e.to_string());
            if let Ok(tools) = &got {
                self.shared.known.observe(
                    up.name(),
                    tools,
                    &crate::known::listing_key(up.settings()),
                );
            }
            lists.push((up.name().to_string(), got));
        }
        self.release_session().await;
        // What the lists taught the catalog stays; the servers started only for them stop.
        for up in started {
            up.stop_after_check().await;
        }
        lists
    }

    /// The profile's upstreams whose last start failed, with the error: what a listing or a
    /// search says it left out.
    pub(crate) fn unavailable(&self) -> Vec<(String, String)> {
        self.upstreams()
            .iter()
            .filter_map(|u| Some((u.name().to_string(), u.failing()?)))
            .collect()
    }

    /// The upstream's tool entry from a running or started instance. An upstream whose last
    /// start failed is not started for a listing: it is retried in the background and its last
    /// known list (if any) answers meanwhile. A call (`for_call`) starts it itself, after its
    /// backoff: the caller asked for that upstream and waits for its answer anyway.
    pub(crate) async fn fetch_entry(
        &self,
        up: &Arc<Upstream>,
        for_call: bool,
    ) -> Result<Arc<Entry>, BrokerRpcError> {
        if !for_call && let Some(reason) = up.failing() {
            up.retry_in_background();
            return self.shared.known.cached(up.name()).ok_or_else(|| {
                BrokerRpcError::UpstreamUnavailable {
                    upstream: up.name().to_string(),
                    reason,
                }
            });
        }
        let tools = up.tools(self.session).await.map_err(rpc_error)?;
        if let Some(e) = self.shared.known.current(up.name(), &tools) {
            return Ok(e);
        }
        // Hashing, judging, scanning and writing a new list happen on the catalog's thread, so
        // a large list never stalls the other sessions on the daemon's one thread. The job holds
        // no list: it observes the newest one staged when it runs, so requests queued behind a
        // storm of lists cost a name each, and every list but the newest is skipped.
        let before = self.shared.known.memory(up.name());
        let known = self.shared.known.clone();
        let name = up.name().to_string();
        let key = crate::known::listing_key(up.settings());
        self.shared.known.stage(&name, tools, key);
        let (entry, new) = self
            .shared
            .known
            .worker
            .run(move || known.observe_staged(&name))
            .await
            .flatten()
            .ok_or_else(|| BrokerRpcError::Internal("cataloguing the tool list failed".into()))?;
        // The whole list, tools held back for review included: they are searched once
        // approved.
        if new && let Some(e) = self.list_embedder(up.settings()) {
            e.submit(&self.shared.known.worker);
        }
        // A listing may have answered with the catalog's copy: sessions hear that the running
        // upstream sends another list. (A live list replacing a live one was announced by the
        // upstream itself.)
        if before.is_some_and(|b| !b.live && b.list.hash != entry.list.hash) {
            tracing::info!(upstream = up.name(), "tool list differs from the known one");
            self.shared.registry.list_changed(up.name());
        }
        Ok(entry)
    }

    /// The upstream's entry without starting it when any list is known; started otherwise.
    pub(crate) async fn entry(&self, up: &Arc<Upstream>) -> Result<Arc<Entry>, BrokerRpcError> {
        match self.shared.known.cached(up.name()) {
            Some(e) => Ok(e),
            None => self.fetch_entry(up, false).await,
        }
    }

    /// Every visible tool of the profile from known lists (an upstream with none is started,
    /// and waited for within `broker.first_list_wait_ms`). Upstreams that cannot list are left
    /// out (logged).
    pub(crate) async fn tools(&self) -> Vec<VisibleTool> {
        self.gather_tools(false).await
    }

    /// The visible tools of one upstream from what is known, without starting it.
    pub(crate) fn known_count(&self, up: &Shown) -> Option<usize> {
        let entry = self.shared.known.cached(up.name())?;
        Some(VisibleTool::all_of(&self.profile, up.upstream(), &entry).len())
    }

    /// What `tools/list` shows: the broker tools plus pinned tools when compact (which starts
    /// nothing: pinned tools come from the known lists), else every visible tool, with the
    /// broker tools in front when the session asked for them (`facade`: their definitions,
    /// from the tools' registry); a budgeted profile shows one or the other (`budgeted`).
    pub(crate) async fn list(
        &self,
        view: View,
        facade: Vec<Value>,
    ) -> Result<Listing, BrokerRpcError> {
        let facade = if view.has_facade() {
            facade
        } else {
            Vec::new()
        };
        if view == View::Compact {
            let mut tools = Vec::new();
            if !self.profile.pinned_tools.is_empty() {
                tools = self.tools().await;
                tools.retain(|t| t.is_pinned(&self.profile));
            }
            return Ok(Listing { facade, tools });
        }
        let tools = self.gather_tools(true).await;
        if view == View::Budget {
            return Ok(self.budgeted(facade, tools));
        }
        Ok(Listing { facade, tools })
    }

    /// A budgeted profile's listing: every tool raw when they fit, else the facade and what
    /// fits of the pinned and the most called tools.
    fn budgeted(&self, facade: Vec<Value>, mut tools: Vec<VisibleTool>) -> Listing {
        use mcpb_policy::budget::{Budget, Candidate, Choice, estimate_tokens};
        let Some(budget) = Budget::of(&self.profile) else {
            return Listing { facade, tools };
        };
        let sized: Vec<(String, usize)> = tools
            .iter()
            .map(|t| {
                let text = serde_json::to_string(&t.listed()).unwrap_or_default();
                (t.dotted(), estimate_tokens(&text))
            })
            .collect();
        let candidates: Vec<Candidate<'_>> = sized
            .iter()
            .zip(&tools)
            .map(|((dotted, tokens), t)| Candidate {
                dotted,
                exposed: &t.exposed,
                tokens: *tokens,
            })
            .collect();
        let facade_tokens = estimate_tokens(&serde_json::to_string(&facade).unwrap_or_default());
        let usage = &self.shared.calls.usage;
        let calls = |exposed: &str| usage.calls(&self.profile.name, exposed);
        match budget.choose(
            &candidates,
            (facade.len(), facade_tokens),
            &self.profile.pinned_tools,
            &calls,
        ) {
            Choice::Raw => Listing {
                facade: Vec::new(),
                tools,
            },
            Choice::Facade(keep) => {
                let mut i = 0;
                tools.retain(|_| {
                    i += 1;
                    keep.binary_search(&(i - 1)).is_ok()
                });
                Listing { facade, tools }
            }
        }
    }

    /// Finds an exposed name among the profile's visible tools; `fresh` lists from the running
    /// upstream (a call), otherwise a known list answers. A hidden, quarantined or absent tool
    /// gets the same answer.
    pub(crate) async fn resolve(
        &self,
        exposed: &str,
        fresh: bool,
    ) -> Result<VisibleTool, BrokerRpcError> {
        let unknown = || BrokerRpcError::UnknownTool(exposed.to_string());
        let upstream = self.owner_of(exposed).ok_or_else(unknown)?;
        let entry = if fresh {
            self.fetch_entry(&upstream, true).await?
        } else {
            self.entry(&upstream).await?
        };
        VisibleTool::find(&self.profile, &upstream, &entry, exposed).ok_or_else(unknown)
    }

    /// `resolve` for a call through `via`: a tool whose upstream cannot be started (or listed)
    /// fails here, before `call`, and the audit log and the counts still get that call.
    pub(crate) async fn resolve_for_call(
        &self,
        exposed: &str,
        via: Via,
    ) -> Result<VisibleTool, BrokerRpcError> {
        let started = std::time::Instant::now();
        let got = self.resolve(exposed, true).await;
        if let Err(e) = &got
            && !matches!(e, BrokerRpcError::UnknownTool(_))
            && let Some(up) = self.owner_of(exposed)
        {
            self.shared.calls.record(&CallRecord {
                outcome: Outcome::Error,
                error: Some(audit_error(e.to_string())),
                ..self.call_record(up.name(), exposed, via, started.elapsed())
            });
        }
        got
    }

    /// The profile's upstream an exposed tool or prompt name belongs to: by its prefix, or the
    /// profile's one upstream in transparent mode.
    pub(crate) fn owner_of(&self, exposed: &str) -> Option<Arc<Upstream>> {
        let ups = self.upstreams();
        if !self.profile.namespace {
            return ups.into_iter().next();
        }
        let up_name = tool::upstream_part(&self.profile, exposed)?;
        ups.into_iter().find(|u| u.name() == up_name)
    }

    /// A raw `tools/call` in this view: the tool must be visible, and in a compact view pinned.
    pub(crate) async fn resolve_raw(
        &self,
        exposed: &str,
        view: View,
    ) -> Result<VisibleTool, BrokerRpcError> {
        let tool = self.resolve_for_call(exposed, Via::Raw).await?;
        if view == View::Compact && !tool.is_pinned(&self.profile) {
            return Err(BrokerRpcError::UnknownTool(exposed.to_string()));
        }
        Ok(tool)
    }

    /// Sends `tools/call` with `params` to the tool's upstream (any `name` in them is replaced
    /// by the upstream's own), telling the upstream the profile's result budget when it has one.
    pub(crate) async fn call(
        &self,
        tool: &VisibleTool,
        params: &RawValue,
        link: Arc<dyn ClientLink>,
        via: Via,
    ) -> Result<Reply, BrokerRpcError> {
        let started = std::time::Instant::now();
        let pending = Unanswered {
            view: self,
            tool,
            via,
            started,
        };
        let mut answer = self.call_upstream(tool, params, link).await;
        std::mem::forget(pending);
        if tool.upstream.settings().sandbox.is_some() {
            answer = answer.map(|r| sandbox_hint::add(r, tool.upstream.name(), tool.tool_name()));
        }
        self.audit(tool, params, via, started.elapsed(), &answer);
        answer
    }

    async fn call_upstream(
        &self,
        tool: &VisibleTool,
        params: &RawValue,
        link: Arc<dyn ClientLink>,
    ) -> Result<Reply, BrokerRpcError> {
        // What the broker would refuse from an upstream it does not send to one: the upstream
        // might choke on it and the caller wait the whole call timeout.
        mcpb_protocol::json::check_text(params.get())
            .map_err(|e| BrokerRpcError::InvalidParams(format!("the call's arguments {e}")))?;
        let budget = self.profile.result_budget_chars.map(|b| b.to_string());
        let meta: Vec<(&str, &str)> = budget
            .as_deref()
            .map(|b| ("mcp-broker/result_budget_chars", b))
            .into_iter()
            .collect();
        let settings = tool.upstream.settings();
        let opts = CallOptions {
            idle_timeout: settings.call_timeout,
            max_time: settings.max_call,
            link: Some(link),
        };
        let outgoing = Outgoing::ToolCall {
            tool: tool.tool_name(),
            params,
            meta: &meta,
        };
        tool.upstream
            .upstream()
            .call(self.session, outgoing, &opts)
            .await
            .map_err(rpc_error)
    }

    fn audit(
        &self,
        tool: &VisibleTool,
        params: &RawValue,
        via: Via,
        took: std::time::Duration,
        answer: &Result<Reply, BrokerRpcError>,
    ) {
        #[derive(serde::Deserialize)]
        struct Args<'a> {
            #[serde(borrow, default)]
            arguments: Option<&'a RawValue>,
        }
        let judged = Judged::of(answer, self.shared.calls.wants_arguments());
        let args = if self.shared.calls.wants_arguments() {
            serde_json::from_str::<Args>(params.get())
                .ok()
                .and_then(|a| a.arguments)
                .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
        } else {
            None
        };
        self.shared.calls.record(&CallRecord {
            outcome: judged.outcome,
            error: judged.error.map(audit_error),
            detail: judged.detail.map(audit_error),
            result_bytes: judged.bytes,
            arguments: args,
            ..self.call_record(tool.upstream.name(), &tool.exposed, via, took)
        });
    }

    /// A call's record as far as who made it and how long it took; the outcome is the caller's.
    fn call_record<'a>(
        &'a self,
        upstream: &'a str,
        tool: &'a str,
        via: Via,
        took: std::time::Duration,
    ) -> CallRecord<'a> {
        CallRecord {
            ts: crate::calls::now_stamp(),
            session: self.session,
            client: self.client.as_deref(),
            profile: &self.profile.name,
            upstream,
            tool,
            via,
            ms: crate::calls::millis(took),
            outcome: Outcome::Ok,
            error: None,
            detail: None,
            result_bytes: 0,
            arguments: None,
        }
    }

    /// Closest visible names; never a hidden one.
    pub(crate) async fn suggest(&self, name: &str) -> Vec<String> {
        let tools = self.tools().await;
        mcpb_facade::suggest::closest(name, tools.iter().map(|t| t.exposed.as_str()), 3)
    }
}

/// A call on its way to its upstream. A cancelled call's future is dropped, as are a session's
/// when it ends, and what is dropped here was never answered: the audit log and the counts
/// still get it, as abandoned. Forgotten once the answer is in.
struct Unanswered<'a> {
    view: &'a ProfileView,
    tool: &'a VisibleTool,
    via: Via,
    started: std::time::Instant,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        let view = self.view;
        view.shared.calls.record(&CallRecord {
            outcome: Outcome::Abandoned,
            error: Some(
                "no answer: the caller gave up on the call (cancelled, its own time limit) or its session ended"
                    .into(),
            ),
            ..view.call_record(
                self.tool.upstream.name(),
                &self.tool.exposed,
                self.via,
                self.started.elapsed(),
            )
        });
    }
}

/// How a call went, as the audit log says it.
struct Judged {
    outcome: Outcome,
    /// The error for the audit log.
    error: Option<String>,
    /// The error for `status`, `top` and the console.
    detail: Option<String>,
    /// The answer's size.
    bytes: usize,
}

impl Judged {
    /// Judges a call's answer; an error's own text goes into `error` only when the audit log
    /// keeps argument values (`wants_arguments`).
    fn of(answer: &Result<Reply, BrokerRpcError>, wants_arguments: bool) -> Judged {
        /// What a failed tool said: its first text block.
        #[derive(serde::Deserialize)]
        struct Said {
            #[serde(default)]
            content: Vec<Block>,
        }
        #[derive(serde::Deserialize)]
        struct Block {
            #[serde(default)]
            text: Option<String>,
        }
        // The text of an error stays out of the audit log unless argument values go there (it
        // may repeat them), but `status`, `top` and the console show it (`detail`).
        let mut detail = None;
        let (outcome, error, bytes) = match answer {
            Ok(Reply::Result(r)) => {
                // Only `isError` is read, with the scanner of text already known to be JSON.
                let failed = mcpb_protocol::scan::member_text(r.get(), "isError") == Some("true");
                let outcome = if failed {
                    detail = serde_json::from_str::<Said>(r.get())
                        .ok()
                        .and_then(|s| s.content.into_iter().find_map(|b| b.text));
                    Outcome::ToolError
                } else {
                    Outcome::Ok
                };
                let error = detail.clone().filter(|_| wants_arguments);
                (outcome, error, r.get().len())
            }
            // An upstream's own message may repeat the arguments (`password 'x' rejected`): it
            // is kept only where argument values are, else its code stands for it.
            Ok(Reply::Error(e)) => {
                let v = serde_json::from_str::<Value>(e.get()).ok();
                let said = v.as_ref().and_then(|v| v.get("message")?.as_str());
                let code = v
                    .as_ref()
                    .and_then(|v| v.get("code")?.as_i64())
                    .unwrap_or(0);
                detail = said.map(|m| format!("error {code}: {m}"));
                let msg = match said {
                    Some(m) if wants_arguments => m.to_string(),
                    _ => format!("the upstream answered error {code}"),
                };
                (Outcome::Error, Some(msg), e.get().len())
            }
            Err(e) => (Outcome::Error, Some(e.to_string()), 0),
        };
        Judged {
            outcome,
            error,
            detail,
            bytes,
        }
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
