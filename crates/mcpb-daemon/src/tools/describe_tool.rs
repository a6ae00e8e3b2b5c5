//! `broker.describe_tool`: full definitions of visible tools; unknown names get the closest
//! visible ones.

pub(super) use mcpb_facade::tools::describe_tool::Args;
use mcpb_protocol::BrokerRpcError;
use serde_json::{Value, json};

use super::{tool_error, tool_result};
use crate::view::ProfileView;

pub(super) async fn apply(view: &ProfileView, args: Args) -> Value {
    let names = args.into_names();
    if names.is_empty() {
        return tool_error("give name or names");
    }
    let mut tools = Vec::new();
    let mut unknown = Vec::new();
    for name in &names {
        match view.resolve(name, false).await {
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
                "did_you_mean": view.suggest(name).await,
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
