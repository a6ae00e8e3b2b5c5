//! `mcp-broker uninstall [--apply] [--purge] [--force]`: every client file the broker changed
//! is put back (each backup it still holds of that file, newest first: every client, every
//! scope, every project folder it wrote in), then the service is stopped and its unit removed,
//! then the daemon is stopped. The config, secrets, logs and state stay unless `--purge`. A
//! dry run unless `--apply`. Nothing after the rollbacks happens when one of them fails: a
//! client still pointed at the broker keeps working.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_clients::{Backup, Backups, Client, Scope};
use mcpb_config::Settings;
use mcpb_protocol::AdminCommand;

use crate::cli::UninstallArgs;
use crate::commands::service::{self, Manager};
use crate::fail;

/// A client file the broker changed, with the backups it still holds of it (oldest first).
struct Changed {
    client: Client,
    path: PathBuf,
    backups: Vec<Backup>,
}

fn changed_files(root: &Path) -> Vec<Changed> {
    let mut out = Vec::new();
    for client in Client::ALL {
        for path in Backups::files(root, client) {
            let backups = Backups::new(root, client, &path).list();
            if !backups.is_empty() {
                out.push(Changed {
                    client,
                    path,
                    backups,
                });
            }
        }
    }
    out
}

/// The daemon's pid, when one answers on this config's socket (none is started to ask).
fn running_daemon(settings: &Settings) -> Option<u32> {
    crate::daemon_client::admin(settings, AdminCommand::Status)
        .ok()
        .flatten()
        .map(|r| r.daemon_pid)
}

/// Whether `root` is a broker's runtime dir that `--purge` may delete: never the home itself
/// or a folder above it, and only one that holds the broker's own tree.
fn purgeable(root: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let above_home = home.as_deref().is_some_and(|h| h.starts_with(root));
    !above_home
        && root.components().count() > 2
        && root.join("state").is_dir()
        && root.join("sockets").is_dir()
}

pub(crate) fn run(settings: &Settings, a: &UninstallArgs) -> ExitCode {
    let backups_root = settings.runtime.backups_dir();
    let files = changed_files(&backups_root);
    let manager = Manager::parse(None);
    let unit = service::installed_unit(settings, manager);
    let daemon = running_daemon(settings);
    if !a.apply {
        for f in &files {
            outln!(
                "put back  {}  ({}: the broker's {} change{} taken back)",
                f.path.display(),
                f.client.name(),
                f.backups.len(),
                if f.backups.len() == 1 { "" } else { "s" }
            );
        }
        if files.is_empty() {
            outln!("no client file holds a change of the broker's");
        }
        match &unit {
            Some(u) => outln!("stop      the service, then remove {}", u.display()),
            None => outln!("no service unit is installed"),
        }
        match daemon {
            Some(pid) => outln!("stop      the daemon (pid {pid})"),
            None => outln!("no daemon is running"),
        }
        say_kept(settings, &backups_root, a.purge);
        errln!("a dry run: nothing was changed");
        errln!(
            "hint: `mcp-broker uninstall --apply{}` does it",
            if a.purge { " --purge" } else { "" }
        );
        return ExitCode::SUCCESS;
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut failed = Vec::new();
    for f in &files {
        match put_back(f, &backups_root, &home, a.force) {
            Ok(n) => outln!(
                "{}: put back ({n} change{} of the broker's taken back)",
                f.path.display(),
                if n == 1 { "" } else { "s" }
            ),
            Err(e) => {
                errln!("mcp-broker: {}: {e}", f.path.display());
                failed.push(f.path.display().to_string());
            }
        }
    }
    if !failed.is_empty() {
        return fail(
            &format!(
                "mcp-broker: {} file(s) could not be put back; the service, the daemon and the broker's files stay, so the clients still pointed at it keep working",
                failed.len()
            ),
            &[
                "`mcp-broker client render --client C` shows how a client's file stands now",
                "`mcp-broker uninstall --apply --force` puts the backups back anyway (a change made since is lost)",
            ],
        );
    }
    if unit.is_some() {
        let code = service::uninstall(settings, manager, true);
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    if daemon.is_some() {
        let code = crate::commands::daemon::stop(settings);
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    if a.purge {
        if let Err(code) = purge(settings, &backups_root) {
            return code;
        }
    } else {
        say_kept(settings, &backups_root, false);
    }
    outln!(
        "mcp-broker is uninstalled: {} client file(s) put back",
        files.len()
    );
    errln!(
        "hint: the binary stays; remove it the way it was installed (e.g. `cargo uninstall mcp-broker`)"
    );
    ExitCode::SUCCESS
}

/// Takes back each of the broker's changes to one file, newest first; how many.
fn put_back(f: &Changed, root: &Path, home: &Path, force: bool) -> Result<usize, String> {
    // A project's file planted as a link since is never written through.
    if f.path != f.client.config_path(Scope::User, home, Path::new("/")) {
        mcpb_clients::plain_project_file(&f.path).map_err(|e| e.to_string())?;
    }
    let backups = Backups::new(root, f.client, &f.path);
    let mut n = 0;
    for b in f.backups.iter().rev() {
        backups
            .restore(Some(&b.name), f.client.name(), force)
            .map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok(n)
}

fn say_kept(settings: &Settings, backups_root: &Path, purge: bool) {
    let root = &settings.runtime.root;
    if purge {
        if purgeable(root) {
            outln!(
                "remove    {} (config, secrets, logs, state)",
                root.display()
            );
        } else {
            outln!(
                "keep      {} (not a runtime dir the broker may delete)",
                root.display()
            );
        }
        outln!("remove    {}", backups_root.display());
        if let mcpb_config::ConfigSource::File(p) = &settings.source
            && !p.starts_with(root)
        {
            outln!(
                "keep      {} (the config, outside the runtime dir)",
                p.display()
            );
        }
    } else {
        outln!(
            "keep      {} (config, secrets, logs, state) and {}; --purge removes them",
            root.display(),
            backups_root.display()
        );
    }
}

/// What the broker keeps in its runtime dir: all `--purge` removes from it. Anything else there
/// (a user's own files, when the runtime dir is a folder of theirs) stays, and so does the dir.
const OWN: &[&str] = &[
    "logs",
    "run",
    "secrets",
    "sockets",
    "state",
    "models",
    "backups",
    "broker.yaml",
    "broker.schema.json",
    "service.env",
];

fn purge(settings: &Settings, backups_root: &Path) -> Result<(), ExitCode> {
    let root = &settings.runtime.root;
    let cannot = |p: &Path, e: std::io::Error| {
        fail(
            &format!("mcp-broker: cannot remove {}: {e}", p.display()),
            &[],
        )
    };
    if backups_root.exists() {
        std::fs::remove_dir_all(backups_root).map_err(|e| cannot(backups_root, e))?;
        outln!("removed {}", backups_root.display());
        // The folders made to hold them, when nothing else is in them.
        for up in backups_root.ancestors().skip(1).take(2) {
            if up.ends_with("mcp-broker/backups") || up.ends_with("state/mcp-broker") {
                let _ = std::fs::remove_dir(up);
            }
        }
    }
    if !purgeable(root) {
        errln!(
            "mcp-broker: {} was kept: it is not a runtime dir the broker may delete",
            root.display()
        );
        return Ok(());
    }
    for name in OWN {
        let p = root.join(name);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p).map_err(|e| cannot(&p, e))?,
            Ok(_) => std::fs::remove_file(&p).map_err(|e| cannot(&p, e))?,
            Err(_) => {}
        }
    }
    if std::fs::remove_dir(root).is_ok() {
        outln!("removed {}", root.display());
    } else {
        outln!(
            "removed the broker's files from {}; the rest there is not the broker's and stays",
            root.display()
        );
    }
    // `~/mcp` of the default `~/mcp/mcp-broker`, when nothing else is in it.
    if root.ends_with(mcpb_config::layout::DEFAULT_ROOT)
        && let Some(parent) = root.parent()
    {
        let _ = std::fs::remove_dir(parent);
    }
    Ok(())
}
