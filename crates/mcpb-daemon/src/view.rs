//! What one profile sees: the tools of its upstreams that are approved (pins) and allowed
//! (policy), under their exposed names. Listing, raw calls and every facade tool go through
//! here, so a tool hidden in one place is hidden in all of them.

use std::sync::Arc;

use mcpb_config::{ProfileSettings, UpstreamSettings};
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{CallOptions, ClientLink, Outgoing, Reply, Upstream};
use serde_json::Value;

use crate::broker::{Broker, upstream_error};
use crate::catalog::Entry;

/// One tool as a profile sees it.
#[derive(Clone)]
pub struct Seen {
    pub upstream: Arc<Upstream>,
    pub entry: Arc<Entry>,
    pub index: usize,
    pub exposed: String,
    pub mutating: bool,
}

impl Seen {
    pub fn definition(&self) -> &Value {
        &self.entry.tools()[self.index]
    }

    pub fn tool_name(&self) -> &str {
        self.definition()
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// Sends `tools/call` with `params` (any `name` in them is replaced by the upstream's own),
    /// telling the upstream the profile's result budget when it has one.
    pub async fn call(
        &self,
        profile: &ProfileSettings,
        session: u64,
        params: &serde_json::value::RawValue,
        link: Arc<dyn ClientLink>,
    ) -> Result<Reply, BrokerRpcError> {
        let budget = profile.result_budget_chars.map(|b| b.to_string());
        let meta: Vec<(&str, &str)> = budget
            .as_deref()
            .map(|b| ("mcp-broker/result_budget_chars", b))
            .into_iter()
            .collect();
        let settings = self.upstream.settings();
        let opts = CallOptions {
            idle_timeout: settings.call_timeout,
            max_time: settings.max_call,
            link: Some(link),
        };
        let outgoing = Outgoing::ToolCall {
            tool: self.tool_name(),
            params,
            meta: &meta,
            // The upstream puts in the operator's allowlist of client `_meta` keys.
            forward_meta: &[],
        };
        self.upstream
            .call(session, outgoing, &opts)
            .await
            .map_err(upstream_error)
    }

    /// The definition with its exposed name, as a client lists it.
    pub fn exposed_definition(&self) -> Value {
        let mut def = self.definition().clone();
        if let Some(obj) = def.as_object_mut() {
            obj.insert("name".into(), Value::String(self.exposed.clone()));
        }
        def
    }
}

pub fn sep(profile: &ProfileSettings) -> &'static str {
    profile.broker_tool_name_style.separator()
}

fn dotted(up: &UpstreamSettings, tool: &str) -> String {
    format!("{}.{tool}", up.name)
}

/// Whether the profile may see tool `i` of `entry`: approved and allowed.
fn sees(profile: &ProfileSettings, up: &UpstreamSettings, entry: &Entry, i: usize) -> bool {
    entry.approved(i) && mcpb_policy::allows(profile, up, &entry.tools()[i])
}

/// The visible tools of one upstream, in list order.
pub fn visible(
    profile: &ProfileSettings,
    upstream: &Arc<Upstream>,
    entry: &Arc<Entry>,
) -> Vec<Seen> {
    let up = upstream.settings();
    entry
        .tools()
        .iter()
        .enumerate()
        .filter(|(i, _)| sees(profile, up, entry, *i))
        .filter_map(|(i, t)| {
            let name = t.get("name").and_then(Value::as_str)?;
            Some(Seen {
                upstream: upstream.clone(),
                entry: entry.clone(),
                index: i,
                exposed: mcpb_catalog::names::exposed(sep(profile), &up.name, name),
                mutating: !mcpb_policy::is_read_only(up, t),
            })
        })
        .collect()
}

pub fn is_pinned(profile: &ProfileSettings, seen: &Seen) -> bool {
    let d = dotted(seen.upstream.settings(), seen.tool_name());
    profile.pinned_tools.contains(&d)
}

impl Broker {
    /// The profile's upstreams that are enabled, in the profile's order.
    pub fn profile_upstreams(&self, profile: &ProfileSettings) -> Vec<Arc<Upstream>> {
        let config = self.config();
        profile
            .upstreams
            .iter()
            .filter_map(|n| config.upstreams.get(n))
            .filter(|u| u.settings().enabled())
            .cloned()
            .collect()
    }

    /// The upstream's tool entry, from a running or started instance. An upstream whose last
    /// start failed is not started on the request path: it is retried in the background and
    /// its last known list (if any) answers meanwhile.
    pub async fn fetch_entry(
        &self,
        up: &Arc<Upstream>,
        session: u64,
    ) -> Result<Arc<Entry>, BrokerRpcError> {
        self.list_entry(up, session, false).await
    }

    /// As `fetch_entry`; a call (`for_call`) starts a failing upstream itself, after its backoff:
    /// the caller asked for that upstream and waits for its answer anyway.
    async fn list_entry(
        &self,
        up: &Arc<Upstream>,
        session: u64,
        for_call: bool,
    ) -> Result<Arc<Entry>, BrokerRpcError> {
        if !for_call && let Some(reason) = up.failing() {
            up.retry_in_background();
            return self.catalog.cached(up.name()).ok_or_else(|| {
                BrokerRpcError::UpstreamUnavailable {
                    upstream: up.name().to_string(),
                    reason,
                }
            });
        }
        let tools = up.tools(session).await.map_err(upstream_error)?;
        if let Some(e) = self.catalog.current(up.name(), &tools) {
            return Ok(e);
        }
        // Hashing, judging, scanning and writing a new list happen on the catalog's thread, so
        // a large list never stalls the other sessions on the daemon's one thread.
        let catalog = self.catalog.clone();
        let name = up.name().to_string();
        self.catalog
            .worker
            .run(move || catalog.observe(&name, &tools))
            .await
            .ok_or_else(|| BrokerRpcError::Internal("cataloguing the tool list failed".into()))
    }

    /// The profile's upstreams whose last start failed, with the error: what a listing or a
    /// search says it left out.
    pub fn unavailable(&self, profile: &ProfileSettings) -> Vec<(String, String)> {
        self.profile_upstreams(profile)
            .iter()
            .filter_map(|u| Some((u.name().to_string(), u.failing()?)))
            .collect()
    }

    /// The upstream's entry without starting it when any list is known; started otherwise.
    pub async fn entry(
        &self,
        up: &Arc<Upstream>,
        session: u64,
    ) -> Result<Arc<Entry>, BrokerRpcError> {
        match self.catalog.cached(up.name()) {
            Some(e) => Ok(e),
            None => self.fetch_entry(up, session).await,
        }
    }

    /// Every visible tool of the profile. Upstreams that cannot list are left out (logged).
    pub async fn seen_tools(
        &self,
        profile: &ProfileSettings,
        session: u64,
        start: bool,
    ) -> Vec<Seen> {
        let ups = self.profile_upstreams(profile);
        let lists = futures_util::future::join_all(ups.iter().map(|up| async move {
            let got = if start {
                self.fetch_entry(up, session).await
            } else {
                self.entry(up, session).await
            };
            (up.clone(), got)
        }))
        .await;
        let mut out = Vec::new();
        for (up, got) in lists {
            match got {
                Ok(entry) => out.extend(visible(profile, &up, &entry)),
                Err(e) => {
                    tracing::error!(upstream = up.name(), error = %e, "left out of the tool list")
                }
            }
        }
        out
    }

    /// Finds an exposed name among the profile's visible tools. A hidden, quarantined or absent
    /// tool gets the same answer.
    pub async fn resolve(
        &self,
        profile: &ProfileSettings,
        exposed: &str,
        session: u64,
        fresh: bool,
    ) -> Result<Seen, BrokerRpcError> {
        let unknown = || BrokerRpcError::UnknownTool(exposed.to_string());
        let up_name =
            mcpb_catalog::names::upstream_of(sep(profile), exposed).ok_or_else(unknown)?;
        let upstream = self
            .profile_upstreams(profile)
            .into_iter()
            .find(|u| u.name() == up_name)
            .ok_or_else(unknown)?;
        let entry = if fresh {
            self.list_entry(&upstream, session, true).await?
        } else {
            self.entry(&upstream, session).await?
        };
        let tool_part = &exposed[up_name.len() + sep(profile).len()..];
        let direct = entry
            .index_of(tool_part)
            .filter(|_| exposed.len() < mcpb_catalog::names::MAX_NAME);
        let index = direct
            .or_else(|| {
                entry.tools().iter().position(|t| {
                    t.get("name").and_then(Value::as_str).is_some_and(|n| {
                        mcpb_catalog::names::exposed(sep(profile), up_name, n) == exposed
                    })
                })
            })
            .ok_or_else(unknown)?;
        if !sees(profile, upstream.settings(), &entry, index) {
            return Err(unknown());
        }
        let t = &entry.tools()[index];
        Ok(Seen {
            mutating: !mcpb_policy::is_read_only(upstream.settings(), t),
            upstream,
            entry,
            index,
            exposed: exposed.to_string(),
        })
    }
}
