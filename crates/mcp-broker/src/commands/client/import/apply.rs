//! `client import --apply`: what the dry run showed, written in the order that never leaves a
//! client without its servers: every file checked writable first, backups, secrets, the
//! broker's config, the client's files; then the import's record and the parity check.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Backups, Client, Scope};
use mcpb_config::Settings;

use crate::commands::client::import::profile::ProfileChange;
use crate::commands::client::import::report::{print_table, record_path, say_variables};
use crate::commands::client::import::scan::Stays;
use crate::commands::import::change::{Change, Written};
use crate::commands::import::plan::{Fate, Plan};
use crate::fail;

pub(crate) struct Apply<'a> {
    pub change: &'a Change<'a>,
    pub client: Client,
    pub profile: &'a ProfileChange,
    pub stays: &'a [Stays],
    pub mask: &'a [String],
}

/// Why `path` cannot be written, if it cannot: a read-only file (as `client apply` refuses
/// it), a link to nowhere, or no writable folder to make it in.
fn unwritable(path: &Path) -> Option<String> {
    use rustix::fs::{Access, access};
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() && std::fs::metadata(path).is_err() => {
            return Some("is a link to a file that does not exist".into());
        }
        Ok(_) => {
            let writable = std::fs::metadata(path).is_ok_and(|m| !m.permissions().readonly())
                && access(path, Access::WRITE_OK).is_ok();
            return (!writable)
                .then(|| "is read-only (chmod u+w if the broker may change it)".into());
        }
        Err(_) => {}
    }
    let dir = path.ancestors().skip(1).find(|d| d.exists())?;
    (!(dir.is_dir() && access(dir, Access::WRITE_OK).is_ok()))
        .then(|| format!("cannot be made: {} is not writable", dir.display()))
}

/// The import's record: what parity compares. A later import of the same client adds to it.
fn record(
    settings: &Settings,
    client: Client,
    profile: &str,
    backups: &[(PathBuf, String)],
    plan: &Plan,
) {
    let path = record_path(settings, client);
    let old: serde_json::Value =
        crate::commands::client::import::record::read_record(settings, client)
            .filter(|r| r["profile"] == profile)
            .unwrap_or_default();
    let mut all_backups: Vec<serde_json::Value> =
        old["backups"].as_array().cloned().unwrap_or_default();
    all_backups.extend(
        backups
            .iter()
            .map(|(p, n)| serde_json::json!({"path": p, "backup": n})),
    );
    let new: Vec<serde_json::Value> = plan
        .found
        .iter()
        .filter_map(|f| match &f.fate {
            Fate::Moved(u) | Fate::Same(u) => Some(serde_json::json!({
                "name": f.server.name, "scope": f.place.scope.name(), "folder": f.place.folder,
                "path": f.place.path, "upstream": u, "backup": backups.iter()
                    .find(|(p, _)| p == &f.place.path).map(|(_, n)| n)})),
            Fate::Kept(_) | Fate::Off(_) => None,
        })
        .collect();
    let mut servers: Vec<serde_json::Value> = old["servers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|o| {
            !new.iter().any(|n| {
                n["name"] == o["name"] && n["scope"] == o["scope"] && n["folder"] == o["folder"]
            })
        })
        .collect();
    servers.extend(new);
    let record = serde_json::json!({
        "client": client.name(), "profile": profile, "backups": all_backups, "servers": servers,
    });
    if let Err(e) = mcpb_config::layout::write_private(&path, record.to_string().as_bytes()) {
        errln!("mcp-broker: cannot keep the import's record: {e}");
    }
}

/// Why a running daemon would not take this import: it serves another config file (its
/// reload would not read this one, and the client's new profile would be unknown to it).
pub(crate) fn other_daemon(settings: &Settings, config: &Path) -> Option<String> {
    let reply = crate::daemon_client::admin(settings, mcpb_protocol::AdminCommand::Status)
        .ok()
        .flatten()?;
    let data = reply.data?;
    let serves = data["daemon"]["config"].as_str()?.to_string();
    let same = std::fs::canonicalize(&serves)
        .ok()
        .zip(std::fs::canonicalize(config).ok())
        .is_some_and(|(a, b)| a == b)
        || serves == config.display().to_string();
    (!same).then(|| {
        format!(
            "the running daemon (pid {}) serves {serves}",
            data["daemon"]["pid"]
        )
    })
}

pub(crate) fn apply(x: &Apply<'_>) -> ExitCode {
    match write(x) {
        Ok(written) => report(x, &written),
        Err(code) => code,
    }
}

/// Every check that can refuse the import before anything is written, then the writing.
fn write(x: &Apply<'_>) -> Result<Written, ExitCode> {
    let (settings, client, change) = (x.change.settings, x.client, x.change);
    if let Some(why) = other_daemon(settings, change.config_path) {
        return Err(fail(
            &format!(
                "mcp-broker: {why}, not {}; nothing was written",
                change.config_path.display()
            ),
            &[
                "`mcp-broker stop`, then run the import again: the next client starts the daemon for this file",
            ],
        ));
    }
    for path in change.files.after.keys() {
        if let Some(why) = unwritable(path) {
            return Err(fail(
                &format!("mcp-broker: {} {why}; nothing was written", path.display()),
                &["fix that, then run the import again (a dry run first)"],
            ));
        }
    }
    // A project's file planted as a link (or in a linked folder) is refused before anything
    // is written: the config, the secrets and the backups included.
    let user_file = user_file(client);
    if let Some(e) = change
        .files
        .after
        .keys()
        .filter(|p| **p != user_file)
        .find_map(|p| mcpb_clients::plain_project_file(p).err())
    {
        errln!("mcp-broker: {e}; nothing was written");
        return Err(ExitCode::FAILURE);
    }
    let backups_dir = settings.runtime.backups_dir();
    let take = &mut |path: &Path, before: Option<&str>, after: &str| {
        let b = Backups::new(&backups_dir, client, path);
        b.take(
            path,
            before.map(str::as_bytes),
            &mcpb_clients::sha256(after.as_bytes()),
            mcpb_config::unix_now(),
        )
        .and_then(|t| b.keep_written(&t.name, after.as_bytes()).map(|()| t.name))
        .map_err(|e| e.to_string())
    };
    let message = format!(
        "imported {} server(s) as upstreams, profile {}",
        change.plan.upstreams.len(),
        x.profile.name
    );
    change.write(&message, take, &undo(x))
}

/// The client's user file (its place does not depend on the folder).
fn user_file(client: Client) -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    client.config_path(Scope::User, &home, Path::new("/"))
}

/// How to put each file back, one hint each.
fn undo(x: &Apply<'_>) -> Vec<String> {
    let user_file = user_file(x.client);
    x.change
        .files
        .after
        .keys()
        .map(|p| {
            let user = p == &user_file || crate::commands::client::files::is_companion(x.client, p);
            format!(
                "`mcp-broker client rollback --client {}{}` puts {} back",
                x.client.name(),
                if user { "" } else { " --project" },
                p.display()
            )
        })
        .collect()
}

/// After the writing: the record, what moved and what stays, the backups, then the parity
/// check against the config as written.
fn report(x: &Apply<'_>, written: &Written) -> ExitCode {
    let (settings, client, plan) = (x.change.settings, x.client, x.change.plan);
    record(settings, client, &x.profile.name, &written.files, plan);
    print_table(plan, x.stays, x.mask);
    for line in x.profile.said.iter().chain(&plan.notes) {
        outln!("{line}");
    }
    // What the client still starts itself; a server it does not start either stays in its
    // file but starts nowhere.
    let stays = plan
        .found
        .iter()
        .filter(|f| matches!(f.fate, Fate::Kept(_)))
        .count()
        + x.stays.iter().filter(|s| s.starts).count();
    if stays == 0 {
        outln!(
            "{}: the client starts only the broker now (profile {})",
            client.name(),
            x.profile.name
        );
    } else {
        outln!(
            "{}: the client starts the broker (profile {}) and still {stays} server(s) of its own, listed above",
            client.name(),
            x.profile.name
        );
    }
    for (p, n) in &written.files {
        errln!("backup {n} of {}", p.display());
    }
    if let Some(b) = &written.config {
        errln!(
            "backup {} of {}",
            b.display(),
            x.change.config_path.display()
        );
    }
    say_variables(plan, "the client's file");
    // The config as written now: the daemon that answers must be the one for this file.
    let now = crate::commands::upstream::validate(x.change.config_path, x.change.config_after)
        .unwrap_or_else(|_| settings.clone());
    let parity = crate::commands::client::import::parity::run(&now, client.name(), false);
    if parity == ExitCode::SUCCESS {
        errln!("hint: restart {} to use it", client.name());
    }
    for u in undo(x) {
        errln!("hint: {u}");
    }
    parity
}
