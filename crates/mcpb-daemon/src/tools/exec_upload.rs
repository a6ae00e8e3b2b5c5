//! `broker.exec_upload`: a file written into an exec workspace, within the profile's disk
//! quota.

use mcpb_protocol::BrokerRpcError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::exec_open::exec_enabled;
use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error, tool_result};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = require_upload)]
pub struct Args {
    #[serde(default)]
    pub exec_id: String,
    /// Relative to the workspace
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub content: String,
}

fn require_upload(schema: &mut schemars::Schema) {
    mcpb_facade::schema::require(schema, &["exec_id", "path", "content"]);
}

pub struct ExecUpload;

impl BrokerTool for ExecUpload {
    const VERB: &'static str = super::names::EXEC_UPLOAD.verb;
    const MUTATES: bool = true;
    const NEEDS_EXEC: bool = true;
    type Args = Args;

    fn description(_: Naming) -> String {
        "Write a file in an exec workspace.".to_string()
    }
}

impl Apply for ExecUpload {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        if let Err(e) = exec_enabled(&ctx) {
            return done(e);
        }
        let profile = ctx.profile();
        // The workspace's quota is what a run's jail could hold: the profile's disk_kb.
        let quota = profile
            .exec
            .as_ref()
            .map_or(0, |e| e.limits.disk_kb.saturating_mul(1024));
        let written = ctx.exec.workspaces.upload(
            &profile.name,
            &args.exec_id,
            &args.path,
            args.content.as_bytes(),
            quota,
        );
        done(match written {
            Ok(bytes) => tool_result(json!({"path": args.path, "bytes": bytes})),
            Err(e) => tool_error(e.to_string()),
        })
    }
}
