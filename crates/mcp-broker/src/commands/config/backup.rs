//! `mcp-broker config backup` and `config rollback [--backup NAME]`: copies of the config file
//! kept beside the client files' backups (`broker.yaml.<unix seconds>`, as `config import`
//! takes them), and one put back. A rollback checks the copy first and keeps the file it
//! replaces as a backup of its own, so it is undone the same way.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_config::{ConfigSource, ResolveContext, RuntimeLayout};

use crate::fail;

const PREFIX: &str = "broker.yaml.";

/// The config file in use (valid or not: a typo is no reason not to keep, or put back, a
/// copy) and where its backups are kept: its runtime dir's, as the file sets it when it loads,
/// else the default one.
fn places(explicit: Option<&Path>) -> Result<(PathBuf, PathBuf), ExitCode> {
    let ctx = ResolveContext::from_env();
    let ConfigSource::File(file) = mcpb_config::locate(explicit, &ctx) else {
        return Err(fail(
            "mcp-broker: no config file is in use (the embedded default is), so there is nothing to back up",
            &["`mcp-broker config init` writes one"],
        ));
    };
    let root = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| {
            mcpb_config::load_str(&t, "config", ConfigSource::File(file.clone()), &ctx).ok()
        })
        .map_or_else(|| ctx.runtime_root(None), |s| s.runtime.root);
    Ok((file, RuntimeLayout::new(root).backups_dir()))
}

/// The config's backups, oldest first.
fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<(u64, u32, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let stamp = name.strip_prefix(PREFIX)?;
            let (secs, n) = stamp.split_once('-').unwrap_or((stamp, "0"));
            Some((secs.parse().ok()?, n.parse().ok()?, name))
        })
        .collect();
    names.sort();
    names.into_iter().map(|(_, _, n)| n).collect()
}

/// Keeps `text` as a new backup; its path.
pub(crate) fn keep(dir: &Path, text: &[u8]) -> std::io::Result<PathBuf> {
    let now = mcpb_config::unix_now();
    let taken = list(dir);
    let mut name = format!("{PREFIX}{now}");
    let mut n = 0;
    while taken.contains(&name) {
        n += 1;
        name = format!("{PREFIX}{now}-{n}");
    }
    let path = dir.join(name);
    mcpb_config::layout::write_private(&path, text)?;
    Ok(path)
}

pub(crate) fn backup(explicit: Option<&Path>) -> ExitCode {
    let (file, dir) = match places(explicit) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let text = match std::fs::read(&file) {
        Ok(t) => t,
        Err(e) => {
            return fail(
                &format!("mcp-broker: cannot read {}: {e}", file.display()),
                &[],
            );
        }
    };
    match keep(&dir, &text) {
        Ok(path) => {
            outln!("{}", path.display());
            errln!("backup of {} taken", file.display());
            errln!("hint: `mcp-broker config rollback` puts the newest back");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("mcp-broker: cannot keep the backup: {e}"), &[]),
    }
}

pub(crate) fn rollback(explicit: Option<&Path>, name: Option<&str>) -> ExitCode {
    let (file, dir) = match places(explicit) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let all = list(&dir);
    let chosen = match name {
        Some(n) => all.iter().find(|b| b.as_str() == n),
        None => all.last(),
    };
    let Some(chosen) = chosen else {
        let names = if all.is_empty() {
            "(none)".to_string()
        } else {
            all.join(", ")
        };
        return fail(
            &format!(
                "mcp-broker: no backup {} of the config",
                name.unwrap_or("at all")
            ),
            &[
                &format!("backups: {names} (in {})", dir.display()),
                "`mcp-broker config backup` takes one",
            ],
        );
    };
    let text = match std::fs::read_to_string(dir.join(chosen)) {
        Ok(t) => t,
        Err(e) => return fail(&format!("mcp-broker: cannot read {chosen}: {e}"), &[]),
    };
    // A copy that would not load is never put back over one that does.
    if crate::commands::upstream::validate(&file, &text).is_err() {
        return fail(
            &format!("mcp-broker: backup {chosen} is not a valid config; nothing was changed"),
            &["`--backup NAME` picks another"],
        );
    }
    let kept = match std::fs::read(&file).map(|now| keep(&dir, &now)) {
        Ok(Ok(p)) => Some(p),
        Ok(Err(e)) => {
            return fail(
                &format!("mcp-broker: cannot keep the current file: {e}; nothing was changed"),
                &[],
            );
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return fail(
                &format!("mcp-broker: cannot read {}: {e}", file.display()),
                &[],
            );
        }
    };
    let code =
        crate::commands::upstream::commit(&file, &text, &format!("put back backup {chosen}"));
    if let (Some(p), ExitCode::SUCCESS) = (kept, code) {
        errln!(
            "hint: the file it replaced is kept as {}; `mcp-broker config rollback --backup {}` puts it back",
            p.display(),
            p.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        );
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backups_are_named_by_time_and_listed_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let a = keep(dir.path(), b"a").unwrap();
        let b = keep(dir.path(), b"b").unwrap();
        std::fs::write(dir.path().join("broker.yaml.10"), "old").unwrap();
        std::fs::write(dir.path().join("claude-code"), "not one").unwrap();
        let names = list(dir.path());
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(names[0], "broker.yaml.10");
        assert_eq!(
            names[1..],
            [
                a.file_name().unwrap().to_string_lossy().into_owned(),
                b.file_name().unwrap().to_string_lossy().into_owned()
            ]
        );
    }
}
