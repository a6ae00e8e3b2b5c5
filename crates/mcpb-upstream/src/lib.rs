//! Upstream MCP servers as the daemon sees them, in every lifecycle (shared, per session, per
//! call): spawning a child in its own process group with a
//! cleared environment, the MCP handshake, one instance per running process that rewrites request
//! ids so many sessions share it, the cached tool list (capped, each tool checked on its own),
//! and the stop ladder that leaves no process of the upstream behind, not even one that left its
//! process group (the daemon adopts such orphans as a child subreaper).
//!
//! This crate knows nothing of clients, sessions, profiles or policy; it answers "send this request
//! to that upstream" and "what is its state". Unsafe code is limited to the pre-exec hook in
//! `process.rs`.
#![deny(unsafe_code)]

mod auth_seen;
mod env;
mod error;
mod health;
mod inbound;
mod instance;
mod last_words;
mod ledger;
mod link;
mod orphans;
mod process;
mod remote;
pub mod sandboxed;
mod sign_in;
mod state;
mod status;
mod stderr;
mod stdio;
mod toolcheck;
mod transport;
mod upstream;

pub use auth_seen::{AuthSeen, RefreshFailure, Refusal};
pub use env::BASE_ALLOWLIST;
pub use error::UpstreamError;
pub use inbound::Notice;
pub use instance::{CallOptions, ListChanged, Outgoing, Reply};
pub use ledger::{Ledger, LedgerEntry, Reaped, ledger_dir};
pub use link::{ClientLink, Responder};
pub use orphans::{adopt_orphans, kill_adopted, reap_adopted};
pub use process::StopTimings;
pub use upstream::{
    RejectedTool, Shared, Upstream, UpstreamContext, UpstreamState, UpstreamStatus,
};
