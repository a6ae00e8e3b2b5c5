//! The AI clients' own config files: where each keeps its MCP servers, the broker's one entry
//! rendered into that file in its own format (JSON with comments for most, TOML for Codex)
//! keeping every other entry, comment and the order as written, a unified diff of the change,
//! and timestamped backups to roll back to. It reads and writes client files only when told
//! to; it never starts a client or the daemon.

#![forbid(unsafe_code)]

mod approval;
pub mod apps;
mod backup;
mod client;
mod edit;
mod error;
mod import;
mod place;
mod undo;

pub use approval::Approvals;
pub use backup::{Backup, Backups, plain_file, plain_project_file, write_keeping_mode};
pub use client::runs_broker;
pub use client::{Client, Entry};
pub use edit::{current_entry, diff, entry_value, render, runs, sha256};
pub use error::ClientsError;
pub use import::{OwnEnv, Server, disable_project_servers, servers, servers_with, without};
pub use place::{Place, Scope, local_folder, local_folders};
pub use undo::undo;
