//! The variables between the daemon and the sandbox's helper, by name (the broker's own are in
//! `mcpb_config::env`, above this crate).

/// The file `sandbox check` has the tracer write what the kernel refused to.
pub const TRACE_FILE: &str = "MCP_BROKER_TRACE_FILE";
/// Where a coverage build's sandboxed processes write their profiles.
pub const COVERAGE_PROFILE_DIR: &str = "MCP_BROKER_COVERAGE_PROFILE_DIR";
/// The relay's host-side pid, told to the sandboxed server.
pub const SANDBOX_PID: &str = "MCP_BROKER_SANDBOX_PID";
