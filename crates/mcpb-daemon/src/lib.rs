//! The daemon: one Unix socket, one task per connection, MCP sessions in a profile's view (raw
//! tools, the compact broker tools, or both), routing of calls to shared upstream instances,
//! the known tool lists with their pin verdicts, admin commands and graceful shutdown.
//!
//! It decides no policy itself (that is `mcpb-policy`), owns no process handling (that is
//! `mcpb-upstream`), and leaves schema trimming and the shaping of results to `mcpb-facade`;
//! it owns the broker tools and wires clients to them. It never exits because of one client or one
//! upstream.
//!
//! A request, file by file (each file owns one step; data flows down this list only):
//!
//! 1. `listener.rs`: bind, accept, drain, stop; one `Handler` per connection.
//! 2. `connection.rs`: the hello; then `admin.rs` (one command) or a session with its profile.
//! 3. `session/mod.rs`: frames in, requests as tasks, cancellation, the end of the session;
//!    `session/handshake.rs`: `initialize` / `server/discover` and the client's era.
//! 4. `route.rs`: every method by name (the session read it once), `tools/list` and
//!    `tools/call` with params parsed once, the answer adapted to the client's era.
//! 5. `view/`: the `ProfileView` of the request: visible tools (`view/tool.rs`), resolve,
//!    list, call, the search index (`view/search.rs`).
//! 6. `tools/`: one file per broker tool (list_servers, search_tools, describe_tool,
//!    call_tool, get_artifact, status, close_session, run_code, exec_open, exec_upload,
//!    exec_run, exec_close), listed once in `tools/registry.rs`; each gets a narrow `Ctx`.
//! 7. `mcpb_upstream::Upstream::call`: the upstream's instance for this session, then the
//!    instance's pending map and the process's stdin.
//!
//! Beside the path: `broker.rs` (lifecycle state: configuration generation, registry, drain),
//! `generation.rs` (settings + upstreams of one configuration), `known.rs` (judged tool lists),
//! `link.rs` (a session as upstreams see it: progress, server requests, list changes),
//! `outbox.rs` (the bounded queue of frames to a client), `handover.rs` (the client's stdio
//! handed over by the shim), `calls.rs` (each call's record: counts for `status`, the audit
//! log), `drain.rs`, `reload.rs`, `error.rs`, `report.rs` (what `status` shows), `console.rs` (the web console's answers and actions,
//! started on request).
#![forbid(unsafe_code)]

mod admin;
mod broker;
mod calls;
mod connection;
mod console;
mod drain;
mod error;
mod exec;
mod generation;
mod handover;
mod http;
mod known;
mod link;
mod listener;
mod notices;
mod outbox;
mod reload;
mod report;
mod route;
mod session;
pub mod tools;
mod usage;
mod view;

pub use error::DaemonError;
pub use known::listing_key;
pub use listener::{run, run_with};
