mod checks;
mod contract;
mod defaults;
mod parse_errors;
mod parts;
mod props;
mod settings_parts;
mod validate;

/// The context every suite resolves with: a fixed home and binary, `sandbox` as if
/// `$MCP_BROKER_UPSTREAM_SANDBOX` said it.
fn context(sandbox: Option<&str>) -> mcpb_config::ResolveContext {
    mcpb_config::ResolveContext {
        home: Some("/home/user".into()),
        broker_home: None,
        exe: "/opt/mcp-broker".into(),
        upstream_sandbox: sandbox.map(str::to_string),
    }
}
