//! A session's requests to the profile's upstreams, from the request's params to the response
//! frame: `tools/list` and `tools/call` (the name read once, a raw call's params travel on
//! untouched, a broker tool or a raw tool of the profile's view), and resources, prompts and
//! completion (view/content.rs); every answer adapted to the client's era in one place.

use std::borrow::Cow;
use std::sync::Arc;

use mcpb_protocol::message::{raw_error_line, response_line, to_raw};
use mcpb_protocol::{BrokerRpcError, Era};
use mcpb_upstream::{ClientLink, Reply};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::json_line;
use crate::tools::{Answer, Ctx};
use crate::view::{ProfileView, View};

/// A `tools/call`'s members, read once and borrowed from the request frame: the name routes it;
/// a raw call's params then travel on as the client wrote them, a broker tool takes its
/// arguments and `_meta` still as written (skipping a member scans it just as borrowing does).
#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// The answer to `tools/list`.
pub(crate) async fn list(view: &ProfileView, kind: View, era: Era, id: &RawValue) -> Vec<u8> {
    let listed = view
        .list(kind, crate::tools::listed_for(view.profile()))
        .await
        .and_then(|list| to_raw(&list).map_err(|e| BrokerRpcError::Internal(e.to_string())));
    match listed {
        Ok(list) => response_line(id, &era.complete_listing_raw(list)),
        Err(e) => e.to_line(Some(id)),
    }
}

/// The answer to `tools/call`.
pub(crate) async fn call(
    view: &ProfileView,
    kind: View,
    era: Era,
    id: &RawValue,
    params: Option<&RawValue>,
    link: Arc<dyn ClientLink>,
) -> Vec<u8> {
    let answer = match dispatch(view, kind, params, link).await {
        Ok(a) => a,
        Err(BrokerRpcError::UnknownTool(name)) => {
            let near = view.suggest(&name).await;
            return BrokerRpcError::UnknownToolNear { name, near }.to_line(Some(id));
        }
        Err(e) => return e.to_line(Some(id)),
    };
    let reply = match answer {
        Answer::Upstream(r) => r,
        Answer::Result(v) => match to_raw(&v) {
            Ok(raw) => Reply::Result(raw),
            Err(e) => return BrokerRpcError::Internal(e.to_string()).to_line(Some(id)),
        },
    };
    match reply {
        Reply::Result(r) => match era.adapt_call_result(r) {
            Ok(r) => mcpb_protocol::message::response_line_text(id, &r),
            Err(_) => BrokerRpcError::Internal(
                "the upstream asked for more input (2026-07-28 input_required), which mcp-broker cannot relay yet".into(),
            )
            .to_line(Some(id)),
        },
        Reply::Error(e) => raw_error_line(id, &e),
    }
}

async fn dispatch(
    view: &ProfileView,
    kind: View,
    params: Option<&RawValue>,
    link: Arc<dyn ClientLink>,
) -> Result<Answer, BrokerRpcError> {
    let params = params.ok_or_else(|| BrokerRpcError::InvalidParams("missing params".into()))?;
    let invalid =
        |e: serde_json::Error| BrokerRpcError::InvalidParams(format!("tools/call params: {e}"));
    let call: Call<'_> = serde_json::from_str(params.get()).map_err(invalid)?;
    if kind.has_facade()
        && let Some(unit) = crate::tools::find(crate::tools::Naming::of(view.profile()), &call.name)
    {
        return unit
            .apply(Ctx::new(view, link, call.meta), call.arguments)
            .await;
    }
    let tool = view.resolve_raw(&call.name, kind).await?;
    Ok(Answer::Upstream(
        view.call(&tool, params, link, crate::calls::Via::Raw)
            .await?,
    ))
}

/// The requests a session hands to a task of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    ToolsList,
    ToolsCall,
    ResourcesList,
    ResourceTemplatesList,
    ResourcesRead,
    PromptsList,
    PromptsGet,
    Complete,
    Subscribe,
    Unsubscribe,
}

impl Method {
    pub(crate) fn of(method: &str) -> Option<Self> {
        Some(match method {
            "tools/list" => Method::ToolsList,
            "tools/call" => Method::ToolsCall,
            "resources/list" => Method::ResourcesList,
            "resources/templates/list" => Method::ResourceTemplatesList,
            "resources/read" => Method::ResourcesRead,
            "prompts/list" => Method::PromptsList,
            "prompts/get" => Method::PromptsGet,
            "completion/complete" => Method::Complete,
            "resources/subscribe" => Method::Subscribe,
            "resources/unsubscribe" => Method::Unsubscribe,
            _ => return None,
        })
    }
}

/// The answer to a resources, prompts or completion request.
pub(crate) async fn content(
    view: &ProfileView,
    method: Method,
    era: Era,
    id: &RawValue,
    params: Option<&RawValue>,
    link: Arc<dyn ClientLink>,
) -> Vec<u8> {
    let listing = |listed: Result<serde_json::Value, BrokerRpcError>| match listed {
        Ok(mut list) => {
            era.complete_listing(&mut list);
            json_line(id, &list)
        }
        Err(e) => e.to_line(Some(id)),
    };
    // Every method named: a new one is routed on purpose, never by a catch-all.
    let reply = match method {
        Method::ResourcesList => return listing(view.list_resources(params).await),
        Method::ResourceTemplatesList => {
            return listing(view.list_resource_templates(params).await);
        }
        Method::PromptsList => return listing(view.list_prompts(params).await),
        Method::ResourcesRead => view.read_resource(params, link).await,
        Method::PromptsGet => view.get_prompt(params, link).await,
        Method::Subscribe => view.subscription(true, params, link).await,
        Method::Unsubscribe => view.subscription(false, params, link).await,
        Method::Complete => view.complete(params, link).await,
        Method::ToolsList | Method::ToolsCall => {
            return BrokerRpcError::Internal("tools are routed by list and call".into())
                .to_line(Some(id));
        }
    };
    match reply {
        Ok(Reply::Result(r)) => response_line(id, &era.adapt_result(r)),
        Ok(Reply::Error(e)) => raw_error_line(id, &e),
        Err(e) => e.to_line(Some(id)),
    }
}
