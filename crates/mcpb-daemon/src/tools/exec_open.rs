//! `broker.exec_open`: a workspace for several runs (`exec_run`), kept after `exec_close` when
//! persisted.

use mcpb_protocol::BrokerRpcError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error, tool_result};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Args {
    /// Keep it after exec_close
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist: Option<bool>,
}

pub struct ExecOpen;

impl BrokerTool for ExecOpen {
    const VERB: &'static str = super::names::EXEC_OPEN.verb;
    const MUTATES: bool = true;
    const NEEDS_EXEC: bool = true;
    const EXEC_BROKER: Option<&'static str> = super::names::EXEC_OPEN.exec_broker;
    type Args = Args;

    fn description(_: Naming) -> String {
        "Open a workspace for several runs; gives exec_id.".to_string()
    }
}

impl Apply for ExecOpen {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        if let Err(e) = exec_enabled(&ctx) {
            return done(e);
        }
        let persist = args
            .persist
            .unwrap_or_else(|| ctx.profile().exec.as_ref().is_some_and(|e| e.persist));
        done(
            match ctx.exec.workspaces.open(&ctx.profile().name, persist) {
                Ok(id) => {
                    tool_result(json!({"exec_id": id.hyphenated().to_string(), "persist": persist}))
                }
                Err(e) => tool_error(e.to_string()),
            },
        )
    }
}

/// The exec tools are listed only where exec is configured, but any session may name them.
pub(super) fn exec_enabled(ctx: &Ctx<'_>) -> Result<(), serde_json::Value> {
    match ctx.profile().exec {
        Some(_) => Ok(()),
        None => Err(tool_error("code execution is off for this profile")),
    }
}
