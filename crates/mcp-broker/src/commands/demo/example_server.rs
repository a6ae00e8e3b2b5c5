//! `mcp-broker example-server`: a small real MCP stdio server used by the embedded default config,
//! the demo, the tests and the benchmark. Two read-only tools, one that changes state, one that
//! reads it back, with annotations that say which is which.

use std::sync::Arc;

use parking_lot::Mutex;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct EchoArgs {
    /// Text to send back.
    pub message: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct AddArgs {
    /// First addend.
    pub a: f64,
    /// Second addend.
    pub b: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NoteArgs {
    /// The note to store.
    pub text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NoArgs {}

#[derive(Debug, Clone)]
pub(crate) struct ExampleServer {
    notes: Arc<Mutex<Vec<String>>>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl ExampleServer {
    pub(crate) fn new() -> Self {
        Self {
            notes: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Return the given message unchanged.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    fn echo(&self, Parameters(EchoArgs { message }): Parameters<EchoArgs>) -> String {
        message
    }

    #[tool(
        description = "Add two numbers.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    #[tool(
        description = "Append a note to this server's in-memory note list; returns how many notes it holds.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    fn append_note(&self, Parameters(NoteArgs { text }): Parameters<NoteArgs>) -> String {
        let mut notes = self.notes.lock();
        notes.push(text);
        format!("{} notes", notes.len())
    }

    #[tool(
        description = "List the notes stored so far, one per line.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    fn list_notes(&self, Parameters(NoArgs {}): Parameters<NoArgs>) -> String {
        self.notes.lock().join("\n")
    }
}

impl Default for ExampleServer {
    fn default() -> Self {
        Self::new()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for ExampleServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "Example tools bundled with mcp-broker: echo, add, append_note, list_notes.",
        )
    }
}

pub(crate) async fn run() -> anyhow::Result<()> {
    let service = ExampleServer::new().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
