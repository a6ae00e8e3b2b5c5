//! The end every import shares: what it would write (broker.yaml, the secrets, the source's own
//! files), shown in a dry run whose note `--apply` must find unchanged, then written in the
//! order that never leaves a client without its servers: backups, secrets, broker.yaml (a
//! running daemon reloads), the source's files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_config::Settings;
use serde_json::{Value, json};

use crate::commands::import::plan::Plan;
use crate::fail;

/// Files an import changes besides broker.yaml (a client's), as they are and as it leaves them.
#[derive(Default)]
pub(crate) struct Files {
    pub before: BTreeMap<PathBuf, Option<String>>,
    pub after: BTreeMap<PathBuf, String>,
}

/// One import's change, whatever its source.
pub(crate) struct Change<'a> {
    pub settings: &'a Settings,
    pub plan: &'a Plan,
    pub config_path: &'a Path,
    pub config_before: &'a str,
    pub config_after: &'a str,
    pub files: &'a Files,
    /// Where the dry run's note is kept: one per source (`import-codex.json`).
    pub note_file: PathBuf,
    /// What else the dry run showed that `--apply` must find the same (the source file's hash).
    pub source: Value,
}

/// The backups `Change::write` took.
pub(crate) struct Written {
    /// Each file's, by path.
    pub files: Vec<(PathBuf, String)>,
    /// broker.yaml's, when it changed (`config rollback` puts it back).
    pub config: Option<PathBuf>,
}

/// A backup of one of the source's files: `(path, before, after)` to the backup's name.
pub(crate) type TakeBackup<'f> =
    dyn FnMut(&Path, Option<&str>, &str) -> Result<String, String> + 'f;

impl Change<'_> {
    /// Where the dry run's notes live, by source.
    pub(crate) fn note_path(settings: &Settings, name: &str) -> PathBuf {
        settings
            .runtime
            .state_dir()
            .join("renders")
            .join(format!("{name}.json"))
    }

    /// The hashes of everything the dry run showed.
    fn note(&self) -> Value {
        let sha = |t: &str| mcpb_clients::sha256(t.as_bytes());
        let files: BTreeMap<String, (String, String)> = self
            .files
            .after
            .iter()
            .map(|(p, after)| {
                let before = self.files.before[p].as_deref().unwrap_or("");
                (p.display().to_string(), (sha(before), sha(after)))
            })
            .collect();
        let secrets: Vec<(String, String)> = self
            .plan
            .secrets
            .iter()
            .map(|s| (s.name.clone(), sha(&s.value)))
            .collect();
        json!({
            "files": files,
            "secrets": secrets,
            "config": self.config_path.display().to_string(),
            "config_before": sha(self.config_before),
            "config_after": sha(self.config_after),
            "source": self.source,
        })
    }

    /// The dry run's diffs: broker.yaml, then each file, whose lines taken out are hidden
    /// where they hold one of `mask` (a client's secrets).
    pub(crate) fn print_diffs(&self, mask: &[String]) {
        out!(
            "{}",
            mcpb_clients::diff(self.config_path, self.config_before, self.config_after)
        );
        for (p, after) in &self.files.after {
            let d = mcpb_clients::diff(p, self.files.before[p].as_deref().unwrap_or(""), after);
            out!(
                "{}",
                crate::commands::client::import::scan::masked(&d, mask)
            );
        }
    }

    /// Where each secret goes and how the config names it.
    pub(crate) fn say_secrets(&self) {
        let dir = self.settings.runtime.secrets_dir();
        for s in &self.plan.secrets {
            outln!(
                "secret {} -> {} (0600; the config refers to it as ${{file:{}}})",
                s.from,
                dir.join(&s.name).display(),
                s.name
            );
        }
    }

    /// Notes what the dry run showed, for `--apply` to hold itself to.
    pub(crate) fn note_dry_run(&self) -> Result<(), ExitCode> {
        self.settings
            .runtime
            .ensure()
            .and_then(|()| {
                mcpb_config::layout::write_private(
                    &self.note_file,
                    self.note().to_string().as_bytes(),
                )
            })
            .map_err(|e| fail(&format!("mcp-broker: cannot note the dry run: {e}"), &[]))
    }

    /// Refuses an `--apply` that would write anything but what the last dry run showed.
    /// `dry_run`: the command that shows the change now.
    pub(crate) fn check_seen(&self, dry_run: &str) -> Result<(), ExitCode> {
        let seen = std::fs::read_to_string(&self.note_file)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        if seen.as_ref() == Some(&self.note()) {
            return Ok(());
        }
        Err(fail(
            "mcp-broker: a file changed since the dry run (or none was made); nothing was written",
            &[&format!("`{dry_run}` shows the change")],
        ))
    }

    /// Writes it all: a backup of each file (by `backup`) and of broker.yaml, the secrets,
    /// broker.yaml (`message` says what it gained), then the files. On a failure, what went
    /// wrong is said (with `undo` once broker.yaml is written).
    pub(crate) fn write(
        &self,
        message: &str,
        backup: &mut TakeBackup<'_>,
        undo: &[String],
    ) -> Result<Written, ExitCode> {
        let no_backup = |e: &dyn std::fmt::Display| {
            fail(
                &format!("mcp-broker: no backup could be taken, so nothing was written: {e}"),
                &[],
            )
        };
        self.settings.runtime.ensure().map_err(|e| {
            fail(
                &format!("mcp-broker: cannot make the runtime dir: {e}"),
                &[],
            )
        })?;
        let mut backups = Vec::new();
        for (path, after) in &self.files.after {
            let name = backup(path, self.files.before[path].as_deref(), after)
                .map_err(|e| no_backup(&e))?;
            backups.push((path.clone(), name));
        }
        let config = if self.config_before == self.config_after {
            None
        } else {
            let dir = self.settings.runtime.backups_dir();
            let kept = std::fs::create_dir_all(&dir)
                .and_then(|()| {
                    crate::commands::config::backup::keep(&dir, self.config_before.as_bytes())
                })
                .map_err(|e| no_backup(&e))?;
            Some(kept)
        };
        // Secrets first, then the broker, then the client: a client pointed at the broker
        // before it has the servers (and their secrets) would lose them for a while.
        self.plan
            .write_secrets(&self.settings.runtime.secrets_dir())?;
        let code = crate::commands::upstream::commit(self.config_path, self.config_after, message);
        if code != ExitCode::SUCCESS {
            return Err(code);
        }
        for (path, after) in &self.files.after {
            if let Err(e) = mcpb_clients::write_keeping_mode(path, after.as_bytes()) {
                errln!("mcp-broker: {e}");
                for u in undo {
                    errln!("hint: {u}");
                }
                return Err(ExitCode::FAILURE);
            }
        }
        let _ = std::fs::remove_file(&self.note_file);
        Ok(Written {
            files: backups,
            config,
        })
    }
}
