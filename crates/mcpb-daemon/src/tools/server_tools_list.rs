//! `server_tools_list` (the MCP Exec Broker's vocabulary): one server's visible tools, a page
//! at a time, with a one-line description and whether each may change something. Starts only
//! an upstream whose tools were never listed, as search does.

use mcpb_protocol::BrokerRpcError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::search_tools::one_line;
use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error, tool_result};

/// Tools per page.
pub const PAGE: usize = 50;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = require_server)]
pub struct Args {
    /// A server from servers_list
    #[serde(default)]
    pub server: String,
    /// The last page's next_cursor
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

fn require_server(schema: &mut schemars::Schema) {
    mcpb_facade::schema::require(schema, &["server"]);
}

pub struct ServerToolsList;

impl BrokerTool for ServerToolsList {
    const VERB: &'static str = super::names::SERVER_TOOLS_LIST.verb;
    const MUTATES: bool = false;
    const NEEDS_EXEC: bool = false;
    // The broker vocabulary has search_tools with a server and an empty query for this.
    const IN_BROKER: bool = false;
    const EXEC_BROKER: Option<&'static str> = super::names::SERVER_TOOLS_LIST.exec_broker;
    type Args = Args;

    fn description(n: Naming) -> String {
        format!(
            "One server's tools, {PAGE} at a time: name, one-line description, whether it may change something. Then {} for a tool's input schema.",
            super::names::DESCRIBE_TOOL.under(n)
        )
    }
}

impl Apply for ServerToolsList {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        done(list(&ctx, &args).await)
    }
}

async fn list(ctx: &Ctx<'_>, args: &Args) -> Value {
    let view = ctx.catalog;
    let known: Vec<String> = view
        .servers()
        .iter()
        .map(|u| u.name().to_string())
        .collect();
    if !known.contains(&args.server) {
        return tool_error(format!(
            "unknown server '{}'; known servers: {}",
            args.server,
            known.join(", ")
        ));
    }
    let start = match args.cursor.as_deref().map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => return tool_error("invalid cursor: give the last page's next_cursor"),
    };
    let index = view.search_index().await;
    let of_server: Vec<_> = index
        .tools
        .iter()
        .filter(|t| t.upstream.name() == args.server)
        .collect();
    let tools: Vec<Value> = of_server
        .iter()
        .skip(start)
        .take(PAGE)
        .map(|t| {
            let description = t.definition().description();
            json!({
                "name": t.exposed,
                "description": one_line(description.as_deref().unwrap_or("")),
                "mutating": t.mutating,
            })
        })
        .collect();
    let mut out = json!({"server": args.server, "tools": tools, "total": of_server.len()});
    if start + PAGE < of_server.len() {
        out["next_cursor"] = (start + PAGE).to_string().into();
    }
    tool_result(out)
}
