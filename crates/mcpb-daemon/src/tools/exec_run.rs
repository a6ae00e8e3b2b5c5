//! `broker.exec_run`: a run in an exec workspace (as often as needed, each run seeing what the
//! last one left); the run itself is run_code's.

use mcpb_config::Vocabulary;
use mcpb_protocol::BrokerRpcError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::run_code::{RunOptions, request, run};
use super::{Answer, Apply, BrokerTool, Ctx, Naming, done, tool_error};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = exec_run_schema)]
pub struct Args {
    #[serde(default)]
    pub exec_id: String,
    /// The program, or `entry`: a workspace file to run
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    #[serde(flatten)]
    pub run: RunOptions,
}

/// Its description points at run_code, which explains the shared fields once.
fn exec_run_schema(schema: &mut schemars::Schema) {
    mcpb_facade::schema::require(schema, &["exec_id", "allow"]);
    mcpb_facade::schema::terse(schema, &["language", "allow", "read_only", "exec_id"]);
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert("limits".into(), json!({"type": "object"}));
    }
}

pub struct ExecRun;

impl BrokerTool for ExecRun {
    const VERB: &'static str = super::names::EXEC_RUN.verb;
    const MUTATES: bool = true;
    const NEEDS_EXEC: bool = true;
    const EXEC_BROKER: Option<&'static str> = super::names::EXEC_RUN.exec_broker;
    type Args = Args;

    fn description(n: Naming) -> String {
        match n.vocabulary {
            Vocabulary::Broker => format!(
                "Run code (or workspace file `entry`) in an exec workspace, as {}.",
                super::names::RUN_CODE.under(n)
            ),
            // No run_code in this vocabulary to point at: the contract is said here.
            Vocabulary::ExecBroker => format!(
                "Run a sandboxed program (or workspace file `entry`) in an exec_open workspace; \
                 it calls tools and returns only what it chooses. {}",
                super::run_code::program_contract(n)
            ),
        }
    }
}

impl Apply for ExecRun {
    async fn apply(ctx: Ctx<'_>, args: Args) -> Result<Answer, BrokerRpcError> {
        let req = match request(&ctx, args.run, args.code, args.entry) {
            Ok(r) => r,
            Err(e) => return done(e),
        };
        let ws = &ctx.exec.workspaces;
        let lease = match ws.lease(&ctx.profile().name, &args.exec_id) {
            Ok(l) => l,
            Err(e) => return done(tool_error(e.to_string())),
        };
        let (value, keep) = run(&ctx, &req, &lease).await;
        if keep {
            if let Err(e) = ws.commit(&lease) {
                tracing::error!(error = %e, "keeping a run's workspace failed");
            }
        } else {
            ws.discard(&lease);
        }
        done(value)
    }
}
