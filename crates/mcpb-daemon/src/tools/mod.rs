//! The broker tools. Each is one unit in its own file: a type implementing [`BrokerTool`] (its
//! verb, argument struct, description, whether it mutates, whether it needs exec) and
//! [`Apply`] (what it does, given a narrow [`Ctx`]). `registry.rs` lists them once; the
//! facade's listing, the routing of calls, the CLI and the token-cost test all read that list.
//!
//! Adding a broker tool: a new file here with its type and both impls, plus one line in
//! `registry.rs`. The compiler asks for `MUTATES` and `NEEDS_EXEC` (no defaults), so a tool is
//! never advertised read-only by omission.
//!
//! call_tool and code runs (run_code, exec_run, through the run's SDK) reach upstreams;
//! list_servers and status never start one; search and describe start only an upstream whose
//! tools were never listed.

use std::future::Future;
use std::sync::Arc;

use mcpb_config::{ProfileSettings, Vocabulary};
use mcpb_protocol::BrokerRpcError;
use mcpb_upstream::{ClientLink, Reply};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::view::{Catalog, Gate, ProfileView, Servers};

pub mod names;
mod registry;

pub mod call_tool;
pub mod close_session;
pub mod describe_tool;
pub mod exec_close;
pub mod exec_open;
pub mod exec_run;
pub mod exec_upload;
pub mod get_artifact;
pub mod list_servers;
pub mod run_code;
pub mod search_tools;
pub mod server_tools_list;
pub mod status;

pub use registry::{REGISTRY, Unit, definitions, find};

/// A broker tool's contract: what a client sees of it, and what the CLI builds its calls from.
pub trait BrokerTool {
    /// The name after `broker<sep>`.
    const VERB: &'static str;
    /// Whether the tool changes anything (`readOnlyHint` is its negation). No default.
    const MUTATES: bool;
    /// Listed only in profiles that configure `exec`. No default.
    const NEEDS_EXEC: bool;
    /// The arguments; their schemars derive is the input schema clients see, and absent or
    /// `null` arguments mean `Default`.
    type Args: JsonSchema + DeserializeOwned + Default + Send + 'static;

    /// Listed under `broker<sep><verb>` in the broker vocabulary.
    const IN_BROKER: bool = true;
    /// The tool's name in the MCP Exec Broker's vocabulary; `None`: not part of it.
    const EXEC_BROKER: Option<&'static str> = None;

    /// One or two sentences, paid for in every client's context; `n` names other tools.
    fn description(n: Naming) -> String;

    /// `broker<sep><verb>`: the facade follows the profile's name style like every tool.
    fn name(sep: &str) -> String {
        format!("broker{sep}{}", Self::VERB)
    }

    /// The tool's name under `n`.
    fn named(n: Naming) -> String {
        names::Name {
            verb: Self::VERB,
            exec_broker: Self::EXEC_BROKER,
        }
        .under(n)
    }

    /// `_meta` of the tool's definition, given the profile's declared result size.
    fn definition_meta(_result_size_chars: Option<u64>) -> Option<Value> {
        None
    }
}

/// How a profile names the broker tools: its vocabulary and its name style's separator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Naming {
    pub vocabulary: Vocabulary,
    pub sep: &'static str,
}

impl Naming {
    pub fn of(profile: &ProfileSettings) -> Self {
        Self {
            vocabulary: profile.facade_vocabulary,
            sep: profile.broker_tool_name_style.separator(),
        }
    }

    /// The broker vocabulary with separator `sep`.
    pub fn broker(sep: &'static str) -> Self {
        Self {
            vocabulary: Vocabulary::Broker,
            sep,
        }
    }
}

/// What a broker tool does with a call.
pub(crate) trait Apply: BrokerTool {
    fn apply(
        ctx: Ctx<'_>,
        args: Self::Args,
    ) -> impl Future<Output = Result<Answer, BrokerRpcError>> + Send;
}

/// What a broker tool answers: its own result, or an upstream's reply to pass on as it is.
pub(crate) enum Answer {
    Result(Value),
    Upstream(Reply),
}

/// What a broker tool may use: narrow handles to the profile's view (`gate`: resolve and
/// call visible tools; `catalog`: search, content, suggestions; `servers`: their state and the
/// session's hold on them), the code-execution service, the artifact store, the profile's
/// settings and limits, and the calling session. Never the view itself or an upstream.
pub(crate) struct Ctx<'a> {
    pub(crate) gate: Gate<'a>,
    pub(crate) catalog: Catalog<'a>,
    pub(crate) servers: Servers<'a>,
    profile: &'a ProfileSettings,
    pub(crate) exec: Arc<crate::exec::Exec>,
    pub(crate) artifacts: mcpb_facade::ArtifactStore,
    pub(crate) link: Arc<dyn ClientLink>,
    /// The call's own `_meta`, as the client wrote it (call_tool relays its progress token).
    pub(crate) meta: Option<&'a RawValue>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        view: &'a ProfileView,
        link: Arc<dyn ClientLink>,
        meta: Option<&'a RawValue>,
    ) -> Self {
        let (exec, artifacts) = view.tool_services();
        let (gate, catalog, servers) = view.handles();
        Self {
            gate,
            catalog,
            servers,
            profile: view.profile(),
            exec,
            artifacts,
            link,
            meta,
        }
    }

    pub(crate) fn profile(&self) -> &ProfileSettings {
        self.profile
    }

    pub(crate) fn naming(&self) -> Naming {
        Naming::of(self.profile())
    }

    /// A result over the profile's `result_budget_chars` becomes a preview plus an artifact
    /// id.
    pub(crate) fn held_to_budget(&self, value: Value) -> Value {
        let Some(chars) = self.profile().result_budget_chars else {
            return value;
        };
        self.held_to(value, chars, &[])
    }

    /// A code run's answer: held to the profile's budget, or to `DEFAULT_RUN_BUDGET_CHARS`
    /// when it sets none (a run's output may reach `max_output_kb`, far more than a model
    /// should read at once); its status, calls and usage stay beside the preview.
    pub(crate) fn run_held_to_budget(&self, value: Value) -> Value {
        let chars = self
            .profile()
            .result_budget_chars
            .unwrap_or(DEFAULT_RUN_BUDGET_CHARS);
        self.held_to(
            value,
            chars,
            &[
                "status",
                "reason",
                "calls",
                "usage",
                "truncated",
                "artifacts",
            ],
        )
    }

    fn held_to(&self, value: Value, chars: u64, keep: &[&str]) -> Value {
        let reader = names::GET_ARTIFACT.under(self.naming());
        mcpb_facade::result::apply_budget(
            value,
            &mcpb_facade::result::Budget {
                chars: usize::try_from(chars).unwrap_or(usize::MAX),
                store: &self.artifacts,
                profile: &self.profile().name,
                reader: &reader,
                keep,
            },
        )
    }

    /// "Unknown tool" as a broker tool answers it: with the closest visible names, or a
    /// pointer to search when there are none.
    pub(crate) async fn unknown_tool(&self, name: &str) -> Value {
        let near = self.catalog.suggest(name).await;
        if near.is_empty() {
            let search = names::SEARCH_TOOLS.under(self.naming());
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
}

/// The budget of a code run's answer when the profile sets no `result_budget_chars`.
pub const DEFAULT_RUN_BUDGET_CHARS: u64 = 20_000;

/// A tool-level error: the model reads it and can correct itself.
/// Its text may carry an upstream's words: secrets are taken out.
pub(crate) fn tool_error(text: impl Into<String>) -> Value {
    let text = text.into();
    let text = mcpb_redact::redact(&text);
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

pub(crate) fn tool_result(data: Value) -> Value {
    json!({"content": [{"type": "text", "text": data.to_string()}], "structuredContent": data})
}

/// The broker tools a profile lists, as it names them.
pub(crate) fn listed_for(profile: &ProfileSettings) -> Vec<Value> {
    definitions(
        Naming::of(profile),
        profile.result_size_chars,
        profile.exec.is_some(),
    )
}

/// The arguments of a tool that takes none: whatever a client sends is accepted and ignored
/// (some send `"{}"` as a string), as these tools always did.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct NoArgs {}

impl<'de> Deserialize<'de> for NoArgs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(NoArgs {})
    }
}

/// A broker tool's own result, for `apply`.
pub(crate) fn done(value: Value) -> Result<Answer, BrokerRpcError> {
    Ok(Answer::Result(value))
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
