//! `broker.exec_close`: closes an exec workspace; a persisted one is kept unless `discard`.

use mcpb_protocol::BrokerRpcError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::exec_open::exec_enabled;
use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error, tool_result};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = require_exec_id)]
pub struct Args {
    #[serde(default)]
    pub exec_id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discard: bool,
}

fn require_exec_id(schema: &mut schemars::Schema) {
    mcpb_facade::schema::require(schema, &["exec_id"]);
}

pub struct ExecClose;

impl BrokerTool for ExecClose {
    const VERB: &'static str = super::names::EXEC_CLOSE.verb;
    const MUTATES: bool = true;
    const NEEDS_EXEC: bool = true;
    const EXEC_BROKER: Option<&'static str> = super::names::EXEC_CLOSE.exec_broker;
    type Args = Args;

    fn description(_: Naming) -> String {
        "Close an exec workspace (kept if persisted, unless `discard`).".to_string()
    }
}

impl Apply for ExecClose {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        if let Err(e) = exec_enabled(&ctx) {
            return done(e);
        }
        let closed = ctx
            .exec
            .workspaces
            .close(&ctx.profile().name, &args.exec_id, args.discard);
        done(match closed {
            Ok(removed) => tool_result(json!({"exec_id": args.exec_id, "removed": removed})),
            Err(e) => tool_error(e.to_string()),
        })
    }
}
