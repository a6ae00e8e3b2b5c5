//! The shim's refusal to run a home or a config of the folder it was started in.
//!
//! A client starts a project's servers in the project's folder, and the project's file is the
//! repository's to write: an entry there that runs the broker with `MCP_BROKER_HOME`,
//! `MCP_BROKER_CONFIG` or `--config` pointing into the repository (by any spelling:
//! `/proc/self/cwd/…`, `${workspaceFolder}/…`) would start a daemon on the repository's
//! commands with the user's rights, or start the user's own daemon on them for every client.
//! So the shim resolves both and refuses either inside that folder (or its repository), unless
//! the user allowed it in their own environment (`MCP_BROKER_ALLOW_PROJECT_HOME=1`, which the
//! broker never writes into an entry, so `client import` and `doctor` list an entry that sets it).

use std::path::{Path, PathBuf};

/// The variable that allows a home or config inside the folder the shim was started in.
pub(crate) const ALLOW: &str = mcpb_config::env::ALLOW_PROJECT_HOME;

/// What the shim was told and where it runs.
pub(crate) struct Started<'a> {
    pub cwd: &'a Path,
    /// The user's home as the system knows it (`/etc/passwd`), which no entry can change.
    pub real_home: Option<&'a Path>,
    /// `$HOME` as the shim got it: an entry may set it, and the broker's default home is
    /// under it.
    pub env_home: Option<&'a Path>,
    /// `$MCP_BROKER_HOME`.
    pub broker_home: Option<&'a Path>,
    /// `--config` or `$MCP_BROKER_CONFIG`.
    pub config: Option<&'a Path>,
}

/// Why the shim must not start: (what, resolved path, the folder it lies in).
///
/// The home and config the broker would use (named, or the defaults under `$HOME`) are
/// resolved and refused when they lie inside the folder the client started the shim in (or
/// that folder's repository), or inside any git work tree but the user's own home kept in
/// git: an entry can also set its working directory elsewhere, or `$HOME`. The user's own
/// default home (under the home `/etc/passwd` gives) is always fine.
pub(crate) fn refusal(s: &Started<'_>) -> Option<(&'static str, PathBuf, PathBuf)> {
    let cwd = resolved(s.cwd, s.cwd);
    let real_home = s.real_home.map(|h| resolved(h, s.cwd));
    let own_root = real_home
        .as_ref()
        .map(|h| h.join(mcpb_config::layout::DEFAULT_ROOT));
    // Started in the home folder or above it, there is no project of the cwd's.
    let project = (!real_home.as_ref().is_some_and(|h| h.starts_with(&cwd)))
        .then(|| repository_of(&cwd, real_home.as_deref()).unwrap_or_else(|| cwd.clone()));
    let root = s.broker_home.map(Path::to_path_buf).or_else(|| {
        s.env_home
            .map(|h| h.join(mcpb_config::layout::DEFAULT_ROOT))
    });
    let config = s
        .config
        .map(Path::to_path_buf)
        .or_else(|| root.as_ref().map(|r| r.join("broker.yaml")));
    [("home (MCP_BROKER_HOME)", root), ("config file", config)]
        .into_iter()
        .find_map(|(what, p)| {
            let p = resolved(&p?, s.cwd);
            if own_root.as_ref().is_some_and(|own| p.starts_with(own)) {
                return None;
            }
            let inside = project
                .clone()
                .filter(|dir| p.starts_with(dir))
                .or_else(|| work_tree_of(&p, real_home.as_deref()));
            inside.map(|dir| (what, p, dir))
        })
}

/// The user's home in `/etc/passwd` (read as text: no entry's environment changes it).
fn passwd_home() -> Option<PathBuf> {
    let uid = rustix::process::getuid().as_raw().to_string();
    std::fs::read_to_string("/etc/passwd")
        .ok()?
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 7 && f[2] == uid)
        .map(|f| PathBuf::from(f[5]))
        .filter(|h| h.is_absolute())
}

/// The shim's check with this process's environment; `config` is `--config` if given.
pub(crate) fn check(config: Option<&Path>) -> Result<(), std::process::ExitCode> {
    if std::env::var_os(ALLOW).is_some_and(|v| v == "1") {
        return Ok(());
    }
    let Ok(cwd) = std::env::current_dir() else {
        return Ok(());
    };
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let (env_home, broker_home) = (var("HOME"), var(mcpb_config::env::HOME));
    let real_home = passwd_home().or_else(|| env_home.clone());
    let config = config
        .map(Path::to_path_buf)
        .or_else(|| var(mcpb_config::env::CONFIG));
    let started = Started {
        cwd: &cwd,
        real_home: real_home.as_deref(),
        env_home: env_home.as_deref(),
        broker_home: broker_home.as_deref(),
        config: config.as_deref(),
    };
    match refusal(&started) {
        None => Ok(()),
        Some((what, path, project)) => Err(crate::fail(
            &format!(
                "mcp-broker: refusing a {what} inside a project's folder: {} is in {}",
                path.display(),
                project.display()
            ),
            &[
                "a project's MCP entry could point the broker at the repository's commands; the broker's own entry never does",
                "run `mcp-broker client import --project` there to see the entry, or remove it from the project's file",
                &format!(
                    "if you keep the broker's home in this folder on purpose, set {ALLOW}=1 in your own environment"
                ),
            ],
        )),
    }
}

/// `p` made absolute against `cwd` and resolved through every link that exists; the part that
/// does not exist yet is kept as written (without `.` and `..`).
fn resolved(p: &Path, cwd: &Path) -> PathBuf {
    resolved_within(p, cwd, 40)
}

/// `resolved`, following at most `links` dangling links (a link to a place not made yet
/// leads there once it is made).
fn resolved_within(p: &Path, cwd: &Path, links: usize) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    let mut existing = abs.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                match *part {
                    p if p == ".." => {
                        out.pop();
                    }
                    p if p == "." => {}
                    p => out.push(p),
                }
            }
            return out;
        }
        if links > 0
            && let Ok(target) = std::fs::read_link(existing)
        {
            let parent = existing.parent().unwrap_or(Path::new("/"));
            let mut out = resolved_within(&parent.join(target), cwd, links - 1);
            for part in rest.iter().rev() {
                out.push(part);
            }
            return resolved(&out, cwd);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            // `..` at the end has no file name: step over it as a part of its own.
            (Some(parent), None) => {
                rest.push(std::ffi::OsStr::new(".."));
                existing = parent;
            }
            _ => return abs,
        }
    }
}

/// The repository `cwd` is in: the nearest folder up from it holding `.git`, below the home
/// folder (a home kept in git is no project).
fn repository_of(cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    cwd.ancestors()
        .take_while(|d| home.is_none_or(|h| !h.starts_with(d)))
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The outermost git work tree `p` lies in, but for the home folder kept in git (or a folder
/// above it): a nested checkout (a submodule) is inside its superproject's tree.
fn work_tree_of(p: &Path, home: Option<&Path>) -> Option<PathBuf> {
    p.ancestors()
        .skip(1)
        .filter(|d| home.is_none_or(|h| !h.starts_with(d)))
        .filter(|d| d.join(".git").exists())
        .last()
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `$HOME` left as the system has it.
    fn refused(cwd: &Path, home: &Path, broker_home: Option<&str>, config: Option<&str>) -> bool {
        refused_with(cwd, home, home, broker_home, config)
    }

    fn refused_with(
        cwd: &Path,
        real_home: &Path,
        env_home: &Path,
        broker_home: Option<&str>,
        config: Option<&str>,
    ) -> bool {
        refusal(&Started {
            cwd,
            real_home: Some(real_home),
            env_home: Some(env_home),
            broker_home: broker_home.map(Path::new),
            config: config.map(Path::new),
        })
        .is_some()
    }

    #[test]
    fn a_home_or_config_of_the_project_is_refused_however_it_is_spelt() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let repo = tmp.path().join("src/repo");
        let sub = repo.join("pkg");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(home.join("mcp")).unwrap();
        std::os::unix::fs::symlink(repo.join(".mcpb"), tmp.path().join("link")).unwrap();
        let link = tmp.path().join("link").display().to_string();
        let in_repo = repo.join(".mcpb/broker.yaml").display().to_string();
        let in_repo_home = repo.join(".mcpb").display().to_string();
        for (cwd, h, c) in [
            (&repo, Some(".mcpb"), None),
            (&repo, Some("./x/../.mcpb"), None),
            (&repo, None, Some("broker.yaml")),
            (&repo, None, Some(in_repo.as_str())),
            (&repo, Some(link.as_str()), None),
            // From a subfolder, the repository is the project.
            (&sub, Some("../.mcpb"), None),
            (&sub, None, Some(in_repo.as_str())),
            // Started anywhere else (an entry may set its working directory): a git work
            // tree's folder is still a project's.
            (&tmp.path().to_path_buf(), Some(in_repo_home.as_str()), None),
            (&home, None, Some(in_repo.as_str())),
        ] {
            assert!(refused(cwd, &home, h, c), "{cwd:?} {h:?} {c:?}");
        }
        // The shim resolves /proc/self/cwd as itself: started in the repository, it is there.
        let cwd = std::env::current_dir().unwrap();
        assert!(refused(&cwd, &home, Some("/proc/self/cwd/.mcpb"), None));
        // An entry that sets HOME into the repository moves the default home there.
        for env_home in [repo.join("fake"), repo.clone()] {
            assert!(
                refused_with(&repo, &home, &env_home, None, None),
                "{env_home:?}"
            );
        }
        // A nested checkout (a submodule) is inside its superproject's tree.
        std::fs::write(sub.join(".git"), "gitdir: ../.git/modules/pkg\n").unwrap();
        assert!(refused(&sub, &home, Some("../.mcpb"), None));
    }

    #[test]
    fn the_users_own_places_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let repo = tmp.path().join("src/repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let own = home.join("mcp/mcp-broker").display().to_string();
        let own_cfg = home
            .join("mcp/mcp-broker/broker.yaml")
            .display()
            .to_string();
        let elsewhere = tmp.path().join("srv/broker").display().to_string();
        assert!(!refused(&repo, &home, Some(&own), Some(&own_cfg)));
        assert!(!refused(&repo, &home, None, None));
        assert!(!refused(&repo, &home, Some(&elsewhere), None));
        // Started in the home folder (or above it): the home's files are the user's own.
        assert!(!refused(&home, &home, Some(&own), Some(&own_cfg)));
        assert!(!refused(tmp.path(), &home, Some(&own), None));
        // A home kept in git is no repository of a project below it, nor of its own files.
        std::fs::create_dir_all(home.join(".git")).unwrap();
        let proj = home.join("proj");
        std::fs::create_dir_all(&proj).unwrap();
        assert!(!refused(&proj, &home, Some(&own), None));
        let dotfiles = home.join(".config/mcpb").display().to_string();
        assert!(!refused(&home, &home, Some(&dotfiles), None));
        assert!(refused(&proj, &home, Some("./.mcpb"), None));
    }
}
