//! What a profile shows a client: raw tools, the compact facade, or a token budget (raw when
//! the tools fit, else the facade and the most used tools). `client import` writes it into the
//! profile it makes or, when asked, the profile a client uses already; `profile set` changes it.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::ViewAsk;
use crate::fail;

/// The token budget import gives a client's profile: the facade takes about 620 tokens (o200k,
/// its seven tools without code runs), so the client starts at that and the tools it calls most
/// fill the rest; a client whose servers' tools all take 1,000 tokens or less keeps them raw,
/// one round trip shorter per call than through the facade. (`docs/benchmarks.md`, per-client
/// context table.)
pub(crate) const DEFAULT_BUDGET: u32 = 1000;

/// About what the facade's own definitions take (o200k, `docs/benchmarks.md`): a budget
/// below it still shows the facade, which every tool is reached through.
const FACADE_TOKENS: u32 = 620;

impl ViewAsk {
    /// The lines of a new profile's entry (indented two spaces under its name).
    pub(crate) fn lines(self) -> Vec<String> {
        match self {
            ViewAsk::Raw => Vec::new(),
            ViewAsk::Compact => vec!["  compact_tools_enabled: true".into()],
            ViewAsk::Budget(n) => vec![format!("  tool_budget_tokens: {n}")],
        }
    }

    pub(crate) fn describe(self) -> String {
        match self {
            ViewAsk::Raw => "raw tools".into(),
            ViewAsk::Compact => "the compact facade".into(),
            ViewAsk::Budget(n) => format!(
                "a {n}-token budget (raw tools when they fit, else the facade and the tools the client calls most)"
            ),
        }
    }

    /// Whether `p` shows this already.
    pub(crate) fn holds(self, p: &mcpb_config::ProfileSettings) -> bool {
        match self {
            ViewAsk::Raw => {
                !p.compact_tools_enabled && p.tool_budget_tokens.is_none() && p.max_tools.is_none()
            }
            ViewAsk::Compact => p.compact_tools_enabled,
            ViewAsk::Budget(n) => !p.compact_tools_enabled && p.tool_budget_tokens == Some(n),
        }
    }

    /// The config's text with profile `name` showing this.
    pub(crate) fn apply(self, text: &str, name: &str) -> Result<String, String> {
        let set = |text: &str, key: &str, value: &str| {
            crate::yaml_edit::set_value(text, &["profiles", name, key], value)
                .map_err(|e| e.to_string())
        };
        let unset = |text: &str, key: &str| {
            crate::yaml_edit::unset_value(text, &["profiles", name, key]).map_err(|e| e.to_string())
        };
        // A setting back at its default goes from the file rather than stay as `false`/`null`.
        let text = match self {
            ViewAsk::Compact => set(text, "compact_tools_enabled", "true")?,
            ViewAsk::Raw | ViewAsk::Budget(_) => unset(text, "compact_tools_enabled")?,
        };
        let mut text = match self {
            ViewAsk::Budget(n) => set(&text, "tool_budget_tokens", &n.to_string())?,
            ViewAsk::Raw | ViewAsk::Compact => unset(&text, "tool_budget_tokens")?,
        };
        if self == ViewAsk::Raw {
            text = unset(&text, "max_tools")?;
        }
        Ok(text)
    }
}

/// `mcp-broker profile set P --raw|--compact|--budget N`: writes it, checks the file, and has
/// a running daemon reload it.
pub(crate) fn set(explicit: Option<&Path>, profile: &str, ask: Option<ViewAsk>) -> ExitCode {
    let Some(ask) = ask else {
        return fail(
            "mcp-broker: profile set needs what to show",
            &["--raw, --compact, or --budget TOKENS"],
        );
    };
    let (path, text) = match crate::commands::upstream::file_to_edit(explicit) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let settings = match crate::commands::upstream::validate(&path, &text) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let Some(p) = settings.profiles.get(profile) else {
        let names: Vec<&str> = settings.profiles.keys().map(String::as_str).collect();
        return fail(
            &format!("mcp-broker: no profile named {profile:?}"),
            &[&format!("profiles: {}", names.join(", "))],
        );
    };
    if ask.holds(p) {
        errln!("profile {profile} shows {} already", ask.describe());
        return ExitCode::SUCCESS;
    }
    if let ViewAsk::Budget(n) = ask
        && n < FACADE_TOKENS
    {
        errln!(
            "mcp-broker: {n} tokens is less than the facade itself takes (about {FACADE_TOKENS}): profile {profile} will show the facade alone, over the budget"
        );
    }
    match ask.apply(&text, profile) {
        Ok(next) => crate::commands::upstream::commit(
            &path,
            &next,
            &format!("profile {profile} now shows {}", ask.describe()),
        ),
        Err(e) => fail(
            &format!("mcp-broker: cannot change profile {profile}: {e}"),
            &[&format!(
                "write it in block style (`{profile}:` then one key per line), or edit profiles.{profile} by hand"
            )],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_is_switched_between_raw_compact_and_a_budget_in_place() {
        let text = "schema_version: 1\nprofiles:\n  claude-code:\n    upstreams: [a]  # mine\n    compact_tools_enabled: true\n";
        let b = ViewAsk::Budget(800).apply(text, "claude-code").unwrap();
        assert_eq!(
            b,
            "schema_version: 1\nprofiles:\n  claude-code:\n    upstreams: [a]  # mine\n    tool_budget_tokens: 800\n"
        );
        let r = ViewAsk::Raw.apply(&b, "claude-code").unwrap();
        assert_eq!(
            r,
            "schema_version: 1\nprofiles:\n  claude-code:\n    upstreams: [a]  # mine\n"
        );
        let c = ViewAsk::Compact.apply(&r, "claude-code").unwrap();
        assert!(c.ends_with("    compact_tools_enabled: true\n"), "{c}");
        assert_eq!(
            ViewAsk::from_flags(false, false, Some(5)),
            Some(ViewAsk::Budget(5))
        );
        assert_eq!(ViewAsk::from_flags(false, false, None), None);
    }
}
