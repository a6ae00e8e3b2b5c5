//! One import pipeline, whatever the servers come from: a source (a client's files: see
//! `commands/client/import`; an MCP Exec Broker config: `commands/config/import.rs`) finds
//! servers; `plan` gives each its fate, one upstream per server and its secrets to files;
//! `change` shows the whole change in a dry run and writes exactly that on `--apply`.

pub(crate) mod change;
pub(crate) mod plan;
pub(crate) mod secrets;
