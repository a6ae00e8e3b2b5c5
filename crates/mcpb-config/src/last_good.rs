//! The last configuration that loaded, kept under `state/`: a file saved with a typo must not
//! cut every client off. The daemon keeps a copy of each file it reads whole; a shim or a
//! daemon that finds the file invalid runs on that copy (and says so) instead of refusing.

use std::path::{Path, PathBuf};

use crate::load_str;
use crate::settings::ConfigSource;
use crate::{ResolveContext, Settings};

const FILE: &str = "last-good.yaml";
const HEADER: &str = "# mcp-broker: the last valid copy of ";

fn copy_path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// Keeps `text`, which loaded as `settings`, as the last valid copy of its file (0600, under
/// the runtime dir's `state/`). Only a file is kept: the embedded default needs no copy.
pub fn remember(settings: &Settings, text: &str) -> std::io::Result<()> {
    let ConfigSource::File(path) = &settings.source else {
        return Ok(());
    };
    let kept = format!("{HEADER}{}\n{text}", path.display());
    let at = copy_path(&settings.runtime.state_dir());
    if std::fs::read(&at).is_ok_and(|b| b == kept.as_bytes()) {
        return Ok(());
    }
    crate::layout::create_private_dir(&settings.runtime.state_dir())?;
    crate::layout::write_private(&at, kept.as_bytes())
}

/// Keeps the file `settings` were read from, when it still loads as it is now (it may have
/// been saved again since it was read).
pub fn remember_file(settings: &Settings) -> std::io::Result<()> {
    let ConfigSource::File(path) = &settings.source else {
        return Ok(());
    };
    let text = std::fs::read_to_string(path)?;
    let ctx = ResolveContext::from_env();
    if load_str(&text, "", settings.source.clone(), &ctx).is_ok() {
        remember(settings, &text)?;
    }
    Ok(())
}

/// The last valid copy of `source`'s file, loaded, and where it was kept: looked for under the
/// default runtime dir (`$MCP_BROKER_HOME`, else `~/mcp/mcp-broker`) and under the `runtime.root`
/// the invalid file still names, when it can be read at all.
pub fn recall(source: &ConfigSource, ctx: &ResolveContext) -> Option<(Settings, PathBuf)> {
    let ConfigSource::File(path) = source else {
        return None;
    };
    let mut roots = vec![ctx.runtime_root(None)];
    // The file is invalid, but its `runtime.root` may still be legible.
    if let Some(root) = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| crate::load::runtime_root_hint(&t))
    {
        roots.push(ctx.runtime_root(Some(&root)));
    }
    let header = format!("{HEADER}{}", path.display());
    roots.into_iter().find_map(|root| {
        let at = copy_path(&root.join("state"));
        let kept = std::fs::read_to_string(&at).ok()?;
        let (first, text) = kept.split_once('\n')?;
        if first != header {
            return None;
        }
        let label = format!("{} (last valid copy)", path.display());
        let settings = load_str(text, &label, source.clone(), ctx).ok()?;
        Some((settings, at))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_valid_copy_is_found_for_its_own_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ResolveContext {
            broker_home: Some(dir.path().to_path_buf()),
            ..ResolveContext::default()
        };
        let file = dir.path().join("broker.yaml");
        let good = "schema_version: 1\nupstreams:\n  a: {command: x}\n";
        std::fs::write(&file, good).unwrap();
        let source = ConfigSource::File(file.clone());
        let settings = crate::load(&source, &ctx).unwrap();
        remember(&settings, good).unwrap();
        std::fs::write(&file, "schema_version: 1\nupstreams:\n  a: {comand: x}\n").unwrap();
        assert!(crate::load(&source, &ctx).is_err());
        let (back, at) = recall(&source, &ctx).unwrap();
        assert!(back.upstreams.contains_key("a"));
        assert!(at.starts_with(dir.path().join("state")));
        let other = ConfigSource::File(dir.path().join("other.yaml"));
        assert!(
            recall(&other, &ctx).is_none(),
            "another file's copy is not it"
        );
    }
}
