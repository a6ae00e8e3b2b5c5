//! `broker.call_tool`: calls a visible tool, then projects the result and holds it to the
//! profile's budget (the rest goes to an artifact) before the model sees it. Error results and
//! 2026-07-28 multi-round-trip answers pass on exactly as the upstream wrote them.

use std::sync::Arc;

pub(super) use mcpb_facade::tools::call_tool::Args;
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{ClientLink, Reply};
use serde_json::value::RawValue;

use super::{Answer, unknown_tool};
use crate::view::ProfileView;

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

pub(super) async fn apply(
    view: &ProfileView,
    args: Args,
    meta: Option<&RawValue>,
    link: Arc<dyn ClientLink>,
) -> Result<Answer, BrokerRpcError> {
    let tool = match view
        .resolve_for_call(&args.name, crate::calls::Via::Facade)
        .await
    {
        Ok(t) => t,
        Err(BrokerRpcError::UnknownTool(_)) => {
            return Ok(Answer::Result(unknown_tool(view, &args.name).await));
        }
        Err(e) => return Err(e),
    };
    let params = forwarded(tool.tool_name(), args.arguments.as_deref(), meta)
        .map_err(|e| BrokerRpcError::Internal(e.to_string()))?;
    let reply = view
        .call(&tool, &params, link, crate::calls::Via::Facade)
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
    value = super::held_to_budget(view, value);
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
