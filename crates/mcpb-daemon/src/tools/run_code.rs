//! `broker.run_code` and the run half of `broker.exec_run`: a program in the sandbox whose tool
//! calls come back through this profile's view, the one path every call takes (visibility,
//! policy, pins, the upstream's timeouts), with the run's own allow list and read_only on top.

use futures_util::future::BoxFuture;
use mcpb_config::{ExecLimits, Language, ProfileExec, Vocabulary};
use mcpb_exec::{CallOutcome, Lease, RunRequest, ToolHost};
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::Reply;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error};

/// What every run states besides its program (run_code and exec_run).
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct RunOptions {
    /// python (default) or javascript
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<Language>,
    /// Tool name globs the program may call, e.g. ["github.get_*"]
    #[serde(default)]
    pub allow: Vec<String>,
    /// Refuse tools that may change something
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// Only lower than the profile's (ms, KiB, MiB as named)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = terse_limits)]
    pub limits: Option<ExecLimits>,
}

/// The run limits without their per-field prose (the config schema keeps it).
fn terse_limits(schema: &mut schemars::Schema) {
    mcpb_facade::schema::terse(schema, &[]);
}

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = require_code)]
pub struct Args {
    /// The program. Python: `from mcp_sdk import call_tool, ToolError, save_artifact, result`.
    /// JavaScript: `await callTool(name, args)`, `saveArtifact`, `result`.
    #[serde(default)]
    pub code: String,
    #[serde(flatten)]
    pub run: RunOptions,
}

fn require_code(schema: &mut schemars::Schema) {
    mcpb_facade::schema::require(schema, &["code", "allow"]);
}

pub struct RunCode;

impl BrokerTool for RunCode {
    const VERB: &'static str = super::names::RUN_CODE.verb;
    const MUTATES: bool = true;
    const NEEDS_EXEC: bool = true;
    type Args = Args;

    fn description(n: Naming) -> String {
        format!(
            "Run a short sandboxed program that calls tools and returns only what it chooses: \
             fetch, filter and store in one step instead of many large results. {}",
            program_contract(n)
        )
    }
}

impl Apply for RunCode {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        done(run_once(&ctx, args).await)
    }
}

/// What a program may call and how, for the descriptions of run_code and exec_run.
pub(super) fn program_contract(n: Naming) -> String {
    let finder = match n.vocabulary {
        Vocabulary::Broker => super::names::SEARCH_TOOLS.under(n),
        Vocabulary::ExecBroker => super::names::SERVER_TOOLS_LIST.under(n),
    };
    let sep = n.sep;
    format!(
        "It may call only the tools its `allow` globs name (as {finder} names them). \
         `call_tool(\"srv{sep}tool\", {{...}})` returns the structured result or raises \
         ToolError; `result(x)` sets the answer. No network; files only in /work."
    )
}

/// The profile's visible tools as a run's tool host.
struct ViewHost<'c, 'a> {
    ctx: &'c Ctx<'a>,
}

impl ToolHost for ViewHost<'_, '_> {
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: Box<RawValue>,
        read_only: bool,
    ) -> BoxFuture<'a, CallOutcome> {
        Box::pin(async move {
            // A run reaches upstream tools only; the broker's own tools are not for programs.
            if super::find(self.ctx.naming(), name).is_some() {
                return CallOutcome::Unknown;
            }
            let tool = match self
                .ctx
                .gate
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
                .ctx
                .gate
                .call(
                    &tool,
                    &params,
                    self.ctx.link.clone(),
                    crate::calls::Via::Exec,
                )
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
        self.ctx
            .artifacts
            .put(&self.ctx.profile().name, text)
            .map_err(|e| e.to_string())
    }
}

/// What a run of the profile may be: its language allowed, its limits under the profile's.
pub(super) fn request(
    ctx: &Ctx<'_>,
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
    let exec: &ProfileExec = ctx
        .profile()
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
    // The policy holds before the run starts: a limit asked above the profile's is refused,
    // naming it, rather than lowered where the program would not know.
    let asked = limits.unwrap_or_default();
    let over = exec.limits.exceeded_by(&asked);
    if !over.is_empty() {
        let named: Vec<String> = over
            .iter()
            .map(|(key, asked, limit)| format!("{key} {asked} (this profile allows {limit})"))
            .collect();
        return Err(tool_error(format!(
            "limits over this profile's: {}\nhint: ask for at most the profile's values, or leave limits out to get them",
            named.join(", ")
        )));
    }
    Ok(RunRequest {
        language,
        code,
        entry,
        allow,
        read_only,
        limits: exec.limits.lowered(&asked),
    })
}

/// Runs `req` in the leased workspace; the answer as a tool result held to the profile's
/// budget like any other result. Returns whether the workspace's changes should be kept.
pub(super) async fn run(ctx: &Ctx<'_>, req: &RunRequest, lease: &Lease) -> (Value, bool) {
    let host = ViewHost { ctx };
    let ran = ctx.exec.runner.run(req, lease, &host).await;
    tracing::info!(
        profile = %ctx.profile().name,
        language = req.language.name(),
        status = ?ran.answer.status,
        calls = ran.answer.calls.len(),
        wall_ms = ran.answer.usage.wall_ms,
        "code run"
    );
    let mut value = ran.answer.to_tool_result();
    value = ctx.run_held_to_budget(value);
    (value, ran.keep_workspace)
}

/// One shot: a workspace of its own, removed after the run.
async fn run_once(ctx: &Ctx<'_>, args: Args) -> Value {
    let req = match request(ctx, args.run, Some(args.code), None) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let ws = &ctx.exec.workspaces;
    let profile = &ctx.profile().name;
    let id = match ws.open_one_shot(profile) {
        Ok(id) => id,
        Err(e) => return tool_error(e.to_string()),
    };
    let value = match ws.lease(profile, &id.hyphenated().to_string()) {
        Ok(lease) => run(ctx, &req, &lease).await.0,
        Err(e) => tool_error(e.to_string()),
    };
    ws.remove(profile, id);
    value
}
