//! `mcp-broker client import --client C [--apply]`: the servers a client starts itself become
//! the broker's upstreams, and the client's file keeps one entry, the broker's. The default is
//! a dry run: both changes as diffs. `--apply` writes exactly those (refused when either file
//! changed since), after a backup of the client's file. Secrets are never copied: a value that
//! looks like one becomes a `${NAME}` reference, and the names to export are listed.

use std::process::ExitCode;

use mcpb_clients::{Backups, Server};
use mcpb_config::Settings;
use mcpb_config::template::looks_like_credential;

use crate::client_cmd::{Target, read, refused, resolve};
use crate::fail;
use crate::upstreams_cmd::{NewUpstream, entry, file_to_edit, validate};

/// An upstream name for a client's server name: lowercase, only what upstream names take.
fn upstream_name(server: &str) -> String {
    let mut out: String = server
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    out = out.trim_matches(|c| c == '-' || c == '_').to_string();
    if out.is_empty() { "server".into() } else { out }
}

/// Whether a value reads like a credential: long, no spaces, letters and digits mixed, and
/// not a path or an address.
fn secret_looking(value: &str) -> bool {
    value.len() >= 16
        && !value.contains(' ')
        && !value.contains('/')
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic())
}

/// The name of the variable a secret is to come from.
fn variable(upstream: &str, key: &str) -> String {
    let key = key.to_ascii_uppercase().replace('-', "_");
    if key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && !key.contains(' ') {
        key
    } else {
        format!("{}_{key}", upstream.to_ascii_uppercase().replace('-', "_"))
    }
}

/// A server as the broker's upstream; the variables its secrets are to come from.
fn as_upstream(s: &Server, name: &str, needed: &mut Vec<String>) -> NewUpstream {
    let mut env = Vec::new();
    for (k, v) in &s.env {
        if looks_like_credential(k) || secret_looking(v) {
            let var = variable(name, k);
            env.push(format!("{k}=${{{var}}}"));
            needed.push(var);
        } else {
            env.push(format!("{k}={v}"));
        }
    }
    let mut headers = Vec::new();
    for (k, v) in &s.headers {
        if looks_like_credential(k) || secret_looking(v) {
            let var = format!(
                "{}_{}",
                name.to_ascii_uppercase().replace('-', "_"),
                "TOKEN"
            );
            let value = match v.split_once(' ') {
                // `Bearer xyz`: the scheme stays, the token comes from the variable.
                Some((scheme, _)) if !scheme.is_empty() => format!("{scheme} ${{{var}}}"),
                _ => format!("${{{var}}}"),
            };
            headers.push(format!("{k}={value}"));
            needed.push(var);
        } else {
            headers.push(format!("{k}={v}"));
        }
    }
    let mut command = Vec::new();
    if let Some(c) = &s.command {
        command.push(c.clone());
        command.extend(s.args.iter().cloned());
    }
    NewUpstream {
        name: name.to_string(),
        command,
        url: s.url.clone().filter(|_| s.command.is_none()),
        transport: (s.sse && s.command.is_none()).then(|| "sse".to_string()),
        headers,
        env,
        lifecycle: None,
    }
}

pub(crate) fn import(
    settings: &Settings,
    t: &Target<'_>,
    explicit_config: Option<&std::path::Path>,
    apply: bool,
) -> ExitCode {
    let r = match resolve(settings, t) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let before = match read(&r.path) {
        Ok(Some(b)) => b,
        Ok(None) => {
            return fail(
                &format!(
                    "mcp-broker: {} does not exist; nothing to import",
                    r.path.display()
                ),
                &[&format!(
                    "`mcp-broker client render --client {}` adds the broker's entry",
                    r.client.name()
                )],
            );
        }
        Err(code) => return code,
    };
    let servers = match mcpb_clients::servers(r.client, &r.path, &before) {
        Ok(s) => s,
        Err(e) => return refused(&e),
    };
    if servers.is_empty() {
        errln!("{}: no servers of its own to import", r.path.display());
        return ExitCode::SUCCESS;
    }
    let (config_path, config_before) = match file_to_edit(explicit_config) {
        Ok(f) => f,
        Err(code) => return code,
    };
    // Upstreams added one by one; a name the broker has already is left to the user.
    let mut config_after = config_before.clone();
    let mut needed = Vec::new();
    let mut moved = Vec::new();
    for s in &servers {
        let name = upstream_name(&s.name);
        let lines = match entry(&as_upstream(s, &name, &mut needed)) {
            Ok(l) => l,
            Err(e) => {
                errln!("mcp-broker: {} is left in the client: {e}", s.name);
                continue;
            }
        };
        match crate::yaml_edit::add_upstream(&config_after, &name, &lines) {
            Ok(next) => {
                config_after = next;
                moved.push(s.name.clone());
            }
            Err(e) => errln!("mcp-broker: {} is left in the client: {e}", s.name),
        }
    }
    if moved.is_empty() {
        return fail("mcp-broker: nothing could be imported", &[]);
    }
    if let Err(code) = validate(&config_path, &config_after) {
        return code;
    }
    let client_after = match mcpb_clients::without(r.client, &r.path, &before, &moved)
        .and_then(|t| mcpb_clients::render(r.client, &r.path, Some(&t), &r.entry))
    {
        Ok(t) => t,
        Err(e) => return refused(&e),
    };
    let note_file = settings
        .runtime
        .state_dir()
        .join("renders")
        .join(format!("import-{}.json", r.client.name()));
    let note = serde_json::json!({
        "client": r.path.display().to_string(),
        "client_before": mcpb_clients::sha256(before.as_bytes()),
        "client_after": mcpb_clients::sha256(client_after.as_bytes()),
        "config": config_path.display().to_string(),
        "config_before": mcpb_clients::sha256(config_before.as_bytes()),
        "config_after": mcpb_clients::sha256(config_after.as_bytes()),
    });
    needed.sort();
    needed.dedup();
    if !apply {
        out!(
            "{}",
            mcpb_clients::diff(&config_path, &config_before, &config_after)
        );
        out!("{}", mcpb_clients::diff(&r.path, &before, &client_after));
        if let Err(e) = mcpb_config::layout::write_private(&note_file, note.to_string().as_bytes())
        {
            return fail(&format!("mcp-broker: cannot note the dry run: {e}"), &[]);
        }
        errln!("a dry run: nothing was written");
        if !needed.is_empty() {
            errln!(
                "the daemon will need these in its environment (their values are in {} now): {}",
                r.path.display(),
                needed.join(", ")
            );
        }
        errln!(
            "hint: `mcp-broker client import --client {} --apply` writes both",
            r.client.name()
        );
        return ExitCode::SUCCESS;
    }
    let seen: serde_json::Value = std::fs::read_to_string(&note_file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    if seen != note {
        return fail(
            "mcp-broker: a file changed since the dry run (or none was made); nothing was written",
            &[&format!(
                "`mcp-broker client import --client {}` shows the change",
                r.client.name()
            )],
        );
    }
    if let Err(e) = settings.runtime.ensure() {
        return fail(
            &format!("mcp-broker: cannot make the runtime dir: {e}"),
            &[],
        );
    }
    let backups = Backups::new(&settings.runtime.root.join("backups"), r.client, &r.path);
    let backup =
        match crate::client_cmd::back_up(&backups, &r, Some(before.as_bytes()), &client_after) {
            Ok(b) => b,
            Err(code) => return code,
        };
    // The broker first: a client pointed at the broker before it has the servers would lose
    // them for a while.
    let code = crate::upstreams_cmd::commit(
        &config_path,
        &config_after,
        &format!("imported {} server(s) as upstreams", moved.len()),
    );
    if code != ExitCode::SUCCESS {
        return code;
    }
    if let Err(e) = mcpb_clients::write_keeping_mode(&r.path, client_after.as_bytes()) {
        return fail(
            &format!("mcp-broker: {e}"),
            &["the client's file is as it was"],
        );
    }
    let _ = std::fs::remove_file(&note_file);
    outln!(
        "{}: the client starts only the broker now (backup {})",
        r.path.display(),
        backup.name
    );
    if !needed.is_empty() {
        errln!(
            "hint: export {} where the daemon starts, then `mcp-broker restart`",
            needed.join(", ")
        );
    }
    errln!(
        "hint: `mcp-broker client rollback --client {}` puts the client's file back",
        r.client.name()
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_secrets_are_made_safe_for_the_config() {
        assert_eq!(upstream_name("GitHub Server"), "github-server");
        assert_eq!(upstream_name("@scope/pkg"), "scope-pkg");
        assert!(secret_looking("ghp_abcdefghijkl1234567890"));
        assert!(!secret_looking("debug"));
        assert!(!secret_looking("/home/u/projects/repo2026"));
        let s = Server {
            name: "gh".into(),
            command: Some("npx".into()),
            args: vec!["-y".into(), "server-github".into()],
            env: vec![
                (
                    "GITHUB_PERSONAL_ACCESS_TOKEN".into(),
                    "ghp_realvalue123456789".into(),
                ),
                ("LOG".into(), "info".into()),
            ],
            url: None,
            sse: false,
            headers: vec![],
        };
        let mut needed = Vec::new();
        let u = as_upstream(&s, "gh", &mut needed);
        assert_eq!(
            u.env,
            [
                "GITHUB_PERSONAL_ACCESS_TOKEN=${GITHUB_PERSONAL_ACCESS_TOKEN}",
                "LOG=info"
            ]
        );
        assert_eq!(needed, ["GITHUB_PERSONAL_ACCESS_TOKEN"]);
        assert_eq!(u.command, ["npx", "-y", "server-github"]);
        let remote = Server {
            name: "notes".into(),
            command: None,
            args: vec![],
            env: vec![],
            url: Some("https://notes.example/mcp".into()),
            sse: false,
            headers: vec![("Authorization".into(), "Bearer sk-live-abcdef123456".into())],
        };
        let u = as_upstream(&remote, "notes", &mut needed);
        assert_eq!(u.headers, ["Authorization=Bearer ${NOTES_TOKEN}"]);
        assert!(!format!("{:?}", u.headers).contains("sk-live"));
    }
}
