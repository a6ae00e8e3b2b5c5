//! `broker.list_servers`: the profile's upstreams from configuration and known lists; starts
//! nothing.

use mcpb_protocol::BrokerRpcError;
use serde_json::{Value, json};

use mcpb_config::Vocabulary;

use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_result};

/// Takes no arguments (any given are ignored).
pub type Args = super::NoArgs;

pub struct ListServers;

impl BrokerTool for ListServers {
    const VERB: &'static str = super::names::LIST_SERVERS.verb;
    const MUTATES: bool = false;
    const NEEDS_EXEC: bool = false;
    const EXEC_BROKER: Option<&'static str> = super::names::LIST_SERVERS.exec_broker;
    type Args = Args;

    fn description(n: Naming) -> String {
        let next = match n.vocabulary {
            Vocabulary::Broker => {
                format!("{} to find tools", super::names::SEARCH_TOOLS.under(n))
            }
            Vocabulary::ExecBroker => format!(
                "{} for a server's tools",
                super::names::SERVER_TOOLS_LIST.under(n)
            ),
        };
        format!(
            "List the MCP servers behind this broker: name, description, tags, tool count, state. Then {next}."
        )
    }
}

impl Apply for ListServers {
    async fn apply(ctx: Ctx<'_>, _args: Args) -> Result<Answer, BrokerRpcError> {
        let servers: Vec<Value> = ctx
            .servers
            .list()
            .iter()
            .map(|up| {
                let s = up.settings();
                json!({
                    "name": s.name,
                    "description": s.description,
                    "tags": s.tags,
                    "tools": ctx.servers.known_count(up),
                    "state": up.status().state,
                })
            })
            .collect();
        done(tool_result(json!({"servers": servers})))
    }
}
