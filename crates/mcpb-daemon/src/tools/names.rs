//! The broker tools' names in both vocabularies: where a tool's description reads a sibling's
//! name from, so no tool imports another (the registry alone names every tool's type).

use mcpb_config::Vocabulary;

use super::Naming;

/// A broker tool's name: `broker<sep><verb>`, and its name in the MCP Exec Broker's
/// vocabulary when it is part of it.
#[derive(Debug, Clone, Copy)]
pub struct Name {
    pub verb: &'static str,
    pub exec_broker: Option<&'static str>,
}

impl Name {
    /// The name a profile named `n` shows.
    pub fn under(self, n: Naming) -> String {
        match (n.vocabulary, self.exec_broker) {
            (Vocabulary::ExecBroker, Some(name)) => name.to_string(),
            (Vocabulary::ExecBroker, None) | (Vocabulary::Broker, _) => {
                format!("broker{}{}", n.sep, self.verb)
            }
        }
    }
}

const fn broker(verb: &'static str) -> Name {
    Name {
        verb,
        exec_broker: None,
    }
}

const fn both(verb: &'static str, exec_broker: &'static str) -> Name {
    Name {
        verb,
        exec_broker: Some(exec_broker),
    }
}

pub const LIST_SERVERS: Name = both("list_servers", "servers_list");
pub const SEARCH_TOOLS: Name = broker("search_tools");
pub const DESCRIBE_TOOL: Name = both("describe_tool", "tool_info");
pub const CALL_TOOL: Name = broker("call_tool");
pub const GET_ARTIFACT: Name = both("get_artifact", "exec_get_artifact");
pub const STATUS: Name = broker("status");
pub const CLOSE_SESSION: Name = broker("close_session");
pub const RUN_CODE: Name = broker("run_code");
pub const EXEC_OPEN: Name = both("exec_open", "exec_open");
pub const EXEC_UPLOAD: Name = broker("exec_upload");
pub const EXEC_RUN: Name = both("exec_run", "exec_run");
pub const EXEC_CLOSE: Name = both("exec_close", "exec_close");
pub const SERVER_TOOLS_LIST: Name = both("server_tools_list", "server_tools_list");
