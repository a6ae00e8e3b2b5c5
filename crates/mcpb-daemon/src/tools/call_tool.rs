//! `broker.call_tool`: calls a visible tool, then projects the result and holds it to the
//! profile's budget (the rest goes to an artifact) before the model sees it. Error results and
//! 2026-07-28 multi-round-trip answers pass on exactly as the upstream wrote them.

use mcpb_facade::projection::Projection;
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::Reply;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;

use super::{Answer, Apply, BrokerTool, Ctx, Naming};

/// The most a profile may declare as `anthropic/maxResultSizeChars`.
pub const MAX_RESULT_SIZE_CHARS: u64 = 500_000;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = require_name)]
pub struct Args {
    #[serde(default)]
    pub name: String,
    // Kept as the client wrote it: it travels to the upstream byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub arguments: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<Projection>,
}

fn require_name(schema: &mut schemars::Schema) {
    mcpb_facade::schema::require(schema, &["name"]);
}

pub struct CallTool;

impl BrokerTool for CallTool {
    const VERB: &'static str = super::names::CALL_TOOL.verb;
    const MUTATES: bool = true;
    const NEEDS_EXEC: bool = false;
    type Args = Args;

    fn description(n: Naming) -> String {
        format!(
            "Call a tool by name with arguments matching its input schema. projection trims the result before you see it. A result over the budget comes back as a preview plus an artifact id for {}.",
            super::names::GET_ARTIFACT.under(n)
        )
    }

    fn definition_meta(result_size_chars: Option<u64>) -> Option<serde_json::Value> {
        let size = result_size_chars?;
        Some(json!({"anthropic/maxResultSizeChars": size.min(MAX_RESULT_SIZE_CHARS)}))
    }
}

impl Apply for CallTool {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        call(&ctx, args).await
    }
}

/// The params the upstream gets: the tool's own name, the client's arguments and `_meta` (its
/// progress token) byte for byte.
fn forwarded(
    tool: &str,
    arguments: Option<&RawValue>,
    meta: Option<&RawValue>,
) -> Result<Box<RawValue>, serde_json::Error> {
    let mut text = format!(
        "{{\"name\":{},\"arguments\":{}",
        serde_json::to_string(tool)?,
        arguments.map_or("{}", RawValue::get)
    );
    // Only an object with members travels on, as the client wrote it.
    let members = |m: &RawValue| {
        serde_json::from_str::<std::collections::BTreeMap<&str, &RawValue>>(m.get())
            .is_ok_and(|o| !o.is_empty())
    };
    if let Some(m) = meta.filter(|m| members(m)) {
        text.push_str(",\"_meta\":");
        text.push_str(m.get());
    }
    text.push('}');
    RawValue::from_string(text)
}

async fn call(ctx: &Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
    let tool = match ctx
        .gate
        .resolve_for_call(&args.name, crate::calls::Via::Facade)
        .await
    {
        Ok(t) => t,
        Err(BrokerRpcError::UnknownTool(_)) => {
            return Ok(Answer::Result(ctx.unknown_tool(&args.name).await));
        }
        Err(e) => return Err(e),
    };
    let params = forwarded(tool.tool_name(), args.arguments.as_deref(), ctx.meta)
        .map_err(|e| BrokerRpcError::Internal(e.to_string()))?;
    let reply = ctx
        .gate
        .call(&tool, &params, ctx.link.clone(), crate::calls::Via::Facade)
        .await?;
    let Reply::Result(result) = reply else {
        return Ok(Answer::Upstream(reply));
    };
    if mcpb_protocol::era::needs_input(&result) {
        return Ok(Answer::Upstream(Reply::Result(result)));
    }
    let mut value: serde_json::Value = serde_json::from_str(result.get())
        .map_err(|e| BrokerRpcError::Internal(format!("upstream result: {e}")))?;
    // An error result (bad arguments, say) reaches the model exactly as the upstream wrote it.
    if value.get("isError") == Some(&serde_json::Value::Bool(true)) {
        return Ok(Answer::Upstream(Reply::Result(result)));
    }
    if let Some(p) = &args.projection {
        mcpb_facade::result::apply_projection(&mut value, p);
    }
    value = ctx.held_to_budget(value);
    Ok(Answer::Result(value))
}

#[cfg(test)]
mod tests {
    use super::forwarded;
    use serde_json::value::RawValue;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn forwarded_params_keep_arguments_and_meta_as_written() {
        let args = raw(r#"{"b": 1,  "a":[2]}"#);
        let meta = raw(r#"{"progressToken":7}"#);
        let p = forwarded("echo", Some(&args), Some(&meta)).unwrap();
        assert_eq!(
            p.get(),
            r#"{"name":"echo","arguments":{"b": 1,  "a":[2]},"_meta":{"progressToken":7}}"#
        );
        let bare = forwarded("a\"b", None, Some(&raw("{ }"))).unwrap();
        assert_eq!(bare.get(), r#"{"name":"a\"b","arguments":{}}"#);
        for not_an_object in ["\"x\"", "[1]", "null", "3"] {
            let p = forwarded("t", None, Some(&raw(not_an_object))).unwrap();
            assert_eq!(p.get(), r#"{"name":"t","arguments":{}}"#, "{not_an_object}");
        }
    }
}
