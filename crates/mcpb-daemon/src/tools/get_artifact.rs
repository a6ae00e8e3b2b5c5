//! `broker.get_artifact`: a page of a stored large result of this profile.

use mcpb_protocol::BrokerRpcError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error};

/// Page length when neither the call nor the profile's budget gives one.
pub const DEFAULT_PAGE_CHARS: usize = 20_000;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = require_id)]
pub struct Args {
    #[serde(default)]
    pub id: String,
    /// In characters, default 0
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// In characters
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub length: Option<usize>,
}

fn require_id(schema: &mut schemars::Schema) {
    mcpb_facade::schema::require(schema, &["id"]);
}

pub struct GetArtifact;

impl BrokerTool for GetArtifact {
    const VERB: &'static str = super::names::GET_ARTIFACT.verb;
    const MUTATES: bool = false;
    const NEEDS_EXEC: bool = false;
    const EXEC_BROKER: Option<&'static str> = super::names::GET_ARTIFACT.exec_broker;
    type Args = Args;

    fn description(_: Naming) -> String {
        "Read a stored large result by artifact id, a page at a time.".to_string()
    }
}

impl Apply for GetArtifact {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        let profile = ctx.profile();
        let length = args.length.unwrap_or_else(|| {
            profile
                .result_budget_chars
                .and_then(|b| usize::try_from(b).ok())
                .unwrap_or(DEFAULT_PAGE_CHARS)
        });
        let page = ctx
            .artifacts
            .get(&profile.name, &args.id, args.offset.unwrap_or(0), length);
        done(match page {
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
                "unknown artifact '{id}'\nhint: artifact ids come from a {} result of this profile and expire",
                super::names::CALL_TOOL.under(ctx.naming())
            )),
            Err(e) => tool_error(e.to_string()),
        })
    }
}
