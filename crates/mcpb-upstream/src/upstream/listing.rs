//! An upstream's tool list as the broker accepts it: every page of `tools/list` within the byte
//! and count caps, each tool read and checked on its own so one bad definition never takes the
//! list; and the refresh of a list the upstream announced as changed, off the caller's path.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpb_protocol::message::to_raw;

use super::{REFRESH_WAIT, RejectedTool, Upstream};
use crate::UpstreamError;
use crate::instance::{Instance, Reply};

/// The least time between two refreshes of one upstream's list: an upstream announcing changes
/// faster (a storm of `list_changed`) is listed once a second, not once per announcement; each
/// new list costs the catalog hashing, judging and embedding.
pub(crate) const REFRESH_SPACING: Duration = Duration::from_secs(1);

/// A tool list as accepted: the usable definitions and the ones refused.
pub(crate) struct ToolList {
    pub tools: Vec<mcpb_protocol::Tool>,
    pub rejected: Vec<RejectedTool>,
}

/// `tools/list`, following `nextCursor` until the upstream has sent everything. The whole list
/// is capped at `max_bytes`; each tool is read on its own, so one unreadable or badly named tool
/// is refused alone instead of taking the list with it.
pub(crate) async fn list_all_tools(
    inst: &Instance,
    name: &str,
    timeout: Duration,
    max_bytes: usize,
    max_tools: usize,
) -> Result<ToolList, UpstreamError> {
    let protocol = |reason: String| UpstreamError::Protocol {
        upstream: name.to_string(),
        reason,
    };
    let mut list = ToolList {
        tools: Vec::new(),
        rejected: Vec::new(),
    };
    let mut total = 0usize;
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = match &cursor {
            Some(c) => Some(
                to_raw(&serde_json::json!({"cursor": c})).map_err(|e| protocol(e.to_string()))?,
            ),
            None => None,
        };
        let reply = inst
            .request("tools/list", params.as_deref(), timeout)
            .await?;
        let result = match reply {
            Reply::Result(r) => r,
            Reply::Error(e) => return Err(protocol(format!("tools/list failed: {e}"))),
        };
        total = total.saturating_add(result.get().len());
        if total > max_bytes {
            return Err(protocol(format!(
                "its tool list is over broker.max_tool_list_bytes ({max_bytes} bytes); hint: raise the cap or narrow the server's tools"
            )));
        }
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tools: Vec<Box<serde_json::value::RawValue>>,
            #[serde(rename = "nextCursor", default)]
            next_cursor: Option<String>,
        }
        let page: Page = serde_json::from_str(result.get())
            .map_err(|e| protocol(format!("unreadable tools/list result: {e}")))?;
        // Parsed definitions cost several times their text: the count is capped as well.
        if list.tools.len() + list.rejected.len() + page.tools.len() > max_tools {
            return Err(protocol(format!(
                "its tool list has more than broker.max_tools_per_list ({max_tools}) tools; hint: raise the cap or narrow the server's tools"
            )));
        }
        for raw in page.tools {
            let index = list.tools.len() + list.rejected.len();
            match crate::toolcheck::accept(&raw, index) {
                Ok(tool) => list.tools.push(tool),
                Err(rejected) => {
                    tracing::warn!(upstream = name, tool = %rejected.tool, reason = %rejected.reason, "tool refused");
                    list.rejected.push(rejected);
                }
            }
        }
        match page.next_cursor {
            Some(c) if !c.is_empty() => cursor = Some(c),
            _ => return Ok(list),
        }
    }
    Err(protocol("tools/list never stopped paginating".into()))
}

impl Upstream {
    pub(crate) async fn list_from(&self, inst: &Instance) -> Result<ToolList, UpstreamError> {
        list_all_tools(
            inst,
            &self.settings.name,
            self.settings.call_timeout,
            self.ctx.max_list_bytes,
            self.ctx.max_list_tools,
        )
        .await
    }

    pub(crate) fn install_list(&self, list: ToolList) {
        let ToolList {
            mut tools,
            rejected,
        } = list;
        // Held until the next list: no spare slots from the reading.
        tools.shrink_to_fit();
        let mut state = self.state.lock();
        state.status.tool_count = Some(tools.len());
        state.status.rejected_tools = rejected;
        state.tools = Some(Arc::new(tools));
    }

    /// Lists the tools of `inst` again, once at a time, off the caller's path, and no sooner
    /// than `REFRESH_SPACING` after the last refresh: the announcements made meanwhile are
    /// answered by that one listing.
    pub(crate) fn refresh_in_background(self: &Arc<Self>, inst: Arc<Instance>) {
        let due = {
            let mut state = self.state.lock();
            if std::mem::replace(&mut state.refreshing, true) {
                return;
            }
            let now = Instant::now();
            let due = state
                .last_refresh
                .map_or(now, |last| (last + REFRESH_SPACING).max(now));
            state.last_refresh = Some(due);
            due
        };
        let up = self.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            tokio::time::sleep_until(due.into()).await;
            let mut listed = false;
            // An instance that ended meanwhile (its session left, it crashed) cannot answer: the
            // list stays marked stale for the next listing, which reaches a live instance.
            if inst.is_alive() {
                // What was announced until now is in the list asked for now.
                up.tools_stale.store(false, Ordering::SeqCst);
                match up.list_from(&inst).await {
                    Ok(list) => {
                        up.install_list(list);
                        listed = true;
                    }
                    Err(e) => {
                        up.tools_stale.store(true, Ordering::SeqCst);
                        if inst.is_alive() {
                            tracing::warn!(upstream = %up.settings.name, error = %e, "refreshing the tool list failed; the last list stays");
                            up.set_status(|s| s.last_error = Some(e.to_string()));
                        }
                    }
                }
            }
            up.state.lock().refreshing = false;
            up.refreshed.notify_waiters();
            // Clients are told to list again when those waiting gave up before the new list
            // came, when the instance ended before it could list, and when a change announced
            // during the listing is not in it; not when a live instance failed to list (the
            // next listing tries again, without a loop of announcements).
            let stale = up.tools_stale.load(Ordering::SeqCst);
            let tell = if listed {
                started.elapsed() >= REFRESH_WAIT || stale
            } else {
                stale && !inst.is_alive()
            };
            if tell && let Some(cb) = &up.ctx.on_list_changed {
                cb(&up.settings.name);
            }
        });
    }
}
