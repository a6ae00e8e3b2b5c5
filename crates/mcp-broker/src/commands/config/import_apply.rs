//! The end of `config import`: a dry run notes what it showed; `--apply` writes exactly that
//! (a backup of broker.yaml, the secrets, then the config, which a running daemon reloads) or
//! nothing, when a file changed in between.

use std::path::Path;
use std::process::ExitCode;

use mcpb_config::Settings;

use crate::cli::ConfigImportArgs;
use crate::commands::client::import::plan::Plan;
use crate::fail;
use crate::out::word;

pub(crate) struct Finish<'a> {
    pub settings: &'a Settings,
    pub args: &'a ConfigImportArgs,
    pub file: &'a Path,
    pub config_path: &'a Path,
    pub before: &'a str,
    pub after: &'a str,
    pub plan: &'a Plan,
}

/// The command again, with or without --apply.
fn again(x: &Finish<'_>, apply: bool) -> String {
    let mut c = format!(
        "mcp-broker config import {}",
        word(&x.file.display().to_string())
    );
    if x.args.profile != "exec-broker" {
        c.push_str(&format!(" --profile {}", word(&x.args.profile)));
    }
    for r in &x.args.rename {
        c.push_str(&format!(" --rename {}", word(r)));
    }
    for s in &x.args.skip {
        c.push_str(&format!(" --skip {}", word(s)));
    }
    if x.args.read_only {
        c.push_str(" --read-only");
    }
    if x.args.no_sandbox {
        c.push_str(" --no-sandbox");
    }
    if apply {
        c.push_str(" --apply");
    }
    c
}

fn note(x: &Finish<'_>) -> serde_json::Value {
    let sha = |t: &[u8]| mcpb_clients::sha256(t);
    let secrets: Vec<(String, String)> = x
        .plan
        .secrets
        .iter()
        .map(|s| (s.name.clone(), sha(s.value.as_bytes())))
        .collect();
    serde_json::json!({
        "file": x.file.display().to_string(),
        "file_sha": std::fs::read(x.file).map(|b| sha(&b)).unwrap_or_default(),
        "config": x.config_path.display().to_string(),
        "config_before": sha(x.before.as_bytes()),
        "config_after": sha(x.after.as_bytes()),
        "secrets": secrets,
    })
}

pub(crate) fn finish(x: &Finish<'_>) -> ExitCode {
    let note_file = x
        .settings
        .runtime
        .state_dir()
        .join("renders")
        .join("config-import.json");
    let now = note(x);
    if !x.args.apply {
        if let Err(e) = x.settings.runtime.ensure().and_then(|()| {
            mcpb_config::layout::write_private(&note_file, now.to_string().as_bytes())
        }) {
            return fail(&format!("mcp-broker: cannot note the dry run: {e}"), &[]);
        }
        errln!("a dry run: nothing was written");
        errln!("hint: `{}` writes all of it", again(x, true));
        return ExitCode::SUCCESS;
    }
    if !crate::commands::client::import::report::seen_in_dry_run(&note_file, &now) {
        return fail(
            "mcp-broker: a file changed since the dry run (or none was made); nothing was written",
            &[&format!("`{}` shows the change", again(x, false))],
        );
    }
    if x.before == x.after && x.plan.secrets.is_empty() {
        errln!("nothing to write: broker.yaml has all of it already");
        return ExitCode::SUCCESS;
    }
    let backups = x.settings.runtime.backups_dir();
    let backup = backups.join(format!("broker.yaml.{}", mcpb_config::unix_now()));
    if let Err(e) = std::fs::create_dir_all(&backups)
        .and_then(|()| mcpb_config::layout::write_private(&backup, x.before.as_bytes()))
    {
        return fail(
            &format!("mcp-broker: no backup could be taken, so nothing was written: {e}"),
            &[],
        );
    }
    if let Err(code) = x.plan.write_secrets(&x.settings.runtime.secrets_dir()) {
        return code;
    }
    let code = crate::commands::upstream::commit(
        x.config_path,
        x.after,
        &format!(
            "imported {} target(s) as upstreams, profile {}",
            x.plan.upstreams.len(),
            x.args.profile
        ),
    );
    if code != ExitCode::SUCCESS {
        return code;
    }
    let _ = std::fs::remove_file(&note_file);
    errln!("backup {} of {}", backup.display(), x.config_path.display());
    errln!(
        "hint: `mcp-broker client apply --client CLIENT --profile {}` points a client at it",
        x.args.profile
    );
    errln!(
        "hint: `mcp-broker profile validate {}` checks each target's probe",
        x.args.profile
    );
    ExitCode::SUCCESS
}
