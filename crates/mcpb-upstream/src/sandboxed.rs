//! A stdio upstream started in the broker's sandbox: this binary's server mode
//! (`mcp-broker __sandbox-server SPEC PROGRAM ARGS...`) in front of its command. What the server
//! is granted is decided here, where its command line and environment are known: the policy's
//! own paths, its cwd, the paths its arguments name, and the tool directories and caches its
//! command needs.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use mcpb_config::UpstreamSettings;
use mcpb_config::sandbox::{NetworkMode, SandboxPolicy};
use mcpb_sandbox::ServerSpec;

use crate::UpstreamError;

/// Package managers' folders for a server started through one, so it installs and runs as it
/// would outside (paths under the home; only those that exist): (read-write, read-only). The
/// download caches are writable; where a manager keeps what it installed for good (uv's tools
/// and Pythons, pipx's apps, bun's globals), read-only: the user runs those outside the sandbox.
fn caches(program: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match program {
        "npx" | "npm" | "pnpm" | "pnpx" | "yarn" | "node" => {
            (&[".npm", ".cache/node", ".cache/pnpm"], &[])
        }
        "bunx" | "bun" => (&[".bun/install/cache", ".cache/bun"], &[".bun"]),
        "uvx" | "uv" => (&[".cache/uv"], &[".local/share/uv"]),
        "pipx" => (
            &[
                ".local/share/pipx/.cache",
                ".local/pipx/.cache",
                ".cache/pip",
            ],
            &[".local/share/pipx", ".local/pipx"],
        ),
        "python" | "python3" | "pip" | "pip3" => (&[".cache/pip"], &[]),
        _ => (&[], &[]),
    }
}

/// Folders of the home that many programs keep their data, state and programs in: a command
/// line that names one (`XDG_CACHE_HOME=~/.cache`) or a file to make in one is no write grant
/// of it all.
const SHARED: &[&str] = &[
    ".local",
    ".local/share",
    ".local/state",
    ".local/bin",
    ".local/lib",
    ".cache",
];

/// Credential stores and browser profiles under a home: no grant taken from a command line
/// reaches into one (a grant the policy names may).
const PRIVATE: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".config",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".mozilla",
    ".pki",
    ".local/share/keyrings",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d",
    ".vault-token",
    ".gcloud",
    ".oci",
    ".fly",
    ".pulumi",
];

/// The system's own files: read-only to a server whatever its command line names (a script
/// under /usr/lib, an interpreter in its environment).
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/proc",
    "/sys", "/dev", "/run", "/var/lib", "/snap", "/opt",
];

/// The entries of the runtime dir that are the broker's own: never granted (nor any file
/// directly in it: the config, the schema).
const BROKER_OWN: &[&str] = &[
    "secrets", "sockets", "state", "logs", "run", "backups", "models",
];

/// Judges the paths taken from a server's command line, environment and PATH (not the ones
/// its policy names): what they may never be or reach.
struct Screen<'a> {
    home: Option<&'a Path>,
    /// `$HOME` as written, when it is a link to `home`: paths spelled under it are taken as
    /// under `home`.
    home_as_written: Option<PathBuf>,
    runtime_root: &'a Path,
    /// Where a server may have written (its home, its grants, the temp folders): a symlink
    /// found there may be one it planted to be granted its target at the next start.
    planted: Vec<PathBuf>,
}

/// Whether `p` holds the runtime dir `root`, or reaches its broker-owned entries or a file
/// directly in it (its config).
fn touches_broker(root: &Path, p: &Path) -> bool {
    root.starts_with(p)
        || BROKER_OWN.iter().any(|o| p.starts_with(root.join(o)))
        || p.strip_prefix(root).is_ok_and(|rest| {
            rest.components()
                .next()
                .is_some_and(|first| !root.join(first).is_dir())
        })
}

/// `p` without `.` and `..` steps, by the text alone.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other @ std::path::Component::Prefix(_)
            | other @ std::path::Component::RootDir
            | other @ std::path::Component::Normal(_) => out.push(other),
        }
    }
    out
}

impl Screen<'_> {
    /// Whether `p` holds the runtime dir or reaches the broker's own entries in it.
    fn touches_broker(&self, p: &Path) -> bool {
        touches_broker(self.runtime_root, p)
    }

    /// Whether `p` lies where a server may have written.
    fn in_planted(&self, p: &Path) -> bool {
        self.planted.iter().any(|w| p.starts_with(w))
    }

    /// `p` as a grant taken from a command line, or `None` when it may not be one. A path
    /// with a symlink anywhere in it is not one (whoever planted the link, the grant would be
    /// its target): a policy's `fs` names such a path on purpose.
    fn derived(&self, p: &Path) -> Option<PathBuf> {
        let mut p = lexical(p);
        if let (Some(written), Some(home)) = (&self.home_as_written, self.home)
            && let Ok(rest) = p.strip_prefix(written)
        {
            p = home.join(rest);
        }
        if std::fs::canonicalize(&p).is_ok_and(|r| r != p) {
            return None;
        }
        let forbidden = p.components().count() <= 2
            || p.starts_with("/proc")
            || p == Path::new("/")
            || SYSTEM.iter().any(|s| p.starts_with(s))
            || self.touches_broker(&p)
            || self.home.is_some_and(|h| {
                h.starts_with(&p)
                    || PRIVATE
                        .iter()
                        .any(|x| p.starts_with(h.join(x)) || h.join(x).starts_with(&p))
            });
        (!forbidden).then_some(p)
    }

    /// A file directly in the runtime dir that a command line names (a list of tools kept
    /// beside the config): readable, never writable (the config is there).
    fn readable_file_in_root(&self, p: &Path) -> Option<PathBuf> {
        let p = lexical(p);
        let direct = p.parent() == Some(self.runtime_root) && p.is_file();
        let named_as_is = std::fs::canonicalize(&p).is_ok_and(|r| r == p);
        (direct && named_as_is).then_some(p)
    }

    /// What a server may write for a path it names: a folder as it is; for a data file
    /// (there or to be made), the folder it is in, since most servers save by writing a temp
    /// file beside it and renaming it over (a file granted alone cannot be replaced: EBUSY);
    /// for a file in a folder not yet made, the folder above it (one level a server makes).
    fn writable(&self, p: &Path) -> Grant {
        let p = lexical(p);
        // `XDG_CACHE_HOME=~/.cache` or `~/.local/share/mem.db` names no grant of all of it.
        let shared = |f: &Path| {
            self.home
                .is_some_and(|h| SHARED.iter().any(|s| f == h.join(s)))
        };
        if p.is_dir() {
            return match self.derived(&p) {
                Some(d) if !shared(&d) => Grant::Folder(d),
                _ => Grant::None,
            };
        }
        let Some(parent) = p.parent() else {
            return Grant::None;
        };
        let folder = if parent.is_dir() {
            Some(parent.to_path_buf())
        } else {
            parent
                .parent()
                .filter(|g| g.is_dir())
                .map(Path::to_path_buf)
        };
        if let Some(f) = folder.filter(|f| !shared(f))
            && let Some(g) = self.derived(&f)
        {
            return Grant::Folder(g);
        }
        // Its folder is one no grant may hold (the home itself, a shared or system folder):
        // the file alone, when it is there, which the server can rewrite but not replace.
        match p.is_file().then(|| self.derived(&p)).flatten() {
            Some(f) => Grant::FileOnly(f),
            None => Grant::None,
        }
    }
}

/// What `Screen::writable` grants for a path a server names.
enum Grant {
    Folder(PathBuf),
    /// A file whose folder cannot be granted.
    FileOnly(PathBuf),
    None,
}

/// The paths a server's arguments and environment name: `/data`, `--root=/data`, `./repo`
/// (from its cwd), `~/notes` (from its home: servers expand it themselves),
/// `MEMORY_FILE_PATH=/data/memory.jsonl`. A value with white space in it is a script or a
/// sentence, not a path: the words of `sh -c "/x/bin/server --stdio"` name no folder to write.
fn named_paths<'a>(
    values: impl Iterator<Item = &'a str>,
    cwd: Option<&Path>,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in values.filter(|v| !v.contains(char::is_whitespace)) {
        let value = a.split_once('=').map_or(a, |(_, v)| v);
        let p = Path::new(value);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else if let Some(rest) = value.strip_prefix("~/") {
            match home {
                Some(h) => h.join(rest),
                None => continue,
            }
        } else if value.starts_with("./") || value.starts_with("../") || value == "." {
            match cwd {
                Some(c) => c.join(p),
                None => continue,
            }
        } else {
            continue;
        };
        out.push(p);
    }
    out
}

/// The programs a shell's `-c` script runs by absolute path (`sh -c "exec /x/server"`): words
/// that name an executable file. They are read-only installations like the command's; a path
/// the script merely mentions (a file it writes) is not a grant.
fn shell_programs(program: &str, args: &[String]) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if !matches!(program, "sh" | "bash" | "dash" | "zsh" | "ksh") {
        return Vec::new();
    }
    args.windows(2)
        .filter(|w| w[0] == "-c")
        .flat_map(|w| w[1].split_whitespace())
        .map(|w| w.trim_matches(|c: char| matches!(c, '\'' | '"' | ';' | '(' | ')' | '&')))
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from)
        .filter(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .collect()
}

/// A file that is a program or a script: executable, or named like a script.
fn is_code(p: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let script = p.extension().is_some_and(|e| {
        ["js", "mjs", "cjs", "py", "sh", "rb", "pl", "php", "jar"]
            .iter()
            .any(|x| e == *x)
    });
    // The mode bit alone says little (some file systems set it on every file): a program
    // also starts like one.
    let program = || {
        let mut head = [0u8; 4];
        p.metadata()
            .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
            && std::fs::File::open(p)
                .and_then(|mut f| f.read_exact(&mut head))
                .is_ok()
            && (head == *b"\x7fELF" || head.starts_with(b"#!"))
    };
    script || program()
}

/// The interpreter a script's `#!` line names, where its links lead (`/usr/bin/env` and
/// what it runs are found on the PATH, already granted).
fn interpreter(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?.lines().next()?;
    let first = line.strip_prefix("#!")?.split_whitespace().next()?;
    std::fs::canonicalize(first).ok()
}

/// The installation a tool folder belongs to, which the tool needs whole: the folder holding
/// the outermost `node_modules` on the way (an npm prefix), a virtualenv (`pyvenv.cfg`), a
/// version manager's version (`.../versions/<v>/bin`, `.../toolchains/<t>/bin`); otherwise the
/// folder itself (`~/.cargo/bin`, never `~/.cargo`, which holds credentials).
fn install_root(dir: &Path) -> PathBuf {
    let mut npm = None;
    for a in dir.ancestors() {
        if a.file_name().is_some_and(|n| n == "node_modules") {
            npm = a.parent();
        }
        if a.join("pyvenv.cfg").is_file() {
            return a.to_path_buf();
        }
    }
    if let Some(prefix) = npm {
        return prefix.to_path_buf();
    }
    let managed = dir.ends_with("bin")
        && dir
            .components()
            .any(|c| matches!(c.as_os_str().to_str(), Some("versions" | "toolchains")));
    match dir.parent() {
        Some(install) if managed => install.to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// Where a program name is found on `path`.
fn which(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path.split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// The home (resolved), `$HOME` as written when it differs, and the runtime dir (resolved).
fn places(
    env: &BTreeMap<String, String>,
    runtime_root: &Path,
) -> (Option<PathBuf>, Option<PathBuf>, PathBuf) {
    let home = env
        .get("HOME")
        .map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| PathBuf::from(h)));
    let written = env
        .get("HOME")
        .map(PathBuf::from)
        .filter(|h| Some(h) != home.as_ref());
    let root = std::fs::canonicalize(runtime_root).unwrap_or_else(|_| runtime_root.into());
    (home, written, root)
}

/// Why the standard sandbox would keep this server from its ordinary work, if it would: its
/// folder (`cwd`) is one no grant may hold, or it saves a data file directly in such a folder
/// (the home itself, a shared or system folder), where it could rewrite the file but not
/// replace it. An import leaves such a server unsandboxed and says this.
pub fn blind_spot(
    settings: &UpstreamSettings,
    env: &BTreeMap<String, String>,
    runtime_root: &Path,
) -> Option<String> {
    let (home, home_as_written, runtime_root) = places(env, runtime_root);
    let screen = Screen {
        home: home.as_deref(),
        home_as_written,
        runtime_root: &runtime_root,
        planted: Vec::new(),
    };
    if let Some(cwd) = settings.cwd.as_deref().filter(|c| c.is_dir())
        && screen.derived(cwd).is_none()
    {
        return Some(format!(
            "it runs in {}, a folder the sandbox may not grant (the home, a system or private folder, or a link)",
            cwd.display()
        ));
    }
    let values = settings.args.iter().map(String::as_str).chain(
        settings
            .env
            .keys()
            .filter_map(|k| env.get(k).map(String::as_str)),
    );
    named_paths(values, settings.cwd.as_deref(), home.as_deref())
        .into_iter()
        .filter(|p| !(p.is_file() && is_code(p)))
        .find_map(|p| match screen.writable(&p) {
            Grant::None if !p.exists() && home.as_deref().is_some_and(|h| p.starts_with(h)) => {
                Some(format!(
                    "it would make {} in a folder the sandbox may not grant",
                    p.display()
                ))
            }
            Grant::FileOnly(f) => Some(format!(
                "it keeps {} directly in {}, a folder the sandbox may not grant: it could rewrite the file but not replace it (a save through a temp file and a rename fails)",
                f.display(),
                f.parent().unwrap_or(Path::new("/")).display()
            )),
            Grant::Folder(_) | Grant::None => None,
        })
}

/// Grants as they are gathered, with what is meant to stay as the policy says.
struct Gathered {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    /// Writable on purpose even inside a read-only grant: the policy's own and the caches.
    meant: Vec<PathBuf>,
    /// Read-only on purpose: the policy's own and the package managers' installations.
    kept_read_only: Vec<PathBuf>,
}

/// The grants a server gets: (read, write), each path once, a path listed under the policy's
/// `read` never writable. The policy's own paths are taken as written (resolved); the ones
/// taken from its cwd, arguments, environment and PATH are screened (see `Screen`).
pub fn grants(
    settings: &UpstreamSettings,
    policy: &SandboxPolicy,
    env: &BTreeMap<String, String>,
    runtime_root: &Path,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let resolved = |l: &[PathBuf]| -> Vec<PathBuf> {
        l.iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect()
    };
    let (home, home_as_written, runtime_root) = places(env, runtime_root);
    let explicit_read = resolved(&policy.read);
    let explicit_write = resolved(&policy.write);
    let mut g = Gathered {
        read: explicit_read.clone(),
        write: explicit_write.clone(),
        meant: explicit_write,
        kept_read_only: explicit_read.clone(),
    };
    // A server writes only its grants and its private home and /tmp: the host's /tmp is not
    // among them.
    let mut planted: Vec<PathBuf> = vec![runtime_root.clone()];
    planted.extend(home.iter().cloned());
    planted.extend(g.write.iter().cloned());
    planted.extend(settings.cwd.iter().cloned());
    let screen = Screen {
        home: home.as_deref(),
        home_as_written,
        runtime_root: &runtime_root,
        planted,
    };
    g.write
        .extend(settings.cwd.iter().filter_map(|c| screen.derived(c)));
    let named_files = g.named(settings, env, &screen);
    let command = settings.command.clone().unwrap_or_default();
    let program = Path::new(&command)
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    if let Some(home) = &home {
        g.caches(home, &program, &screen);
    }
    let path = env.get("PATH").cloned().unwrap_or_default();
    let mut programs = g.programs(&command, &path, &screen);
    // A script or program it is given by path (`node ~/srv/index.js`) needs its installation
    // too: the modules beside it.
    programs.extend(named_files);
    programs.extend(shell_programs(&program, &settings.args));
    // A command given by path is found there even where it is not followed (under the home).
    programs.extend(Some(PathBuf::from(&command)).filter(|c| c.is_absolute()));
    let hidden_places: Vec<PathBuf> = home
        .iter()
        .cloned()
        .chain([PathBuf::from("/tmp"), runtime_root.clone()])
        .collect();
    g.installations(&path, programs, &hidden_places, &screen);
    g.settle(&explicit_read)
}

impl Gathered {
    /// The paths its arguments and environment name: writable where the screen allows, a
    /// program or script it runs read (the files, for their installations).
    fn named(
        &mut self,
        settings: &UpstreamSettings,
        env: &BTreeMap<String, String>,
        screen: &Screen<'_>,
    ) -> Vec<PathBuf> {
        // The environment's values as the server gets them (its secrets resolved, never kept).
        let values = settings.args.iter().map(String::as_str).chain(
            settings
                .env
                .keys()
                .filter_map(|k| env.get(k).map(String::as_str)),
        );
        let mut named_files = Vec::new();
        for p in named_paths(values, settings.cwd.as_deref(), screen.home) {
            // A program or script it runs (`node /srv/index.js`) is read, never rewritten,
            // and its installation with it.
            if p.is_file() && is_code(&p) {
                named_files.push(p.clone());
                self.read.extend(
                    screen
                        .derived(&p)
                        .or_else(|| screen.readable_file_in_root(&p)),
                );
                continue;
            }
            match screen.writable(&p) {
                Grant::Folder(w) | Grant::FileOnly(w) => self.write.push(w),
                Grant::None => self.read.extend(screen.readable_file_in_root(&p)),
            }
        }
        named_files
    }

    /// The package manager's caches of its program, where they exist.
    fn caches(&mut self, home: &Path, program: &str, screen: &Screen<'_>) {
        let (rw, ro) = caches(program);
        let existing = |list: &'static [&'static str]| {
            list.iter()
                .map(|c| home.join(c))
                .filter(|p| p.exists())
                .filter_map(|p| screen.derived(&p))
                .collect::<Vec<_>>()
        };
        let (rw, ro) = (existing(rw), existing(ro));
        self.meant.extend(rw.iter().cloned());
        self.kept_read_only.extend(ro.iter().cloned());
        self.write.extend(rw);
        self.read.extend(ro);
    }

    /// The command where PATH finds it, where its links lead, and the interpreter its `#!`
    /// names (a venv's script runs a Python that may live under the home); not for a command
    /// where a server may write: its link or `#!` could name anything.
    fn programs(&self, command: &str, path: &str, screen: &Screen<'_>) -> Vec<PathBuf> {
        let found = which(command, path).filter(|f| {
            let f = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
            !screen.in_planted(&f) && !self.write.iter().any(|w| f.starts_with(w))
        });
        let mut programs: Vec<PathBuf> = found.iter().cloned().collect();
        programs.extend(found.as_deref().and_then(|f| std::fs::canonicalize(f).ok()));
        programs.extend(found.as_deref().and_then(interpreter));
        programs
    }

    /// Tools the server runs from places the sandbox hides (the home, /tmp, the runtime
    /// dir): their installation is granted read-only (see `install_root`).
    fn installations(
        &mut self,
        path: &str,
        programs: Vec<PathBuf>,
        hidden_places: &[PathBuf],
        screen: &Screen<'_>,
    ) {
        let installed = programs
            .into_iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf));
        for dir in path.split(':').map(PathBuf::from).chain(installed) {
            let Some(dir) = screen.derived(&dir) else {
                continue;
            };
            if !hidden_places.iter().any(|h| dir.starts_with(h)) || !dir.is_dir() {
                continue;
            }
            let root = install_root(&dir);
            self.read.push(screen.derived(&root).unwrap_or(dir));
        }
    }

    /// (read, write), each path once.
    fn settle(self, explicit_read: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let Gathered {
            mut read,
            mut write,
            meant,
            kept_read_only,
        } = self;
        write.retain(|w| !explicit_read.contains(w));
        // A grant taken from its command line inside one meant read-only (a folder under
        // `fs.read`, a package manager's installation) stays read-only: grants are bound
        // outer first, so it would otherwise be writable there. Inside an installation found
        // for its command (`~/srv/data` beside `~/srv/index.js`) it is the user's to name.
        write.retain(|w| meant.contains(w) || !kept_read_only.iter().any(|r| w.starts_with(r)));
        write.sort();
        write.dedup();
        read.retain(|r| !write.contains(r));
        read.sort();
        read.dedup();
        // A read-only grant inside another one adds nothing, unless a writable one lies
        // between.
        let outer = read.clone();
        read.retain(|r| {
            !outer.iter().any(|o| {
                o != r
                    && r.starts_with(o)
                    && !write.iter().any(|w| w.starts_with(o) && r.starts_with(w))
            })
        });
        (read, write)
    }
}

/// What the server may not see: the broker's runtime dir, covered whole (its grants are
/// bound into the cover), unless it is under the home, which the private home replaces. A
/// grant the policy names that holds the runtime dir, or reaches the broker's own entries in
/// it (secrets, sockets, state...), refuses the start.
fn hidden(root: &Path, home: &Path, policy: &SandboxPolicy) -> Result<Vec<PathBuf>, String> {
    // Judged as they will be bound: `..` and links resolved.
    let resolved = |g: &PathBuf| std::fs::canonicalize(g).unwrap_or_else(|_| lexical(g));
    if let Some(g) = policy
        .read
        .iter()
        .chain(&policy.write)
        .find(|g| touches_broker(root, &resolved(g)))
    {
        return Err(format!(
            "its sandbox grants {}, which would show the broker's own files in {}",
            g.display(),
            root.display()
        ));
    }
    Ok(if root.starts_with(home) {
        Vec::new()
    } else {
        vec![root.to_path_buf()]
    })
}

/// A start: the program, its arguments, its whole environment and its memory cgroup (to
/// remove when it ends).
pub type StartLine = (
    PathBuf,
    Vec<OsString>,
    BTreeMap<String, String>,
    Option<mcpb_sandbox::RunCgroup>,
);

/// What a sandboxed start is decided from before it runs: where the runtime dir is, and the
/// grants (computed once: `status` shows the same ones).
pub(crate) struct Prepared {
    pub runtime_root: PathBuf,
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// Follow its system calls and say what the kernel refused (`sandbox check`).
    pub trace: bool,
}

/// A sandboxed start's program, arguments and memory cgroup.
pub(crate) type Command = (PathBuf, Vec<OsString>, Option<mcpb_sandbox::RunCgroup>);

/// A memory cgroup of `mb` MiB for one start of `upstream`, named after the daemon (swept by
/// the next daemon if this one dies) and the start.
fn memory_cgroup(upstream: &str, mb: u64) -> Result<mcpb_sandbox::RunCgroup, String> {
    static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let base = mcpb_sandbox::CgroupBase::find().ok_or_else(|| {
        "memory_mb needs a memory cgroup the daemon may make, and this machine gives it none"
            .to_string()
    })?;
    let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    base.create(
        std::process::id(),
        &format!("up-{upstream}-{n}"),
        mb.saturating_mul(1 << 20),
    )
}

/// A sandboxed server as the daemon would start it, for a check outside the daemon (its
/// environment's secrets resolved, never shown), traced: it says what the kernel refused it.
pub fn start_line(
    settings: &UpstreamSettings,
    policy: &SandboxPolicy,
    passthrough: &[String],
    runtime_root: &Path,
) -> Result<StartLine, UpstreamError> {
    let lookup = |k: &str| std::env::var(k).ok();
    let env = crate::env::child_env(
        settings,
        passthrough,
        &lookup,
        &runtime_root.join("secrets"),
    )?;
    let (read, write) = grants(settings, policy, &env, runtime_root);
    let prepared = Prepared {
        runtime_root: runtime_root.to_path_buf(),
        read,
        write,
        trace: true,
    };
    let (exe, args, cgroup) = command(settings, policy, &env, &prepared)?;
    Ok((exe, args, env, cgroup))
}

/// The program and arguments that start `settings`' server under `policy`.
pub(crate) fn command(
    settings: &UpstreamSettings,
    policy: &SandboxPolicy,
    env: &BTreeMap<String, String>,
    prepared: &Prepared,
) -> Result<Command, UpstreamError> {
    let runtime_root = prepared.runtime_root.as_path();
    let refused = |reason: String| UpstreamError::Spawn {
        upstream: settings.name.clone(),
        command: settings.command.clone().unwrap_or_default(),
        reason,
    };
    // The home hidden is the one the daemon has: a HOME of the config's choosing would move
    // what is hidden and leave the real one readable.
    if settings.env.contains_key("HOME") {
        return Err(refused(
            "its config sets HOME, but a sandboxed server gets a home of its own".into(),
        ));
    }
    let home = env
        .get("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .ok_or_else(|| refused("the sandbox replaces the home, but HOME is not set".into()))?;
    let private_home = runtime_root
        .join("state/upstreams")
        .join(&settings.name)
        .join("home");
    mcpb_config::layout::create_private_dir(&private_home)
        .map_err(|e| refused(format!("cannot make {}: {e}", private_home.display())))?;
    let private_home = std::fs::canonicalize(&private_home).unwrap_or(private_home);
    let runtime_root = std::fs::canonicalize(runtime_root)
        .map_err(|e| refused(format!("{}: {e}", runtime_root.display())))?;
    let runtime_root = runtime_root.as_path();
    let home = std::fs::canonicalize(&home).unwrap_or(home);
    let hide = hidden(runtime_root, &home, policy).map_err(refused)?;
    let cgroup = policy
        .memory_mb
        .map(|mb| memory_cgroup(&settings.name, mb))
        .transpose()
        .map_err(refused)?;
    let spec = ServerSpec {
        name: settings.name.clone(),
        home: home.clone(),
        private_home,
        hide,
        read: prepared.read.clone(),
        write: prepared.write.clone(),
        network: policy.network == NetworkMode::Host,
        cwd: settings.cwd.clone(),
        host_uid: rustix::process::getuid().as_raw(),
        host_gid: rustix::process::getgid().as_raw(),
        processes: policy.processes,
        tmp_mb: policy.tmp_mb,
        cgroup: cgroup.as_ref().map(|c| mcpb_sandbox::JailCgroup {
            dir: c.dir().to_path_buf(),
            v2: c.is_v2(),
        }),
        trace: prepared.trace,
    };
    let exe = std::env::current_exe()
        .map_err(|e| refused(format!("cannot find the broker's own binary: {e}")))?;
    let mut args: Vec<OsString> = vec![
        mcpb_sandbox::SERVER_ARG.into(),
        serde_json::to_string(&spec)
            .map_err(|e| refused(e.to_string()))?
            .into(),
        settings.command.clone().unwrap_or_default().into(),
    ];
    args.extend(settings.args.iter().map(OsString::from));
    Ok((exe, args, cgroup))
}

#[cfg(test)]
#[path = "sandboxed_tests.rs"]
mod tests;
