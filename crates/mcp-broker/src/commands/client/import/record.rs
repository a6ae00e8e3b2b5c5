//! An import's record (`state/imports/<client>.json`): which profile a client's entry names,
//! the backups its import took, the servers it moved. Read by the parity check, rollback,
//! `add` and `uninstall`; below every command module, so none of them reaches another
//! through it.

use std::path::PathBuf;

use mcpb_clients::Client;
use mcpb_config::Settings;

/// Where an import's record is kept.
pub(crate) fn record_path(settings: &Settings, client: Client) -> PathBuf {
    settings
        .runtime
        .state_dir()
        .join("imports")
        .join(format!("{}.json", client.name()))
}

/// The import's record of `client`, when there is a readable one.
pub(crate) fn read_record(settings: &Settings, client: Client) -> Option<serde_json::Value> {
    std::fs::read_to_string(record_path(settings, client))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
}
