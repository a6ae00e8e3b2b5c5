//! What a valid configuration can still get wrong at run time, found before it runs: a command
//! not on the PATH the daemon will see, a `${VAR}` not set in the environment it will start
//! from, a `${file:NAME}` secret missing or readable by others. Each finding says what to do.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mcpb_config::Settings;
use mcpb_config::template::{Part, Template};

/// One thing that will fail: what, where, and the hint that fixes it.
pub(crate) struct Finding {
    pub what: String,
    pub hint: String,
}

/// Whether `command` would be found and run: a path that is an executable file, or a name on
/// `path` (a PATH value).
pub(crate) fn runnable(command: &str, path: &str) -> bool {
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        return executable(Path::new(command));
    }
    std::env::split_paths(path).any(|dir| executable(&dir.join(command)))
}

fn template_findings(
    settings: &Settings,
    key: &str,
    template: &Template,
    env: &dyn Fn(&str) -> Option<String>,
    whose: &str,
    out: &mut Vec<Finding>,
) {
    for part in template.parts() {
        match part {
            Part::Env(name) if env(name).is_none() => out.push(Finding {
                what: format!("{key}: ${{{name}}} is not set in {whose}"),
                hint: format!(
                    "export {name}=... where the daemon starts (then `mcp-broker stop`; the next client starts it with the value), or use ${{file:NAME}} under {}",
                    settings.runtime.secrets_dir().display()
                ),
            }),
            Part::SecretFile(name) => {
                let file = settings.runtime.secrets_dir().join(name);
                match file.metadata() {
                    Err(_) => out.push(Finding {
                        what: format!("{key}: ${{file:{name}}} names {}, which does not exist", file.display()),
                        hint: format!("write the secret there: install -m 600 /dev/stdin {}", file.display()),
                    }),
                    Ok(m) if m.permissions().mode() & 0o077 != 0 => out.push(Finding {
                        what: format!("{key}: {} is readable by others (mode {:o})", file.display(), m.permissions().mode() & 0o777),
                        hint: format!("chmod 600 {}", file.display()),
                    }),
                    Ok(_) => {}
                }
            }
            Part::Literal(_) | Part::Env(_) => {}
        }
    }
}

/// Everything in `settings` that would fail when it runs from this environment, or, when a
/// daemon runs (`daemon_env`: the referenced variables it has), from the daemon's: a variable
/// the daemon has is fine whatever this shell says.
pub(crate) fn run_time(settings: &Settings, daemon_env: Option<&[String]>) -> Vec<Finding> {
    let env = |k: &str| match daemon_env {
        Some(set) => set.iter().any(|n| n == k).then(String::new),
        None => std::env::var(k).ok(),
    };
    let whose = if daemon_env.is_some() {
        "the running daemon's environment"
    } else {
        "this environment"
    };
    let path = std::env::var("PATH").unwrap_or_default();
    let mut out = Vec::new();
    if settings.broker.search_model == mcpb_config::SearchModel::Minilm {
        let dir = settings.runtime.minilm_dir();
        if !cfg!(feature = "semantic-minilm") {
            out.push(Finding {
                what: "broker.search.model: minilm: this binary was built without it; searches use the static model".into(),
                hint: "build with `cargo install --path crates/mcp-broker --features semantic-minilm`, or write `model: static`".into(),
            });
        } else if !dir.join("model.safetensors").is_file() {
            out.push(Finding {
                what: format!(
                    "broker.search.model: minilm: no weights in {}; searches use the static model",
                    dir.display()
                ),
                hint: "scripts/install-minilm puts them there".into(),
            });
        }
    }
    for up in settings.upstreams.values().filter(|u| u.enabled()) {
        let n = &up.name;
        // A relative path runs from the upstream's cwd when it has one.
        let in_cwd = |cmd: &str| match &up.cwd {
            Some(dir) if cmd.contains('/') && !cmd.starts_with('/') => {
                dir.join(cmd).display().to_string()
            }
            _ => cmd.to_string(),
        };
        if up.transport.is_local_process()
            && let Some(cmd) = &up.command
            && !runnable(&in_cwd(cmd), &path)
        {
            out.push(Finding {
                what: format!(
                    "upstreams.{n}.command: `{cmd}` is not found on the PATH the daemon will see"
                ),
                hint: format!(
                    "install it, or write its absolute path in upstreams.{n}.command (`command -v {}` prints it); `mcp-broker remove {n}` if it is not wanted",
                    cmd.rsplit('/').next().unwrap_or(cmd)
                ),
            });
        }
        for (k, t) in &up.env {
            template_findings(
                settings,
                &format!("upstreams.{n}.env.{k}"),
                t,
                &env,
                whose,
                &mut out,
            );
        }
        for (k, t) in &up.headers {
            template_findings(
                settings,
                &format!("upstreams.{n}.headers.{k}"),
                t,
                &env,
                whose,
                &mut out,
            );
        }
        if let Some(t) = up.oauth.as_ref().and_then(|o| o.client_secret.as_ref()) {
            template_findings(
                settings,
                &format!("upstreams.{n}.oauth.client_secret"),
                t,
                &env,
                whose,
                &mut out,
            );
        }
    }
    for (i, t) in settings
        .http
        .iter()
        .flat_map(|h| h.tokens.iter())
        .enumerate()
    {
        template_findings(
            settings,
            &format!("http.tokens[{i}].token"),
            &t.token,
            &env,
            whose,
            &mut out,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn commands_are_found_on_the_path_or_by_their_own_path() {
        assert!(super::runnable("sh", "/usr/bin:/bin"));
        assert!(super::runnable("/bin/sh", ""));
        assert!(!super::runnable("no-such-command-here", "/usr/bin:/bin"));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("notes.txt");
        std::fs::write(&plain, "x").unwrap();
        assert!(!super::runnable(plain.to_str().unwrap(), ""));
    }
}
