//! The daemon: one Unix socket, one task per connection, the hello exchange, MCP sessions in a
//! profile's view (raw tools or the compact facade), routing of calls to shared upstream
//! instances, the catalog of known tool lists with their pin verdicts, admin commands and
//! graceful shutdown.
//!
//! The daemon decides nothing about policy itself (that is `mcpb-policy`), owns no process
//! handling (that is `mcpb-upstream`) and shapes no results (that is `mcpb-facade`); it wires
//! clients to them. It never exits because of one
//! client or one upstream.
#![forbid(unsafe_code)]

mod admin;
mod broker;
mod catalog;
mod error;
mod facade;
mod link;
mod listener;
mod reload;
mod session;
mod stdio;
mod view;

pub use admin::{DaemonStatus, StatusReport};
pub use error::DaemonError;
pub use listener::run;
