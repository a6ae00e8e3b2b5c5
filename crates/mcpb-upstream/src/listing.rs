//! An upstream's tool list as the broker accepts it: every page of `tools/list` within the byte
//! cap, each tool read and checked on its own so one bad definition never takes the list.

use std::time::Duration;

use mcpb_protocol::message::to_raw;
use serde_json::Value;

use crate::UpstreamError;
use crate::instance::{Instance, Reply};
use crate::upstream::RejectedTool;

/// A tool list as accepted: the usable definitions and the ones refused.
pub(crate) struct ToolList {
    pub tools: Vec<Value>,
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
