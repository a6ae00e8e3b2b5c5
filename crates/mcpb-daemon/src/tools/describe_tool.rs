//! `broker.describe_tool`: full definitions of visible tools, by the names search returned;
//! unknown names get the closest visible ones.

use mcpb_protocol::BrokerRpcError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error, tool_result};

/// Names described in one call; more are ignored.
pub const MAX_NAMES: usize = 20;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Args {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_NAMES))]
    pub names: Vec<String>,
}

impl Args {
    /// Every name asked for, `names` first, at most MAX_NAMES.
    pub fn into_names(self) -> Vec<String> {
        let mut names = self.names;
        names.extend(self.name);
        names.truncate(MAX_NAMES);
        names
    }
}

pub struct DescribeTool;

impl BrokerTool for DescribeTool {
    const VERB: &'static str = super::names::DESCRIBE_TOOL.verb;
    const MUTATES: bool = false;
    const NEEDS_EXEC: bool = false;
    const EXEC_BROKER: Option<&'static str> = super::names::DESCRIBE_TOOL.exec_broker;
    type Args = Args;

    fn description(_: Naming) -> String {
        "Full definition (input schema, annotations) of one or more tools, by the names search returned.".to_string()
    }
}

impl Apply for DescribeTool {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        done(describe(&ctx, args).await)
    }
}

async fn describe(ctx: &Ctx<'_>, args: Args) -> Value {
    let names = args.into_names();
    if names.is_empty() {
        return tool_error("give name or names");
    }
    let mut tools = Vec::new();
    let mut unknown = Vec::new();
    for name in &names {
        match ctx.gate.resolve(name, false).await {
            Ok(tool) => {
                let mut def = tool.exposed_definition();
                if let Some(obj) = def.as_object_mut() {
                    obj.insert("server".into(), tool.upstream.name().into());
                    obj.insert("mutating".into(), tool.mutating.into());
                }
                tools.push(def);
            }
            Err(BrokerRpcError::UnknownTool(_)) => unknown.push(json!({
                "name": name,
                "did_you_mean": ctx.catalog.suggest(name).await,
            })),
            Err(e) => unknown.push(json!({"name": name, "error": e.to_string()})),
        }
    }
    if tools.is_empty() {
        let mut r = tool_result(json!({"tools": [], "unknown": unknown}));
        r["isError"] = true.into();
        return r;
    }
    let mut out = json!({"tools": tools});
    if !unknown.is_empty() {
        out["unknown"] = unknown.into();
    }
    tool_result(out)
}
