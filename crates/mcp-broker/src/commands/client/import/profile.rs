//! The profile a moved client's entry names: the one it names already, the one `clients:` maps
//! it to, or one made for it, and only when that profile can show the servers as the client
//! had them (mutating tools, names its model accepts); the config's text with what it needs.

use mcpb_clients::Client;
use mcpb_config::{NameStyle, Settings};

use crate::cli::ImportArgs;
use crate::fail;
use std::process::ExitCode;

/// The profile the client's entry is to name, and the config's text with what it needs.
pub(crate) struct ProfileChange {
    pub name: String,
    pub text: String,
    pub said: Vec<String>,
}

pub(crate) fn profile_change(
    settings: &Settings,
    a: &ImportArgs,
    client: Client,
    text: &str,
    upstreams: &[String],
    entry_profile: Option<&str>,
) -> Result<ProfileChange, ExitCode> {
    let mut said = Vec::new();
    // The profile asked for, else the one the broker's entry names already (the client keeps
    // what it reaches through it), else the client's own from `clients:` when it can show the
    // servers as the client had them, else one named after the client.
    let mut candidates: Vec<(String, &str)> = Vec::new();
    match &a.profile {
        Some(p) => candidates.push((p.clone(), "--profile")),
        None => {
            if let Some(e) = entry_profile {
                candidates.push((e.to_string(), "the broker's entry"));
            }
            if let Some(m) = settings.clients.get(client.name()) {
                candidates.push((m.clone(), "`clients:`"));
            }
            candidates.push((client.name().to_string(), "its own"));
        }
    }
    for (name, source) in &candidates {
        let Some(existing) = settings.profiles.get(name) else {
            return new_profile(a, client, text, name, upstreams, said);
        };
        if let Err((why, fixes)) = fits(existing, a, client, upstreams) {
            // A profile the user chose, or the client reaches its tools through now, is never
            // swapped for another behind their back.
            if *source != "`clients:`" {
                let mut hints: Vec<&str> = fixes.iter().map(String::as_str).collect();
                let fix = format!("--profile NEW makes a profile for {} alone", client.name());
                hints.push(&fix);
                return Err(fail(
                    &format!("mcp-broker: profile {name} (named by {source}) {why}"),
                    &hints,
                ));
            }
            said.push(format!(
                "`clients:` maps {} to profile {name}, which {why}; the entry names its own profile instead",
                client.name()
            ));
            continue;
        }
        return extend_profile(a, text, name, existing, upstreams, said);
    }
    Err(fail("mcp-broker: no profile to use", &[]))
}

/// Whether an existing profile shows the servers as the client had them: why not, and fixes.
fn fits(
    existing: &mcpb_config::ProfileSettings,
    a: &ImportArgs,
    client: Client,
    upstreams: &[String],
) -> Result<(), (String, Vec<String>)> {
    let name = &existing.name;
    if !a.read_only && !existing.allow_mutating_upstreams {
        return Err((
            format!(
                "hides mutating tools, which {}'s servers gave it",
                client.name()
            ),
            vec![
                "--read-only accepts that the client loses them".into(),
                format!("or set `allow_mutating_upstreams: true` in profile {name}"),
            ],
        ));
    }
    if needs_plain_names(client) && existing.broker_tool_name_style == NameStyle::Dotted {
        return Err((
            format!("names tools with dots, which {} refuses", client.name()),
            vec![format!(
                "set `broker_tool_name_style: {}` in profile {name}",
                plain_style(upstreams)
            )],
        ));
    }
    Ok(())
}

fn new_profile(
    a: &ImportArgs,
    client: Client,
    text: &str,
    name: &str,
    upstreams: &[String],
    mut said: Vec<String>,
) -> Result<ProfileChange, ExitCode> {
    let mut lines = vec![
        format!("{name}:"),
        format!(
            "  description: {}",
            serde_json::to_string(&format!("The servers {} had before import", client.name()))
                .unwrap_or_default()
        ),
        format!(
            "  upstreams: [{}]",
            upstreams
                .iter()
                .map(|u| crate::yaml_edit::yaml_name(u))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!("  allow_mutating_upstreams: {}", !a.read_only),
    ];
    if needs_plain_names(client) {
        lines.push(format!(
            "  broker_tool_name_style: {}",
            plain_style(upstreams)
        ));
    }
    let view = a.view.ask().unwrap_or(crate::cli::ViewAsk::Budget(
        crate::commands::profile::view::DEFAULT_BUDGET,
    ));
    lines.extend(view.lines());
    let text = crate::yaml_edit::add_entry(text, "profiles", name, &lines)
        .map_err(|e| fail(&format!("mcp-broker: cannot add profile {name}: {e}"), &[]))?;
    said.push(format!(
        "profile {name} (new): exactly these servers, {}, {}{}",
        if a.read_only {
            "mutating tools hidden"
        } else {
            "mutating tools shown as the client had them (--read-only hides them)"
        },
        view.describe(),
        match (needs_plain_names(client), plain_style(upstreams)) {
            (false, _) => "",
            (true, "underscore") => ", names like server_tool",
            (true, _) => ", names like server__tool (a server's name has '_')",
        }
    ));
    Ok(ProfileChange {
        name: name.to_string(),
        text,
        said,
    })
}

fn extend_profile(
    a: &ImportArgs,
    text: &str,
    name: &str,
    existing: &mcpb_config::ProfileSettings,
    upstreams: &[String],
    mut said: Vec<String>,
) -> Result<ProfileChange, ExitCode> {
    let missing: Vec<String> = upstreams
        .iter()
        .filter(|u| !existing.upstreams.contains(u))
        .cloned()
        .collect();
    let mut text = text.to_string();
    if missing.is_empty() {
        said.push(format!("profile {name}: shows them already"));
    } else {
        match crate::yaml_edit::add_to_profile_upstreams(&text, name, &missing) {
            Ok(Some(t)) => {
                text = t;
                said.push(format!(
                    "profile {name}: {} added to its upstreams",
                    missing.join(", ")
                ));
            }
            Ok(None) => said.push(format!("profile {name}: sees every upstream already")),
            Err(e) => {
                return Err(fail(
                    &format!("mcp-broker: profile {name} would hide the imported servers: {e}"),
                    &[
                        &format!(
                            "add {} to profiles.{name}.upstreams by hand",
                            missing.join(", ")
                        ),
                        "--profile NEW makes a profile for this client alone",
                    ],
                ));
            }
        }
    }
    if let Some(view) = a.view.ask()
        && !view.holds(existing)
    {
        text = view.apply(&text, name).map_err(|e| {
            fail(
                &format!("mcp-broker: cannot change what profile {name} shows: {e}"),
                &[&format!(
                    "edit profiles.{name} by hand, then import again without the flag"
                )],
            )
        })?;
        said.push(format!("profile {name}: now shows {}", view.describe()));
    }
    Ok(ProfileChange {
        name: name.to_string(),
        text,
        said,
    })
}

/// Clients whose model API takes tool names of `^[a-zA-Z0-9_-]{1,64}$` only.
fn needs_plain_names(client: Client) -> bool {
    matches!(client, Client::Codex)
}

/// The name style without dots for these upstreams: `underscore` (`broker_search_tools`, the
/// names Codex prompts use), or `double_underscore` when a name has `_` (one `_` would not
/// say where the upstream's name ends).
fn plain_style(upstreams: &[String]) -> &'static str {
    if upstreams.iter().any(|u| u.contains('_')) {
        "double_underscore"
    } else {
        "underscore"
    }
}

#[cfg(test)]
mod tests {
    use super::plain_style;

    #[test]
    fn codex_gets_single_underscores_unless_a_server_name_has_one() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(plain_style(&names(&["git", "notes-db"])), "underscore");
        assert_eq!(
            plain_style(&names(&["git", "my_notes"])),
            "double_underscore"
        );
    }
}
