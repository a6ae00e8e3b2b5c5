//! The broker tools, one module per tool, each applying its contract (mcpb-facade `tools/`) to
//! a profile view. call_tool and code runs (run_code, exec_run, through the run's SDK) reach
//! upstreams; list_servers and status never start one; search and describe start only an
//! upstream whose tools were never listed.

use std::sync::Arc;

use mcpb_facade::FacadeTool;
use mcpb_facade::tools::exec::{ExecClose, ExecOpen, ExecRun, ExecUpload};
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{ClientLink, Reply};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::view::ProfileView;

mod call_tool;
mod close_session;
mod describe_tool;
mod exec_session;
mod get_artifact;
mod list_servers;
mod run_code;
mod search_tools;
mod status;

/// What a broker tool answers: its own result, or an upstream's reply to pass on as it is.
pub(crate) enum Answer {
    Result(Value),
    Upstream(Reply),
}

/// A tool-level error: the model reads it and can correct itself.
/// Its text may carry an upstream's words: secrets are taken out.
pub(crate) fn tool_error(text: impl Into<String>) -> Value {
    let text = text.into();
    let text = mcpb_redact::redact(&text);
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// A result over the profile's `result_budget_chars` becomes a preview plus an artifact id.
fn held_to_budget(view: &ProfileView, value: Value) -> Value {
    let Some(chars) = view.profile.result_budget_chars else {
        return value;
    };
    let store = view.generation.artifacts();
    let reader = FacadeTool::GetArtifact.name(view.sep());
    mcpb_facade::result::apply_budget(
        value,
        &mcpb_facade::result::Budget {
            chars: usize::try_from(chars).unwrap_or(usize::MAX),
            store: &store,
            profile: &view.profile.name,
            reader: &reader,
        },
    )
}

pub(crate) fn tool_result(data: Value) -> Value {
    json!({"content": [{"type": "text", "text": data.to_string()}], "structuredContent": data})
}

/// The call's `arguments` as the tool's argument struct; absent or null means all defaults.
fn args<T: DeserializeOwned + Default>(arguments: Option<&RawValue>) -> Result<T, Value> {
    match arguments {
        None => Ok(T::default()),
        Some(a) if a.get() == "null" => Ok(T::default()),
        Some(a) => serde_json::from_str(a.get()).map_err(|e| {
            // The position means nothing to a model that wrote an object, not a text.
            let text = e.to_string();
            let text = text.split(" at line ").next().unwrap_or(&text);
            tool_error(format!("invalid arguments: {text}"))
        }),
    }
}

/// One `tools/call` of a broker tool. `arguments` and `meta` are the call's own members, still
/// as the client wrote them.
pub(crate) async fn apply(
    tool: FacadeTool,
    view: &ProfileView,
    arguments: Option<&RawValue>,
    meta: Option<&RawValue>,
    link: Arc<dyn ClientLink>,
) -> Result<Answer, BrokerRpcError> {
    let done = |v: Value| Ok(Answer::Result(v));
    macro_rules! parsed {
        ($args:ty) => {
            match args::<$args>(arguments) {
                Ok(a) => a,
                Err(e) => return done(e),
            }
        };
    }
    match tool {
        FacadeTool::ListServers => done(list_servers::apply(view)),
        FacadeTool::Status => done(status::apply(view)),
        FacadeTool::CloseSession => done(close_session::apply(view).await),
        FacadeTool::SearchTools => {
            done(search_tools::apply(view, parsed!(search_tools::Args)).await)
        }
        FacadeTool::DescribeTool => {
            done(describe_tool::apply(view, parsed!(describe_tool::Args)).await)
        }
        FacadeTool::GetArtifact => done(get_artifact::apply(view, parsed!(get_artifact::Args))),
        FacadeTool::CallTool => call_tool::apply(view, parsed!(call_tool::Args), meta, link).await,
        FacadeTool::RunCode => done(run_code::apply(view, parsed!(run_code::Args), link).await),
        FacadeTool::ExecOpen => done(exec_session::open(view, parsed!(ExecOpen))),
        FacadeTool::ExecUpload => done(exec_session::upload(view, parsed!(ExecUpload))),
        FacadeTool::ExecRun => done(exec_session::run(view, parsed!(ExecRun), link).await),
        FacadeTool::ExecClose => done(exec_session::close(view, parsed!(ExecClose))),
    }
}

/// "Unknown tool" as a broker tool answers it: with the closest visible names, or a pointer to
/// search when there are none.
pub(crate) async fn unknown_tool(view: &ProfileView, name: &str) -> Value {
    let near = view.suggest(name).await;
    if near.is_empty() {
        let search = FacadeTool::SearchTools.name(view.sep());
        tool_error(format!(
            "Unknown tool: {name}\nhint: find tools with {search}"
        ))
    } else {
        tool_error(format!(
            "Unknown tool: {name}\nhint: did you mean {}?",
            near.join(", ")
        ))
    }
}
