//! `mcp-broker service install|uninstall|status [--manager systemd|launchd] [--apply]`: the
//! daemon as a user service. The default is a dry run that prints what would be written. The
//! unit (or LaunchAgent) starts `mcp-broker daemon` with the config in use; an environment
//! file beside it holds the PATH and the variables the config refers to, taken from this
//! shell, for the user to edit (mode 0600: it may hold secrets).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpb_config::{ConfigSource, Settings};

use crate::cli::ServiceCommand;
use crate::fail;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Manager {
    Systemd,
    Launchd,
}

impl Manager {
    /// The `--manager` flag that names it, for hints that must repeat it.
    fn flag(self) -> &'static str {
        match self {
            Manager::Systemd => "--manager systemd",
            Manager::Launchd => "--manager launchd",
        }
    }

    pub(crate) fn parse(name: Option<&str>) -> Self {
        match name {
            Some("launchd") => Manager::Launchd,
            Some(_) => Manager::Systemd,
            None if cfg!(target_os = "macos") => Manager::Launchd,
            None => Manager::Systemd,
        }
    }
}

struct Files {
    unit: PathBuf,
    unit_text: String,
    /// The unit as a dry run shows it: launchd's plist holds the environment's values, which
    /// are shown as the environment file's are (not at all).
    unit_shown: String,
    env: PathBuf,
    env_text: String,
    /// The names in the environment file, and whether each had a value here.
    vars: Vec<(String, bool)>,
}

/// A value for a systemd environment file: quoted, with `\` and `"` escaped.
fn env_value(v: &str) -> String {
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

fn xml(v: &str) -> String {
    v.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The daemon's command line: this binary (or the package's `MCP_BROKER_DAEMON_COMMAND`),
/// the config file in use, `daemon`.
fn daemon_command(settings: &Settings) -> Result<(PathBuf, Vec<String>), String> {
    // A package install names how its daemon is started (a wrapper, an interpreter and a
    // script): words split on spaces, the first the program.
    let command: Vec<String> = std::env::var(mcpb_config::env::DAEMON_COMMAND)
        .ok()
        .map(|c| c.split_whitespace().map(str::to_string).collect())
        .filter(|w: &Vec<String>| !w.is_empty())
        .unwrap_or_default();
    let (exe, mut args) = match command.split_first() {
        Some((first, rest)) => (PathBuf::from(first), rest.to_vec()),
        None => (
            std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .map_err(|e| format!("cannot find this binary: {e}"))?,
            Vec::new(),
        ),
    };
    if let ConfigSource::File(p) = &settings.source {
        let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        args.extend(["--config".to_string(), p.display().to_string()]);
    }
    args.push("daemon".into());
    Ok((exe, args))
}

/// The environment file's text, and each name with whether it had a value here.
fn env_file(settings: &Settings) -> (String, Vec<(String, bool)>) {
    let mut names = vec!["PATH".to_string(), mcpb_config::env::HOME.into()];
    names.extend(settings.daemon_env_names());
    names.dedup();
    let mut vars = Vec::new();
    let mut text = String::from(
        "# The daemon's environment when it runs as a service: edit the values, then restart it.\n",
    );
    for n in &names {
        let value = if n == mcpb_config::env::HOME {
            Some(settings.runtime.root.display().to_string())
        } else {
            std::env::var(n).ok()
        };
        vars.push((n.clone(), value.is_some()));
        match value {
            Some(v) => text.push_str(&format!("{n}={}\n", env_value(&v))),
            None => text.push_str(&format!("# {n}= (not set where this was written)\n")),
        }
    }
    (text, vars)
}

fn files(settings: &Settings, manager: Manager, home: &Path) -> Result<Files, String> {
    let (exe, args) = daemon_command(settings)?;
    let env = settings.runtime.root.join("service.env");
    let (env_text, vars) = env_file(settings);
    let (unit, unit_text, unit_shown) = match manager {
        Manager::Systemd => {
            let text = systemd_unit(&exe, &args, &env);
            (
                home.join(".config/systemd/user/mcp-broker.service"),
                text.clone(),
                text,
            )
        }
        Manager::Launchd => {
            let (text, shown) = launchd_plist(&exe, &args, &env_text);
            (
                home.join("Library/LaunchAgents/dev.mcp-broker.plist"),
                text,
                shown,
            )
        }
    };
    Ok(Files {
        unit,
        unit_text,
        unit_shown,
        env,
        env_text,
        vars,
    })
}

/// systemd's user unit: notify type, the environment file, restarts on failure.
fn systemd_unit(exe: &Path, args: &[String], env: &Path) -> String {
    let quoted: Vec<String> = std::iter::once(exe.display().to_string())
        .chain(args.iter().cloned())
        .map(|a| {
            if a.contains(' ') {
                format!("\"{a}\"")
            } else {
                a
            }
        })
        .collect();
    format!(
        "[Unit]\nDescription=mcp-broker: one local daemon in front of all your MCP servers\n\n[Service]\nType=notify\nEnvironment={}={}\nEnvironmentFile=-{}\nExecStart={}\nRestart=on-failure\nRestartSec=2\n\n[Install]\nWantedBy=default.target\n",
        crate::heap::VAR,
        crate::heap::tunables(None),
        env.display(),
        quoted.join(" ")
    )
}

/// launchd's agent plist, and the same as a dry run shows it: the environment's values are
/// in the plist itself, so they are shown as the environment file's are (not at all).
fn launchd_plist(exe: &Path, args: &[String], env_text: &str) -> (String, String) {
    let mut program = format!("    <string>{}</string>\n", xml(&exe.display().to_string()));
    for a in args {
        program.push_str(&format!("    <string>{}</string>\n", xml(a)));
    }
    let mut envs = String::new();
    let mut shown = String::new();
    for line in env_text.lines().filter(|l| !l.starts_with('#')) {
        if let Some((k, v)) = line.split_once('=') {
            let v = v
                .trim_matches('"')
                .replace("\\\"", "\"")
                .replace("\\\\", "\\");
            envs.push_str(&format!(
                "    <key>{}</key><string>{}</string>\n",
                xml(k),
                xml(&v)
            ));
            shown.push_str(&format!(
                "    <key>{}</key><string>{}</string>\n",
                xml(k),
                if k == mcpb_config::env::HOME {
                    xml(&v)
                } else {
                    xml("<as set in this shell>")
                }
            ));
        }
    }
    let plist = |envs: &str| {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n<dict>\n  <key>Label</key><string>dev.mcp-broker</string>\n  <key>ProgramArguments</key>\n  <array>\n{program}  </array>\n  <key>EnvironmentVariables</key>\n  <dict>\n{envs}  </dict>\n  <key>RunAtLoad</key><true/>\n  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>\n</dict>\n</plist>\n"
        )
    };
    (plist(&envs), plist(&shown))
}

/// The files for this user, or why they cannot be made.
fn prepare(settings: &Settings, manager: Manager) -> Result<Files, ExitCode> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .ok_or_else(|| fail("mcp-broker: HOME is not set to an absolute path", &[]))?;
    files(settings, manager, &home).map_err(|e| fail(&format!("mcp-broker: {e}"), &[]))
}

/// Runs a service manager's command; its output, or why it failed (its own words).
fn manage(program: &str, args: &[&str]) -> Result<String, String> {
    match std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => {
            let said = String::from_utf8_lossy(&o.stderr);
            let said = said.lines().next().unwrap_or("").trim().to_string();
            Err(if said.is_empty() {
                format!("`{program} {}` failed ({})", args.join(" "), o.status)
            } else {
                said
            })
        }
        Err(e) => Err(format!("{program}: {e}")),
    }
}

/// Whether a service manager for this user answers: None, or why not.
fn manager_missing(manager: Manager) -> Option<String> {
    match manager {
        Manager::Systemd => manage("systemctl", &["--user", "show-environment"]).err(),
        Manager::Launchd if !cfg!(target_os = "macos") => {
            Some("launchd runs on macOS only".to_string())
        }
        Manager::Launchd => manage("launchctl", &["version"]).err(),
    }
}

/// Enables and starts the installed service; the daemon this shell may have started is
/// stopped first, or the service's would find its socket taken.
fn start_service(settings: &Settings, manager: Manager, unit: &Path) -> ExitCode {
    let _ = crate::daemon_client::admin(settings, mcpb_protocol::AdminCommand::Stop);
    let steps: Vec<(&str, Vec<String>)> = match manager {
        Manager::Systemd => vec![
            ("systemctl", vec!["--user".into(), "daemon-reload".into()]),
            (
                "systemctl",
                vec![
                    "--user".into(),
                    "enable".into(),
                    "--now".into(),
                    "mcp-broker".into(),
                ],
            ),
        ],
        Manager::Launchd => vec![(
            "launchctl",
            vec!["load".into(), "-w".into(), unit.display().to_string()],
        )],
    };
    for (program, args) in &steps {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Err(e) = manage(program, &args) {
            return fail(
                &format!("mcp-broker: `{program} {}` failed: {e}", args.join(" ")),
                &["the files are written; `mcp-broker service status` shows how it stands"],
            );
        }
    }
    outln!("the service is enabled and started");
    ExitCode::SUCCESS
}

pub(crate) fn install(settings: &Settings, manager: Manager, apply: bool, start: bool) -> ExitCode {
    let f = match prepare(settings, manager) {
        Ok(f) => f,
        Err(code) => return code,
    };
    if !apply {
        outln!("# {}", f.unit.display());
        out!("{}", mcpb_redact::redact(&f.unit_shown));
        outln!();
        outln!("# {} (mode 0600; values not shown here)", f.env.display());
        for (n, set) in &f.vars {
            outln!(
                "{n}={}",
                if *set {
                    "<as set in this shell>"
                } else {
                    "<not set>"
                }
            );
        }
        errln!("a dry run: nothing was written");
        errln!(
            "hint: `mcp-broker service install {} --apply` writes both",
            manager.flag()
        );
        return ExitCode::SUCCESS;
    }
    if let Err(e) = settings.runtime.ensure() {
        return fail(
            &format!("mcp-broker: cannot make the runtime dir: {e}"),
            &[],
        );
    }
    if let Err(e) = mcpb_config::layout::write_private(&f.env, f.env_text.as_bytes()) {
        return fail(
            &format!("mcp-broker: cannot write {}: {e}", f.env.display()),
            &[],
        );
    }
    if let Err(e) = mcpb_clients::write_keeping_mode(&f.unit, f.unit_text.as_bytes()) {
        return fail(&format!("mcp-broker: {e}"), &[]);
    }
    outln!("wrote {} and {}", f.unit.display(), f.env.display());
    let missing: Vec<&str> = f
        .vars
        .iter()
        .filter(|(_, s)| !s)
        .map(|(n, _)| n.as_str())
        .collect();
    if !missing.is_empty() {
        errln!(
            "mcp-broker: not set here, so not in the service's environment: {}",
            missing.join(", ")
        );
        errln!("hint: add them to {}", f.env.display());
    }
    if !start {
        errln!(
            "hint: `mcp-broker service install {} --apply` without --no-start enables and starts it",
            manager.flag()
        );
        return ExitCode::SUCCESS;
    }
    if let Some(why) = manager_missing(manager) {
        errln!(
            "mcp-broker: no {} answers for this user ({why}); the files are written but nothing was started",
            match manager {
                Manager::Systemd => "systemd user manager",
                Manager::Launchd => "launchd",
            }
        );
        errln!("hint: clients still start the daemon themselves; `mcp-broker start` starts it now");
        if manager == Manager::Systemd {
            errln!(
                "hint: on a server without a login session, `loginctl enable-linger $USER` gives you a user manager"
            );
        }
        return ExitCode::SUCCESS;
    }
    start_service(settings, manager, &f.unit)
}

/// The unit file of `manager`'s service, when one is installed.
pub(crate) fn installed_unit(settings: &Settings, manager: Manager) -> Option<PathBuf> {
    prepare(settings, manager)
        .ok()
        .map(|f| f.unit)
        .filter(|u| u.exists())
}

/// Stops the service (when its manager answers), then removes its unit: a unit removed
/// first would leave the service running with nothing to stop it by.
pub(crate) fn uninstall(settings: &Settings, manager: Manager, apply: bool) -> ExitCode {
    let f = match prepare(settings, manager) {
        Ok(f) => f,
        Err(code) => return code,
    };
    if !f.unit.exists() {
        errln!("{} is not installed", f.unit.display());
        return ExitCode::SUCCESS;
    }
    let stop: Vec<(&str, Vec<String>)> = match manager {
        Manager::Systemd => vec![
            (
                "systemctl",
                vec![
                    "--user".into(),
                    "disable".into(),
                    "--now".into(),
                    "mcp-broker".into(),
                ],
            ),
            ("systemctl", vec!["--user".into(), "daemon-reload".into()]),
        ],
        Manager::Launchd => vec![(
            "launchctl",
            vec!["unload".into(), "-w".into(), f.unit.display().to_string()],
        )],
    };
    let shown = |(p, a): &(&str, Vec<String>)| format!("`{p} {}`", a.join(" "));
    if !apply {
        outln!(
            "would stop the service ({}), then remove {} (the environment file {} stays)",
            stop.first().map(shown).unwrap_or_default(),
            f.unit.display(),
            f.env.display()
        );
        errln!(
            "hint: `mcp-broker service uninstall {} --apply` does it",
            manager.flag()
        );
        return ExitCode::SUCCESS;
    }
    let managed = manager_missing(manager).is_none();
    if managed {
        // The unload comes before the unit goes; the reload after, so it forgets the unit.
        let (first, rest) = stop.split_at(1);
        for step in first {
            let args: Vec<&str> = step.1.iter().map(String::as_str).collect();
            if let Err(e) = manage(step.0, &args) {
                return fail(
                    &format!("mcp-broker: {} failed: {e}; the unit stays", shown(step)),
                    &["`mcp-broker service status` shows how it stands"],
                );
            }
        }
        outln!("stopped and disabled the service");
        if let Err(e) = std::fs::remove_file(&f.unit) {
            return fail(
                &format!("mcp-broker: cannot remove {}: {e}", f.unit.display()),
                &[],
            );
        }
        for step in rest {
            let args: Vec<&str> = step.1.iter().map(String::as_str).collect();
            let _ = manage(step.0, &args);
        }
    } else if let Err(e) = std::fs::remove_file(&f.unit) {
        return fail(
            &format!("mcp-broker: cannot remove {}: {e}", f.unit.display()),
            &[],
        );
    }
    outln!("removed {}", f.unit.display());
    ExitCode::SUCCESS
}

pub(crate) fn status(settings: &Settings, manager: Manager) -> ExitCode {
    let f = match prepare(settings, manager) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let state = match std::fs::read_to_string(&f.unit) {
        Err(_) => "not installed".to_string(),
        Ok(t) if t == f.unit_text => "installed, current".to_string(),
        Ok(_) => "installed, differs from what `service install` writes now".to_string(),
    };
    // What the manager says of it: written is not running.
    let running = match (manager_missing(manager), manager) {
        (Some(why), _) => format!("no service manager answers ({why}): not run as a service"),
        (None, Manager::Systemd) => {
            match manage("systemctl", &["--user", "is-active", "mcp-broker"]) {
                Ok(s) => s,
                Err(s) if !s.is_empty() => s,
                Err(_) => "inactive".into(),
            }
        }
        (None, Manager::Launchd) => match manage("launchctl", &["list", "dev.mcp-broker"]) {
            Ok(_) => "loaded".into(),
            Err(_) => "not loaded".into(),
        },
    };
    outln!("{}: {state}; {running}", f.unit.display());
    ExitCode::SUCCESS
}

/// `service load` (`true`) or `service unload`: the installed unit handed to the manager, or
/// taken back from it; the unit file stays either way.
pub(crate) fn load(settings: &Settings, manager: Manager, load: bool) -> ExitCode {
    let f = match prepare(settings, manager) {
        Ok(f) => f,
        Err(code) => return code,
    };
    if !f.unit.exists() {
        return fail(
            &format!("mcp-broker: {} is not installed", f.unit.display()),
            &[&format!(
                "`mcp-broker service install {} --apply` writes it",
                manager.flag()
            )],
        );
    }
    if let Some(why) = manager_missing(manager) {
        return fail(
            &format!("mcp-broker: no service manager answers: {why}"),
            &["run the daemon yourself meanwhile: `mcp-broker start`"],
        );
    }
    let unit = f.unit.display().to_string();
    let steps: Vec<(&str, Vec<&str>)> = match (manager, load) {
        (Manager::Systemd, true) => vec![
            ("systemctl", vec!["--user", "daemon-reload"]),
            ("systemctl", vec!["--user", "start", "mcp-broker"]),
        ],
        (Manager::Systemd, false) => vec![("systemctl", vec!["--user", "stop", "mcp-broker"])],
        (Manager::Launchd, true) => vec![("launchctl", vec!["load", "-w", &unit])],
        (Manager::Launchd, false) => vec![("launchctl", vec!["unload", "-w", &unit])],
    };
    if load {
        // The daemon this shell may have started holds the socket the service's would take.
        let _ = crate::daemon_client::admin(settings, mcpb_protocol::AdminCommand::Stop);
    }
    for (program, args) in &steps {
        if let Err(e) = manage(program, args) {
            return fail(
                &format!("mcp-broker: `{program} {}` failed: {e}", args.join(" ")),
                &["`mcp-broker service status` shows how it stands"],
            );
        }
    }
    outln!(
        "{}",
        if load {
            "the service manager runs the daemon"
        } else {
            "the service manager stopped the daemon; the unit stays installed"
        }
    );
    ExitCode::SUCCESS
}

/// `mcp-broker service …`.
pub(crate) fn run(s: &Settings, command: ServiceCommand, manager: Option<&str>) -> ExitCode {
    let m = Manager::parse(manager);
    match command {
        ServiceCommand::Install { apply, no_start } => install(s, m, apply, !no_start),
        ServiceCommand::Uninstall { apply } => uninstall(s, m, apply),
        ServiceCommand::Status => status(s, m),
        ServiceCommand::Load => load(s, m, true),
        ServiceCommand::Unload => load(s, m, false),
    }
}
