//! The end of `config import`, through the import pipeline's change: a dry run notes what it
//! showed; `--apply` writes exactly that (a backup of broker.yaml, the secrets, then the
//! config, which a running daemon reloads) or nothing, when a file changed in between.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::ConfigImportArgs;
use crate::commands::import::change::Change;
use crate::out::word;

/// The command again, with or without --apply.
fn again(args: &ConfigImportArgs, file: &Path, apply: bool) -> String {
    let mut c = format!(
        "mcp-broker config import {}",
        word(&file.display().to_string())
    );
    if args.profile != "exec-broker" {
        c.push_str(&format!(" --profile {}", word(&args.profile)));
    }
    for r in &args.rename {
        c.push_str(&format!(" --rename {}", word(r)));
    }
    for s in &args.skip {
        c.push_str(&format!(" --skip {}", word(s)));
    }
    if args.read_only {
        c.push_str(" --read-only");
    }
    if args.no_sandbox {
        c.push_str(" --no-sandbox");
    }
    if apply {
        c.push_str(" --apply");
    }
    c
}

/// What the dry run saw of the exec broker's file, for `--apply` to find the same.
pub(crate) fn source(file: &Path) -> serde_json::Value {
    let file_sha = std::fs::read(file)
        .map(|b| mcpb_clients::sha256(&b))
        .unwrap_or_default();
    serde_json::json!({"file": file.display().to_string(), "file_sha": file_sha})
}

/// The dry run's note, or `--apply`'s writing, of `change`.
pub(crate) fn finish(change: &Change<'_>, args: &ConfigImportArgs, file: &Path) -> ExitCode {
    if !args.apply {
        if let Err(code) = change.note_dry_run() {
            return code;
        }
        errln!("a dry run: nothing was written");
        errln!("hint: `{}` writes all of it", again(args, file, true));
        return ExitCode::SUCCESS;
    }
    if let Err(code) = change.check_seen(&again(args, file, false)) {
        return code;
    }
    if change.config_before == change.config_after && change.plan.secrets.is_empty() {
        errln!("nothing to write: broker.yaml has all of it already");
        return ExitCode::SUCCESS;
    }
    let message = format!(
        "imported {} target(s) as upstreams, profile {}",
        change.plan.upstreams.len(),
        args.profile
    );
    let no_files = &mut |_: &Path, _: Option<&str>, _: &str| Err("no file of its own".to_string());
    let written = match change.write(&message, no_files, &[]) {
        Ok(w) => w,
        Err(code) => return code,
    };
    if let Some(b) = written.config {
        errln!("backup {} of {}", b.display(), change.config_path.display());
    }
    errln!(
        "hint: `mcp-broker client apply --client CLIENT --profile {}` points a client at it",
        args.profile
    );
    errln!(
        "hint: `mcp-broker profile validate {}` checks each target's probe",
        args.profile
    );
    ExitCode::SUCCESS
}
