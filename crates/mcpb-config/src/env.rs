//! Every environment variable the broker reads or sets, by name: one place to find what a
//! variable does and who reads it. (The sandbox's own, between the daemon and its helper, are
//! in `mcpb_sandbox`, below this crate; the bench's knobs in `mcpb-bench`.)

/// The runtime dir (default `~/mcp/mcp-broker`).
pub const HOME: &str = "MCP_BROKER_HOME";
/// The config file (else `$MCP_BROKER_HOME/broker.yaml`, else the embedded default).
pub const CONFIG: &str = "MCP_BROKER_CONFIG";
/// The log filter (`info`, `mcpb_daemon=debug`, …).
pub const LOG: &str = "MCP_BROKER_LOG";
/// `bytes`: the shim relays bytes instead of handing its stdio to the daemon.
pub const RELAY: &str = "MCP_BROKER_RELAY";
/// A sandbox policy for every upstream whose config names none (the test command's second
/// pass).
pub const UPSTREAM_SANDBOX: &str = "MCP_BROKER_UPSTREAM_SANDBOX";
/// The command a service unit starts instead of this executable (a package's wrapper).
pub const DAEMON_COMMAND: &str = "MCP_BROKER_DAEMON_COMMAND";
/// `1`: the shim accepts a home or config inside the folder its client started it in.
pub const ALLOW_PROJECT_HOME: &str = "MCP_BROKER_ALLOW_PROJECT_HOME";
/// An MCP Exec Broker config for `config import` without a file argument.
pub const EXEC_CONFIG: &str = "MCP_EXEC_CONFIG";
/// What every broker variable starts with: the daemon a CLI starts gets them all.
pub const PREFIX: &str = "MCP_BROKER_";
/// The variables a client's entry may carry: they name the broker's own home and config.
pub const ENTRY: [&str; 2] = [HOME, CONFIG];
