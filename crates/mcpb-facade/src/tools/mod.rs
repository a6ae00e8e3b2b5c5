//! The contract of each broker tool, one module per tool: its argument struct (whose schemars
//! derive is the input schema clients see), its limits, its description. The daemon applies
//! them (mcpb-daemon `tools/`), the CLI builds the same structs. Every word here is paid for in
//! every client's context, so the descriptions are short and exact; a test holds the whole set
//! to 1,200 o200k_base tokens.

use schemars::JsonSchema;
use serde_json::{Value, json};

pub mod call_tool;
pub mod close_session;
pub mod describe_tool;
pub mod exec;
pub mod get_artifact;
pub mod list_servers;
pub mod search_tools;
pub mod status;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FacadeTool {
    ListServers,
    SearchTools,
    DescribeTool,
    CallTool,
    GetArtifact,
    Status,
    CloseSession,
    RunCode,
    ExecOpen,
    ExecUpload,
    ExecRun,
    ExecClose,
}

impl FacadeTool {
    pub const ALL: [FacadeTool; 7] = [
        FacadeTool::ListServers,
        FacadeTool::SearchTools,
        FacadeTool::DescribeTool,
        FacadeTool::CallTool,
        FacadeTool::GetArtifact,
        FacadeTool::Status,
        FacadeTool::CloseSession,
    ];

    /// The code-execution tools, listed only in profiles that enable `exec`.
    pub const EXEC: [FacadeTool; 5] = [
        FacadeTool::RunCode,
        FacadeTool::ExecOpen,
        FacadeTool::ExecUpload,
        FacadeTool::ExecRun,
        FacadeTool::ExecClose,
    ];

    pub fn verb(self) -> &'static str {
        match self {
            FacadeTool::ListServers => "list_servers",
            FacadeTool::SearchTools => "search_tools",
            FacadeTool::DescribeTool => "describe_tool",
            FacadeTool::CallTool => "call_tool",
            FacadeTool::GetArtifact => "get_artifact",
            FacadeTool::Status => "status",
            FacadeTool::CloseSession => "close_session",
            FacadeTool::RunCode => "run_code",
            FacadeTool::ExecOpen => "exec_open",
            FacadeTool::ExecUpload => "exec_upload",
            FacadeTool::ExecRun => "exec_run",
            FacadeTool::ExecClose => "exec_close",
        }
    }

    /// `broker<sep><verb>`: the facade follows the profile's name style like every tool.
    pub fn name(self, sep: &str) -> String {
        format!("broker{sep}{}", self.verb())
    }

    pub fn from_name(sep: &str, name: &str) -> Option<Self> {
        let verb = name.strip_prefix("broker")?.strip_prefix(sep)?;
        Self::ALL
            .into_iter()
            .chain(Self::EXEC)
            .find(|t| t.verb() == verb)
    }

    /// Whether the tool changes anything. Every tool is named: a new one must say, or it
    /// would be advertised `readOnlyHint: true` by default.
    fn mutates(self) -> bool {
        match self {
            FacadeTool::CallTool
            | FacadeTool::CloseSession
            | FacadeTool::RunCode
            | FacadeTool::ExecOpen
            | FacadeTool::ExecUpload
            | FacadeTool::ExecRun
            | FacadeTool::ExecClose => true,
            FacadeTool::ListServers
            | FacadeTool::SearchTools
            | FacadeTool::DescribeTool
            | FacadeTool::GetArtifact
            | FacadeTool::Status => false,
        }
    }

    fn read_only(self) -> bool {
        !self.mutates()
    }

    fn description(self, sep: &str) -> String {
        match self {
            FacadeTool::ListServers => list_servers::description(sep),
            FacadeTool::SearchTools => search_tools::description(sep),
            FacadeTool::DescribeTool => describe_tool::description(sep),
            FacadeTool::CallTool => call_tool::description(sep),
            FacadeTool::GetArtifact => get_artifact::description(sep),
            FacadeTool::Status => status::description(sep),
            FacadeTool::CloseSession => close_session::description(sep),
            FacadeTool::RunCode => exec::run_code_description(sep),
            FacadeTool::ExecOpen => exec::exec_open_description(sep),
            FacadeTool::ExecUpload => exec::exec_upload_description(sep),
            FacadeTool::ExecRun => exec::exec_run_description(sep),
            FacadeTool::ExecClose => exec::exec_close_description(sep),
        }
    }

    fn input_schema(self) -> Value {
        match self {
            FacadeTool::ListServers => schema_of::<list_servers::Args>(),
            FacadeTool::SearchTools => schema_of::<search_tools::Args>(),
            FacadeTool::DescribeTool => schema_of::<describe_tool::Args>(),
            FacadeTool::CallTool => schema_of::<call_tool::Args>(),
            FacadeTool::GetArtifact => schema_of::<get_artifact::Args>(),
            FacadeTool::Status => schema_of::<status::Args>(),
            FacadeTool::CloseSession => schema_of::<close_session::Args>(),
            FacadeTool::RunCode => schema_of::<exec::RunCode>(),
            FacadeTool::ExecOpen => schema_of::<exec::ExecOpen>(),
            FacadeTool::ExecUpload => schema_of::<exec::ExecUpload>(),
            FacadeTool::ExecRun => schema_of::<exec::ExecRun>(),
            FacadeTool::ExecClose => schema_of::<exec::ExecClose>(),
        }
    }
}

/// The input schema of an argument struct, without what costs tokens and tells a model
/// nothing: the meta-schema URI, titles, Rust integer formats, serde defaults.
fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    strip(&mut schema);
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("description");
        obj.entry("properties").or_insert_with(|| json!({}));
    }
    schema
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for key in ["title", "format", "default", "$schema"] {
                m.remove(key);
            }
            if m.get("additionalProperties") == Some(&Value::Bool(true)) {
                m.remove("additionalProperties");
            }
            // An `Option` field says `["string", "null"]`; absent and null mean the same to
            // the daemon, and the longer type costs tokens in every client's context.
            if let Some(Value::Array(types)) = m.get("type") {
                let named: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                if let [one] = named.as_slice() {
                    let one = (*one).clone();
                    m.insert("type".into(), one);
                }
            }
            // Likewise `null` among an optional enum's values.
            if let Some(Value::Array(values)) = m.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            for (_, child) in m.iter_mut() {
                strip(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

/// Marks `fields` as required: the daemon still answers a call without them (with a clear tool
/// error), but the schema tells the model they are expected. For `#[schemars(transform)]`.
fn require(schema: &mut schemars::Schema, fields: &[&str]) {
    schema.insert("required".into(), json!(fields));
}

pub(crate) fn require_query(schema: &mut schemars::Schema) {
    require(schema, &["query"]);
}

pub(crate) fn require_name(schema: &mut schemars::Schema) {
    require(schema, &["name"]);
}

pub(crate) fn require_id(schema: &mut schemars::Schema) {
    require(schema, &["id"]);
}

pub(crate) fn require_code(schema: &mut schemars::Schema) {
    require(schema, &["code", "allow"]);
}

/// The run limits without their per-field prose (the config schema keeps it): the names say
/// enough to a model, and the descriptions would cost every client's context.
pub(crate) fn terse_limits(schema: &mut schemars::Schema) {
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for (_, p) in props.iter_mut() {
            if let Value::Object(p) = p {
                p.remove("description");
                p.remove("minimum");
            }
        }
    }
}

pub(crate) fn require_exec_id(schema: &mut schemars::Schema) {
    require(schema, &["exec_id"]);
}

/// exec_run: its description points at run_code, which explains the shared fields once.
pub(crate) fn exec_run_schema(schema: &mut schemars::Schema) {
    require(schema, &["exec_id", "allow"]);
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for field in ["language", "allow", "read_only", "exec_id"] {
            if let Some(Value::Object(p)) = props.get_mut(field) {
                p.remove("description");
            }
        }
        props.insert("limits".into(), json!({"type": "object"}));
    }
}

pub(crate) fn require_upload(schema: &mut schemars::Schema) {
    require(schema, &["exec_id", "path", "content"]);
}

/// The definitions for a profile with separator `sep`, with the code-execution tools when
/// `exec`. `result_size_chars` is declared on call_tool for clients that honour
/// `anthropic/maxResultSizeChars`.
pub fn definitions(sep: &str, result_size_chars: Option<u64>, exec: bool) -> Vec<Value> {
    let exec_tools: &[FacadeTool] = if exec { &FacadeTool::EXEC } else { &[] };
    FacadeTool::ALL
        .into_iter()
        .chain(exec_tools.iter().copied())
        .map(|tool| {
            let mut def = json!({
                "name": tool.name(sep),
                "description": tool.description(sep),
                "inputSchema": tool.input_schema(),
                "annotations": {"readOnlyHint": tool.read_only()},
            });
            if tool == FacadeTool::CallTool
                && let Some(size) = result_size_chars
            {
                def["_meta"] =
                    json!({"anthropic/maxResultSizeChars": size.min(call_tool::MAX_RESULT_SIZE_CHARS)});
            }
            def
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_style_and_round_trip() {
        for sep in [".", "__"] {
            for t in FacadeTool::ALL.into_iter().chain(FacadeTool::EXEC) {
                assert_eq!(FacadeTool::from_name(sep, &t.name(sep)), Some(t));
            }
        }
        assert_eq!(FacadeTool::from_name(".", "broker.nope"), None);
        assert_eq!(FacadeTool::from_name(".", "broker__status"), None);
        let defs = definitions("__", Some(900_000), false);
        assert_eq!(defs[3]["name"], "broker__call_tool");
        assert_eq!(defs[3]["_meta"]["anthropic/maxResultSizeChars"], 500_000);
    }

    #[test]
    fn only_the_tools_that_look_are_advertised_read_only() {
        let defs = definitions(".", None, true);
        let read_only: Vec<&str> = defs
            .iter()
            .filter(|d| d["annotations"]["readOnlyHint"] == true)
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            read_only,
            [
                "broker.list_servers",
                "broker.search_tools",
                "broker.describe_tool",
                "broker.get_artifact",
                "broker.status"
            ]
        );
    }

    #[test]
    fn schemas_carry_the_limits_the_daemon_applies() {
        let defs = definitions(".", None, true);
        let search = &defs[1]["inputSchema"];
        assert_eq!(search["required"], json!(["query"]));
        assert_eq!(
            search["properties"]["limit"]["maximum"],
            json!(search_tools::MAX_LIMIT)
        );
        assert_eq!(search["properties"]["limit"]["minimum"], json!(1));
        let describe = &defs[2]["inputSchema"];
        assert_eq!(
            describe["properties"]["names"]["maxItems"],
            json!(describe_tool::MAX_NAMES)
        );
        let call = &defs[3]["inputSchema"];
        assert_eq!(call["required"], json!(["name"]));
        assert_eq!(call["properties"]["arguments"]["type"], "object");
        assert_eq!(
            call["properties"]["projection"]["properties"]["max_chars"]["minimum"],
            json!(1)
        );
        let artifact = &defs[4]["inputSchema"];
        assert_eq!(artifact["required"], json!(["id"]));
        for d in &defs {
            let text = d.to_string();
            assert!(!text.contains("\"title\""), "{text}");
            assert!(!text.contains("\"format\""), "{text}");
            assert!(!text.contains("$schema"), "{text}");
            assert!(!text.contains("$defs"), "{text}");
            assert_eq!(d["inputSchema"]["type"], "object", "{text}");
        }
    }
}
