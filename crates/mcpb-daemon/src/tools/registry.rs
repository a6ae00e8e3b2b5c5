//! The one list of broker tools. The facade's listing, the routing of `tools/call`, a code
//! run's refusal of broker tools, the CLI and the token-cost test all read it; nothing else
//! names the set.

use futures_util::future::BoxFuture;
use mcpb_protocol::BrokerRpcError;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use mcpb_config::Vocabulary;

use super::{Answer, Apply, Ctx, Naming};

/// Every broker tool, in the order clients list them. One line per tool.
pub static REGISTRY: &[Unit] = &[
    unit::<super::list_servers::ListServers>(),
    unit::<super::search_tools::SearchTools>(),
    unit::<super::describe_tool::DescribeTool>(),
    unit::<super::call_tool::CallTool>(),
    unit::<super::get_artifact::GetArtifact>(),
    unit::<super::status::Status>(),
    unit::<super::close_session::CloseSession>(),
    unit::<super::run_code::RunCode>(),
    unit::<super::exec_open::ExecOpen>(),
    unit::<super::exec_upload::ExecUpload>(),
    unit::<super::exec_run::ExecRun>(),
    unit::<super::exec_close::ExecClose>(),
    unit::<super::server_tools_list::ServerToolsList>(),
];

type ApplyFn =
    for<'a> fn(Ctx<'a>, Option<&'a RawValue>) -> BoxFuture<'a, Result<Answer, BrokerRpcError>>;

/// One broker tool as the registry holds it: its contract's values and its `apply`, with the
/// argument type erased (arguments are parsed into it here, once).
pub struct Unit {
    pub verb: &'static str,
    pub mutates: bool,
    pub needs_exec: bool,
    in_broker: bool,
    exec_broker: Option<&'static str>,
    description: fn(Naming) -> String,
    schema: fn() -> Value,
    meta: fn(Option<u64>) -> Option<Value>,
    apply: ApplyFn,
}

const fn unit<T: Apply + 'static>() -> Unit {
    Unit {
        verb: T::VERB,
        mutates: T::MUTATES,
        needs_exec: T::NEEDS_EXEC,
        in_broker: T::IN_BROKER,
        exec_broker: T::EXEC_BROKER,
        description: T::description,
        schema: mcpb_facade::schema::schema_of::<T::Args>,
        meta: T::definition_meta,
        apply: apply_erased::<T>,
    }
}

fn apply_erased<'a, T: Apply + 'static>(
    ctx: Ctx<'a>,
    arguments: Option<&'a RawValue>,
) -> BoxFuture<'a, Result<Answer, BrokerRpcError>> {
    let parsed = super::args::<T::Args>(arguments);
    Box::pin(async move {
        match parsed {
            Ok(args) => T::apply(ctx, args).await,
            Err(e) => Ok(Answer::Result(e)),
        }
    })
}

impl Unit {
    /// The tool's name under `n`; `None` when that vocabulary has no such tool.
    pub fn name(&self, n: Naming) -> Option<String> {
        match n.vocabulary {
            Vocabulary::Broker => self
                .in_broker
                .then(|| format!("broker{}{}", n.sep, self.verb)),
            Vocabulary::ExecBroker => self.exec_broker.map(str::to_string),
        }
    }

    /// The tool's definition as a profile naming tools by `n` lists it.
    pub fn definition(&self, n: Naming, result_size_chars: Option<u64>) -> Option<Value> {
        let mut def = json!({
            "name": self.name(n)?,
            "description": (self.description)(n),
            "inputSchema": (self.schema)(),
            "annotations": {"readOnlyHint": !self.mutates},
        });
        if let Some(meta) = (self.meta)(result_size_chars) {
            def["_meta"] = meta;
        }
        Some(def)
    }

    /// One `tools/call` of this tool; `arguments` as the client wrote them.
    pub(crate) fn apply<'a>(
        &self,
        ctx: Ctx<'a>,
        arguments: Option<&'a RawValue>,
    ) -> BoxFuture<'a, Result<Answer, BrokerRpcError>> {
        (self.apply)(ctx, arguments)
    }
}

/// The broker tool a profile naming tools by `n` calls `name`, whether or not the profile
/// lists the exec tools (their `apply` says when exec is off). The broker vocabulary's names
/// route in every profile: the CLI's commands use them.
pub fn find(n: Naming, name: &str) -> Option<&'static Unit> {
    if n.vocabulary == Vocabulary::ExecBroker
        && let Some(unit) = REGISTRY.iter().find(|u| u.exec_broker == Some(name))
    {
        return Some(unit);
    }
    let verb = name.strip_prefix("broker")?.strip_prefix(n.sep)?;
    REGISTRY.iter().find(|u| u.in_broker && u.verb == verb)
}

/// The definitions for a profile naming tools by `n`, with the code-execution tools when
/// `exec`. `result_size_chars` is what the profile declares for clients that honour
/// `anthropic/maxResultSizeChars`.
pub fn definitions(n: Naming, result_size_chars: Option<u64>, exec: bool) -> Vec<Value> {
    REGISTRY
        .iter()
        .filter(|u| exec || !u.needs_exec)
        .filter_map(|u| u.definition(n, result_size_chars))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{call_tool, describe_tool, search_tools};

    #[test]
    fn every_listed_tool_comes_from_the_registry_once() {
        let mut verbs: Vec<&str> = REGISTRY.iter().map(|u| u.verb).collect();
        verbs.sort_unstable();
        verbs.dedup();
        assert_eq!(verbs.len(), REGISTRY.len(), "a verb is registered twice");
        let namings = [".", "__", "_"].into_iter().flat_map(|sep| {
            [Vocabulary::Broker, Vocabulary::ExecBroker]
                .map(|vocabulary| Naming { vocabulary, sep })
        });
        for n in namings {
            for exec in [false, true] {
                for def in definitions(n, None, exec) {
                    let name = def["name"].as_str().unwrap();
                    let unit = find(n, name).unwrap_or_else(|| panic!("{name} not found"));
                    assert_eq!(def["annotations"]["readOnlyHint"], !unit.mutates, "{name}");
                    assert!(exec || !unit.needs_exec, "{name}");
                }
            }
            for u in REGISTRY {
                if let Some(name) = u.name(n) {
                    assert!(std::ptr::eq(find(n, &name).unwrap(), u), "{name}");
                }
            }
        }
        let dot = Naming::broker(".");
        assert!(find(dot, "broker.nope").is_none());
        assert!(find(dot, "broker__status").is_none());
        assert!(
            find(dot, "servers_list").is_none(),
            "not in the broker vocabulary"
        );
        assert!(find(dot, "broker.server_tools_list").is_none());
        assert_eq!(definitions(dot, None, true).len(), REGISTRY.len() - 1);
    }

    /// One file per tool: each file of `tools/` but mod.rs, registry.rs and names.rs holds
    /// exactly one `impl BrokerTool for`, and the registry has a line for each.
    #[test]
    fn each_tool_is_one_file_and_one_registry_line() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tools");
        let registry = std::fs::read_to_string(dir.join("registry.rs")).unwrap();
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            if stem == "mod" || stem == "registry" || stem == "names" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.matches("impl BrokerTool for").count(), 1, "{stem}");
            assert!(
                registry.contains(&format!("unit::<super::{stem}::")),
                "{stem}"
            );
            files += 1;
        }
        assert_eq!(files, REGISTRY.len());
    }

    /// Tools without arguments take whatever a client sends, as they always did; the others
    /// say what is wrong with theirs.
    #[test]
    fn tools_without_arguments_ignore_what_they_are_given() {
        let raw = |t: &str| RawValue::from_string(t.to_string()).unwrap();
        for given in ["\"{}\"", "5", "[1]", "{\"x\": 1}", "null"] {
            let parsed = crate::tools::args::<crate::tools::NoArgs>(Some(&raw(given)));
            assert!(parsed.is_ok(), "{given}");
        }
        let bad = crate::tools::args::<search_tools::Args>(Some(&raw("5")));
        assert!(bad.is_err());
    }

    /// The MCP Exec Broker's vocabulary: its seven names, nothing else listed, and the broker
    /// names still routed (the CLI uses them).
    #[test]
    fn the_exec_broker_vocabulary_lists_its_own_names() {
        let n = Naming {
            vocabulary: Vocabulary::ExecBroker,
            sep: ".",
        };
        let names: Vec<String> = definitions(n, None, true)
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "servers_list",
                "tool_info",
                "exec_get_artifact",
                "exec_open",
                "exec_run",
                "exec_close",
                "server_tools_list"
            ]
        );
        let without_exec: Vec<Value> = definitions(n, None, false);
        assert_eq!(without_exec.len(), 4);
        assert_eq!(find(n, "broker.status").unwrap().verb, "status");
        for d in definitions(n, None, true) {
            let text = d["description"].as_str().unwrap();
            assert!(!text.contains("broker."), "{text}");
        }
    }

    #[test]
    fn only_the_tools_that_look_are_advertised_read_only() {
        let read_only: Vec<String> = definitions(Naming::broker("."), None, true)
            .iter()
            .filter(|d| d["annotations"]["readOnlyHint"] == true)
            .map(|d| d["name"].as_str().unwrap().to_string())
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
        let defs = definitions(Naming::broker("__"), Some(900_000), true);
        assert_eq!(defs[3]["name"], "broker__call_tool");
        assert_eq!(defs[3]["_meta"]["anthropic/maxResultSizeChars"], 500_000);
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
        let _ = call_tool::MAX_RESULT_SIZE_CHARS;
    }
}
