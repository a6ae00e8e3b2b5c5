//! `broker.get_artifact`: a page of an artifact of this profile.

pub(super) use mcpb_facade::tools::get_artifact::Args;
use mcpb_facade::tools::get_artifact::DEFAULT_PAGE_CHARS;
use serde_json::{Value, json};

use super::tool_error;
use crate::view::ProfileView;

pub(super) fn apply(view: &ProfileView, args: Args) -> Value {
    let profile = &view.profile;
    let length = args.length.unwrap_or_else(|| {
        profile
            .result_budget_chars
            .and_then(|b| usize::try_from(b).ok())
            .unwrap_or(DEFAULT_PAGE_CHARS)
    });
    let store = view.generation.artifacts();
    match store.get(&profile.name, &args.id, args.offset.unwrap_or(0), length) {
        Ok(page) => {
            let mut content = vec![json!({"type": "text", "text": page.text})];
            if let Some(next) = page.next_offset {
                content.push(json!({"type": "text", "text": format!(
                    "[mcp-broker] {} of {} characters shown; next page at offset {next}",
                    next - page.offset, page.total_chars
                )}));
            }
            json!({
                "content": content,
                "structuredContent": {"id": page.id, "offset": page.offset,
                    "total_chars": page.total_chars, "next_offset": page.next_offset},
            })
        }
        Err(mcpb_facade::ArtifactError::Unknown(id)) => tool_error(format!(
            "unknown artifact '{id}'\nhint: artifact ids come from a broker_call_tool result of this profile and expire"
        )),
        Err(e) => tool_error(e.to_string()),
    }
}
