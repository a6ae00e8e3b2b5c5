//! Smoke probes read without running them: a probe's tool as its upstream names it, and the
//! probes whose tool is not in their upstream's last known list (`config validate`).

use mcpb_config::Settings;

/// A probe's tool as its upstream names it: `memory.read_graph` and `memory__read_graph` are
/// `read_graph`; anything else is taken as written.
pub(crate) fn local_name<'a>(upstream: &str, tool: &'a str) -> &'a str {
    [".", "__"]
        .iter()
        .find_map(|s| tool.strip_prefix(upstream)?.strip_prefix(s))
        .unwrap_or(tool)
}

/// Each smoke probe whose tool is not in its upstream's last known list (the catalog on
/// disk), or is hidden by its filter: `upstreams.<name>.smoke.tool: why` with a "did you
/// mean". Upstreams never listed are named in the second list: nothing to check them against.
pub(crate) fn probe_names_unknown(
    settings: &Settings,
    known: &dyn Fn(&str) -> Option<std::sync::Arc<Vec<mcpb_protocol::Tool>>>,
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut unchecked = Vec::new();
    for (name, up) in &settings.upstreams {
        let Some(tool) = up.smoke.as_ref().and_then(|s| s.tool.as_deref()) else {
            continue;
        };
        let Some(list) = known(name) else {
            unchecked.push(name.clone());
            continue;
        };
        let names: Vec<&str> = list.iter().map(mcpb_protocol::Tool::name).collect();
        let local = local_name(name, tool);
        let key = format!("upstreams.{name}.smoke.tool");
        if !names.contains(&local) {
            let near = mcpb_facade::suggest::closest(local, names.iter().copied(), 3);
            let hint = if near.is_empty() {
                format!("its tools: {}", names.join(", "))
            } else {
                format!("did you mean {}?", near.join(", "))
            };
            problems.push(format!(
                "{key}: {name} has no tool {local:?} in its last known list ({} tools); {hint}",
                names.len()
            ));
        } else if !up.tool_filter.admits(local) {
            problems.push(format!(
                "{key}: {local:?} is hidden by {name}'s tools_allow/tools_deny, so no profile can probe it"
            ));
        }
    }
    (problems, unchecked)
}
