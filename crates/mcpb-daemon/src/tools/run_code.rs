//! `broker.run_code` and the run half of `broker.exec_run`: a program in the sandbox whose tool
//! calls come back through this profile's view, the one path every call takes (visibility,
//! policy, pins, the upstream's timeouts), with the run's own allow list and read_only on top.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use mcpb_config::{Language, ProfileExec};
use mcpb_exec::{CallOutcome, Lease, RunRequest, ToolHost};
use mcpb_facade::FacadeTool;
pub(super) use mcpb_facade::tools::exec::RunCode as Args;
use mcpb_facade::tools::exec::RunOptions;
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{ClientLink, Reply};
use serde_json::Value;
use serde_json::value::RawValue;

use super::tool_error;
use crate::view::ProfileView;

/// The profile view as a run's tool host.
struct ViewHost<'a> {
    view: &'a ProfileView,
    link: Arc<dyn ClientLink>,
}

impl ToolHost for ViewHost<'_> {
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: Box<RawValue>,
        read_only: bool,
    ) -> BoxFuture<'a, CallOutcome> {
        Box::pin(async move {
            // A run reaches upstream tools only; the broker's own tools are not for programs.
            if FacadeTool::from_name(self.view.sep(), name).is_some() {
                return CallOutcome::Unknown;
            }
            let tool = match self
                .view
                .resolve_for_call(name, crate::calls::Via::Exec)
                .await
            {
                Ok(t) => t,
                Err(BrokerRpcError::UnknownTool(_)) => return CallOutcome::Unknown,
                Err(e) => {
                    return CallOutcome::Failed(mcpb_redact::redact(&e.to_string()).into_owned());
                }
            };
            if read_only && tool.mutating {
                return CallOutcome::Refused(format!(
                    "{name} may change something and this run is read_only"
                ));
            }
            // The arguments travel as the program wrote them: a large object is never parsed
            // into a tree here.
            let name_json = Value::String(tool.tool_name().to_string()).to_string();
            let params = format!(r#"{{"name":{name_json},"arguments":{}}}"#, arguments.get());
            drop(arguments);
            let Ok(params) = RawValue::from_string(params) else {
                return CallOutcome::Failed("the arguments could not be encoded".into());
            };
            match self
                .view
                .call(&tool, &params, self.link.clone(), crate::calls::Via::Exec)
                .await
            {
                Ok(Reply::Result(raw)) => match serde_json::from_str::<Value>(raw.get()) {
                    Ok(v) if mcpb_protocol::era::needs_input(&raw) => {
                        let _ = v;
                        CallOutcome::Failed(format!("{name} asked for input a program cannot give"))
                    }
                    Ok(v) => CallOutcome::Result(v),
                    Err(e) => CallOutcome::Failed(format!("the upstream's result: {e}")),
                },
                Ok(Reply::Error(raw)) => {
                    let v: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                    let msg = v
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("the upstream failed");
                    CallOutcome::Failed(mcpb_redact::redact(msg).into_owned())
                }
                Err(e) => CallOutcome::Failed(mcpb_redact::redact(&e.to_string()).into_owned()),
            }
        })
    }

    fn save_artifact(&self, text: &str) -> Result<String, String> {
        self.view
            .generation
            .artifacts()
            .put(&self.view.profile.name, text)
            .map_err(|e| e.to_string())
    }
}

/// What a run of the profile may be: its language allowed, its limits under the profile's.
pub(super) fn request(
    view: &ProfileView,
    run: RunOptions,
    code: Option<String>,
    entry: Option<String>,
) -> Result<RunRequest, Value> {
    let RunOptions {
        language,
        allow,
        read_only,
        limits,
    } = run;
    let exec: &ProfileExec = view
        .profile
        .exec
        .as_ref()
        .ok_or_else(|| tool_error("code execution is off for this profile"))?;
    let language = language.unwrap_or(Language::Python);
    if !exec.allows(language) {
        return Err(tool_error(format!(
            "this profile does not run {}\nhint: it runs {}",
            language.name(),
            exec.languages
                .iter()
                .map(|l| l.name())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(RunRequest {
        language,
        code,
        entry,
        allow,
        read_only,
        limits: exec.limits.lowered(&limits.unwrap_or_default()),
    })
}

/// Runs `req` in the leased workspace; the answer as a tool result held to the profile's
/// budget like any other result. Returns whether the workspace's changes should be kept.
pub(super) async fn run(
    view: &ProfileView,
    req: &RunRequest,
    lease: &Lease,
    link: Arc<dyn ClientLink>,
) -> (Value, bool) {
    let host = ViewHost { view, link };
    let ran = view.exec.runner.run(req, lease, &host).await;
    tracing::info!(
        profile = %view.profile.name,
        language = req.language.name(),
        status = ?ran.answer.status,
        calls = ran.answer.calls.len(),
        wall_ms = ran.answer.usage.wall_ms,
        "code run"
    );
    let mut value = ran.answer.to_tool_result();
    value = super::held_to_budget(view, value);
    (value, ran.keep_workspace)
}

pub(super) async fn apply(view: &ProfileView, args: Args, link: Arc<dyn ClientLink>) -> Value {
    let req = match request(view, args.run, Some(args.code), None) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let ws = &view.exec.workspaces;
    let profile = &view.profile.name;
    let id = match ws.open_one_shot(profile) {
        Ok(id) => id,
        Err(e) => return tool_error(e.to_string()),
    };
    let value = match ws.lease(profile, &id.hyphenated().to_string()) {
        Ok(lease) => run(view, &req, &lease, link).await.0,
        Err(e) => tool_error(e.to_string()),
    };
    ws.remove(profile, id);
    value
}
