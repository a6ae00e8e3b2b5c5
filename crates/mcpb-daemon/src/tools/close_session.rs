//! `broker.close_session`: stops the caller's own per-session instances of the profile's
//! upstreams; shared ones keep running.

use mcpb_protocol::BrokerRpcError;
use serde_json::json;

use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_result};

/// Takes no arguments (any given are ignored).
pub type Args = super::NoArgs;

pub struct CloseSession;

impl BrokerTool for CloseSession {
    const VERB: &'static str = super::names::CLOSE_SESSION.verb;
    const MUTATES: bool = true;
    const NEEDS_EXEC: bool = false;
    type Args = Args;

    fn description(_: Naming) -> String {
        "Stop the server processes started for this session only. Shared servers keep running."
            .to_string()
    }
}

impl Apply for CloseSession {
    async fn apply(ctx: Ctx<'_>, _args: Args) -> Result<Answer, BrokerRpcError> {
        let released = ctx.servers.release_session().await;
        done(tool_result(json!({"released": released})))
    }
}
